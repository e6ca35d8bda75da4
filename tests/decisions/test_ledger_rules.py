"""The suite ledger's rules at their boundaries: when a residue is named, when jax's caches are
cleared, what a pattern is, and what a failed test's traceback takes off its residue."""

import pytest

from pytest_tpumem.decisions.ledger import Line, MemoryTrigger, Pattern, clear_now, climb, named, over, patterns
from pytest_tpumem.measuring.ledger import Explanation

MB = 10**6


@pytest.mark.parametrize(
    ("residue", "threshold", "expected"),
    [(10 * MB, 10 * MB, True), (10 * MB - 1, 10 * MB, False), (10 * MB + 1, 10 * MB, True), (5 * MB, 0, False)],
)
def test_a_residue_is_over_from_the_threshold_itself_and_a_zero_threshold_names_nothing(residue, threshold, expected):
    assert over(residue, threshold) is expected


def test_what_only_a_failed_tests_traceback_keeps_is_not_named():
    explained = Explanation(traceback=40 * MB)
    failed = Line("t.py::a", 1, "failed", True, residue=50 * MB, explanation=explained)
    assert failed.left == 10 * MB and named(failed, 10 * MB) and not named(failed, 10 * MB + 1)
    passed = Line("t.py::b", 2, "passed", True, residue=50 * MB, explanation=explained)
    assert passed.left == 50 * MB  # a passed test has no failure's traceback to keep them


@pytest.mark.parametrize(
    ("setting", "module_ends", "programs", "expected"),
    [
        ("off", True, 10**6, False),
        ("test", False, 0, True),
        ("module", False, 10**6, False),
        ("module", True, 0, True),
        (500, False, 500, True),
        (500, True, 499, False),
        (500, False, None, False),  # a jax that cannot list its programs: never
    ],
)
def test_when_jaxs_caches_are_cleared(setting, module_ends, programs, expected):
    assert clear_now(setting, module_ends, programs) is expected


@pytest.mark.parametrize(
    ("trigger", "rss", "limit", "expected"),
    [
        (MemoryTrigger("host", size=600 * MB), 600 * MB, None, True),  # at the size: cleared
        (MemoryTrigger("host", size=600 * MB), 600 * MB - 1, None, False),
        (MemoryTrigger("host", size=600 * MB), None, None, False),  # no RSS read: never
        (MemoryTrigger("host", percent=60), 600 * MB, 1000 * MB, True),  # 60% of the limit exactly
        (MemoryTrigger("host", percent=60), 600 * MB - 1, 1000 * MB, False),
        (MemoryTrigger("host", percent=60), 10**12, None, False),  # no limit read: never
        (MemoryTrigger("host", percent=60), 10**12, 0, False),
    ],
)
def test_when_host_memory_clears_the_caches(trigger, rss, limit, expected):
    assert clear_now(trigger, True, 10**6, rss, limit) is expected
    assert clear_now(trigger, True, 10**6, rss, limit, {"tpu:0": 10**12}, {"tpu:0": 1}) is expected  # host only


def test_when_a_devices_memory_clears_the_caches_each_against_its_own_limit():
    eighty = MemoryTrigger("device", percent=80)
    limits = {"gpu:0": 1000 * MB, "gpu:1": 2000 * MB}
    assert clear_now(eighty, False, 0, 10**12, 10**12, {"gpu:0": 800 * MB, "gpu:1": 0}, limits)
    assert clear_now(eighty, False, 0, None, None, {"gpu:0": 0, "gpu:1": 1600 * MB}, limits)
    assert not clear_now(eighty, False, 0, None, None, {"gpu:0": 800 * MB - 1, "gpu:1": 1600 * MB - 1}, limits)
    assert not clear_now(eighty, False, 0, None, None, {"cpu:0": 10**12}, {})  # no device reports a limit
    assert not clear_now(eighty, False, 0, None, None, None, limits)


def test_a_pattern_is_a_line_two_tests_or_more_left_and_one_test_alone_is_its_own_line():
    left = [("a.py:3", "t::1", 4 * MB), ("a.py:3", "t::2", 4 * MB), ("b.py:9", "t::3", 64 * MB), (None, "t::4", MB)]
    found = patterns(left, {"c.py:5": {"t::1", "t::2"}, "d.py:1": {"t::1"}}, {"c.py:5": 7, "d.py:1": 3}, 8 * MB)
    assert found == (Pattern("a.py:3", 2, nbytes=8 * MB), Pattern("c.py:5", 2, programs=7))


def test_a_patterns_arrays_reach_the_threshold_and_its_programs_a_quarter_of_what_jax_holds():
    left = [("a.py:3", "t::1", 4 * MB), ("a.py:3", "t::2", 4 * MB - 1)]
    assert patterns(left, {}, {}, 8 * MB) == ()  # one byte under
    compiled = {"c.py:5": {"t::1", "t::2"}, "d.py:1": {"t::3", "t::4"}}
    assert patterns([], compiled, {"c.py:5": 25, "d.py:1": 75}, 8 * MB) == (
        Pattern("d.py:1", 2, programs=75),
        Pattern("c.py:5", 2, programs=25),  # a quarter exactly
    )
    assert patterns([], compiled, {"c.py:5": 24, "d.py:1": 76}, 8 * MB) == (Pattern("d.py:1", 2, programs=76),)


# --- pytest-xdist: one account over every worker's session (decisions.ledger.account) -------------

from pytest_tpumem.decisions.ledger import Session, account  # noqa: E402
from pytest_tpumem.measuring.ledger import Holder  # noqa: E402
from pytest_tpumem.readings.between import Between  # noqa: E402


def _session(lines, alive=None, **kw):
    return Session(None, Between(True, {"cpu:0": 0}, owned=alive or {}), tuple(lines), 10 * MB, **kw)


def test_the_account_names_the_worst_tests_over_every_worker_each_with_its_worker():
    gw0 = _session([Line("t.py::a", 1, "passed", True, residue=12 * MB), Line("t.py::b", 2, "passed", True)])
    gw1 = _session([Line("t.py::c", 1, "passed", True, residue=30 * MB)], alive={"t.py::c": 30 * MB})
    gw10 = _session([Line("t.py::d", 1, "passed", True, residue=10 * MB)])
    found = account({"gw10": gw10, "gw1": gw1, "gw0": gw0}, {"gw0": 2, "gw1": 1, "gw10": 1}, {}, [], {}, {}, 10 * MB)
    assert [line.test for line in found.merged.worst(5)] == ["t.py::c", "t.py::a", "t.py::d"]
    assert found.merged.named_count() == 3 and found.merged.worst(1)[0].test == "t.py::c"
    assert found.worker_of == {"t.py::a": "gw0", "t.py::b": "gw0", "t.py::c": "gw1", "t.py::d": "gw10"}
    assert [line.test for line in found.merged.lines] == ["t.py::a", "t.py::b", "t.py::c", "t.py::d"]  # gw1 before gw10
    assert found.merged.alive_at_end("t.py::c") == 30 * MB and found.merged.alive_at_end("t.py::a") == 0


def test_a_crashed_workers_tests_have_no_end_and_the_others_do():
    gw0 = _session([Line("t.py::a", 1, "passed", True, residue=12 * MB)])
    gw1 = _session([Line("t.py::b", 1, "passed", True, residue=12 * MB)])
    found = account({"gw0": gw0, "gw1": gw1}, {"gw0": 1, "gw1": 1}, {"gw0": "t.py::x"}, [], {}, {}, 10 * MB)
    assert found.fate("t.py::a") == "gw0" and found.fate("t.py::b") is None and found.fate("t.py::z") is None


def test_a_pattern_counts_the_tests_of_every_worker():
    """One test on each worker left 6 MB from one line: no worker alone has a pattern, the run has."""
    made = [("a.py:3", "t.py::a", 6 * MB), ("a.py:3", "t.py::b", 6 * MB)]
    found = account({"gw0": _session([]), "gw1": _session([])}, {}, {}, made, {}, {}, 10 * MB)
    assert found.merged.patterns == (Pattern("a.py:3", 2, nbytes=12 * MB),)
    alone = account({"gw0": _session([])}, {}, {}, made[:1], {}, {}, 10 * MB)
    assert alone.merged.patterns == ()


def test_a_fixture_is_named_with_its_worker():
    holds = (("module fixture big (t.py)", (Holder("module fixture big (t.py)", "['w']", 100 * MB),)),)
    gw0 = _session([], fixtures_ended=(("module fixture big (t.py)", 0),), fixture_holds=holds)
    gw1 = _session([], fixtures_ended=(("module fixture big (t.py)", 5 * MB),))
    found = account({"gw0": gw0, "gw1": gw1}, {}, {}, [], {}, {}, 10 * MB)
    assert found.merged.fixtures_ended == (
        ("module fixture big (t.py) on gw0", 0),
        ("module fixture big (t.py) on gw1", 5 * MB),
    )
    assert [owner for owner, _ in found.merged.fixture_holds] == ["module fixture big (t.py) on gw0"]


def test_a_climb_is_told_from_five_percent_of_the_limit_and_while_it_still_rises():
    limit = 1000 * MB
    rising = [100 * MB + i * 10 * MB for i in range(6)]  # +50MB: 5% of the limit
    found = climb(rising, limit)
    assert found is not None and found.rate == 10 * MB and found.over == 6
    assert found.tests_left == (1000 - 150) // 10  # 85 more tests at +10MB a test
    assert climb([r - 1 if i == 5 else r for i, r in enumerate(rising)], limit) is None  # a byte under 5%
    assert climb(rising, None) is None and climb(rising, 0) is None  # no limit known
    assert climb(rising[:2], limit) is None  # two readings make no rate
    flat_end = [100 * MB] + [400 * MB] * 60  # grew once, then flat over the window
    assert climb(flat_end, limit) is None


def test_a_climbs_rate_is_over_the_last_fifty_tests():
    limit = 10_000 * MB
    early = [i * 100 * MB for i in range(10)]  # +100MB a test, then +1MB a test
    late = [early[-1] + (i + 1) * MB for i in range(50)]
    found = climb(early + late, limit)
    assert found is not None and found.over == 50 and abs(found.rate - MB) < 1
    over_limit = climb([0, 600 * MB, 1200 * MB], 1000 * MB)
    assert over_limit is not None and over_limit.tests_left == 0  # already past it


def test_a_slow_climb_and_the_smallest_limit_are_still_read():
    slow = climb([0, 0, 1, 1, 2, 2, 3, 3, 4, 5], 100)  # half a byte a test, past 5% of a 100-byte limit
    assert slow is not None and 0 < slow.rate < 1
    assert MemoryTrigger("host", percent=60).reached(1, 1) and not MemoryTrigger("host", percent=60).reached(0, 1)
    assert str(MemoryTrigger("host", size=600 * MB, text="host:600MB")) == "host:600MB"  # the JSON's settings
    assert str(MemoryTrigger("host", size=600 * MB)) == "host:600000000B"


def _host_line(grew, compiled=0, residue=0, host_arrays=0, backend_started=False, numpy=(), index=1):
    from pytest_tpumem.measuring.ledger import HostArrays, HostExplanation

    host = HostExplanation(numpy=tuple(HostArrays("global K of m", n, 1, "f64[1]") for n in numpy)) if numpy else None
    return Line(
        f"t.py::t{index}",
        index,
        "passed",
        True,
        residue=residue,
        compiled=compiled,
        rss=10**9,
        grew=grew,
        host_arrays=host_arrays,
        backend_started=backend_started,
        host=host,
    )


@pytest.mark.parametrize(
    ("grew", "threshold", "started", "expected"),
    [
        (100 * MB, 100 * MB, False, True),
        (100 * MB - 1, 100 * MB, False, False),
        (100 * MB + 1, 100 * MB, False, True),
        (10**10, 0, False, False),  # 0 names none
        (10**10, 100 * MB, True, False),  # the backend started in it: once a process, told apart
        (None, 100 * MB, False, False),  # no RSS read
        (-(10**9), 100 * MB, False, False),
    ],
)
def test_a_test_is_named_for_host_memory_from_the_threshold_itself(grew, threshold, started, expected):
    from pytest_tpumem.decisions.ledger import host_named

    assert host_named(_host_line(grew, backend_started=started), threshold) is expected


def test_a_programs_host_cost_is_the_median_over_tests_that_compiled_and_kept_nothing_else():
    from pytest_tpumem.decisions.ledger import program_cost

    lines = [
        _host_line(10 * MB, compiled=5, index=1),  # 2 MB a program
        _host_line(9 * MB, compiled=3, index=2),  # 3 MB
        _host_line(4 * MB, compiled=4, index=3),  # 1 MB
        _host_line(14 * MB, compiled=5, host_arrays=4 * MB, index=4),  # 2 MB, its CPU arrays taken off
    ]
    assert program_cost(lines, 10 * MB) == (2 * MB, 4)
    assert program_cost(lines[:3], 10 * MB) == (2 * MB, 3)
    assert program_cost(lines[:2], 10 * MB) is None  # fewer than 3 tests: the runtime does not say, nor do we
    left_out = [
        _host_line(500 * MB, compiled=1, residue=10 * MB, index=5),  # left arrays at the threshold
        _host_line(500 * MB, compiled=1, backend_started=True, index=6),  # started the backend
        _host_line(500 * MB, compiled=1, numpy=(400 * MB,), index=7),  # left numpy arrays
        _host_line(500 * MB, compiled=0, index=8),  # compiled nothing
        _host_line(None, compiled=3, index=9),
    ]
    assert program_cost(lines[:3] + left_out, 10 * MB) == (2 * MB, 3)
    assert program_cost([*lines[:3], _host_line(500 * MB, compiled=1, residue=10 * MB - 1, index=5)], 10 * MB) == (
        int(2.5 * MB),
        4,
    )  # under the threshold it counts, and an even count takes the mean of the middle two
    assert program_cost([_host_line(-(10**9), compiled=1, index=i) for i in range(3)], 10 * MB) == (0, 3)


def test_the_host_named_tests_are_the_most_first_and_the_backends_start_is_found():
    from pytest_tpumem.decisions.ledger import Session

    lines = (
        _host_line(300 * MB, backend_started=True, index=1),
        _host_line(120 * MB, index=2),
        _host_line(150 * MB, index=3),
        _host_line(99 * MB, index=4),
    )
    session = Session(None, None, lines, 10 * MB, host_threshold=100 * MB)
    assert [line.index for line in session.host_worst(5)] == [3, 2]
    assert [line.index for line in session.host_worst(1)] == [3]
    assert session.host_named_count() == 2
    assert session.backend_start() is lines[0]


def test_the_ends_look_runs_where_the_growth_is_not_explained_by_the_backend_and_the_programs():
    from pytest_tpumem.decisions.ledger import end_look_wanted, unexplained_growth

    compiling = [_host_line(10 * MB, compiled=5, index=i) for i in range(3)]  # 2 MB a program, 30 MB grown
    started = _host_line(150 * MB, backend_started=True, index=9)
    lines = [started, *compiling]
    assert unexplained_growth(lines, 15, 10 * MB) == 0  # 180 MB: 150 the backend's, 15 programs x 2 MB
    assert not end_look_wanted(lines, 15, 10 * MB, 1)
    kept = [*lines, _host_line(100 * MB, index=10)]  # 100 MB nothing explains
    assert unexplained_growth(kept, 15, 10 * MB) == 100 * MB
    assert end_look_wanted(kept, 15, 10 * MB, 100 * MB) and not end_look_wanted(kept, 15, 10 * MB, 100 * MB + 1)
    assert not end_look_wanted(kept, 15, 10 * MB, 0)  # --tpumem-host-residue=0: no look
    assert end_look_wanted(compiling[:2], 15, 10 * MB, 100 * MB)  # no measured cost: the look decides
    assert not end_look_wanted([], None, 10 * MB, 100 * MB)


def test_the_host_rules_at_their_edges():
    """Where mutmut found survivors: a threshold of 1 byte, a growth or program count not read, the
    first test of a run not the backend's, a top of 0."""
    from pytest_tpumem.decisions.ledger import Session, end_look_wanted, unexplained_growth

    assert over(1, 1) and not over(0, 1)
    compiling = [_host_line(10 * MB, compiled=5, index=i) for i in range(3)]  # 2 MB a program
    unread_start = Line("t.py::s", 9, "passed", True, backend_started=True)  # its growth not read
    assert unexplained_growth([unread_start, *compiling], 15, 10 * MB) == 0
    assert unexplained_growth(compiling, None, 10 * MB) == 30 * MB  # no programs listed: none taken off
    assert end_look_wanted([*compiling, _host_line(1, index=7)], 15, 10 * MB, 1)  # 1 byte unexplained, 1 byte asked
    lines = (_host_line(150 * MB, index=1), _host_line(300 * MB, backend_started=True, index=2))
    session = Session(None, None, lines, 10 * MB, host_threshold=100 * MB)
    assert session.backend_start() is lines[1]
    assert session.host_worst(0) == [] and session.host_worst(-1) == []


# --- each test's line (line_of) and the lists the summary names, most first ---------------------------


def test_a_tests_outside_growth_is_the_change_since_the_reading_before_it():
    """Device memory no live array holds (programs, the runtime's own) is told as what grew across
    this test, not all the runtime held before it; the first reading with a backend takes it all."""
    from pytest_tpumem.decisions.ledger import line_of

    before = Between(True, {"gpu:0": 300 * MB}, arrays={"gpu:0": 100 * MB})  # 200 MB outside the arrays
    after = Between(True, {"gpu:0": 350 * MB}, arrays={"gpu:0": 120 * MB})  # 230 MB
    assert line_of("t.py::b", 2, "passed", after, before).outside == 30 * MB
    assert line_of("t.py::a", 1, "passed", after, Between(False)).outside == 230 * MB  # the backend started in it
    assert line_of("t.py::a", 1, "passed", after, None).outside == 230 * MB
    assert line_of("t.py::a", 1, "passed", Between(False), before).outside == 0  # no backend: no figure


def test_the_outside_growths_peaks_and_array_patterns_are_told_the_most_first():
    """The summary's lists of tests (device memory no array holds, peaks) and of lines of code that
    several tests left arrays from: the largest first, cut at the top asked for."""
    lines = (
        Line("t.py::a", 1, "passed", True, outside=20 * MB, peaks={"gpu:0": 200 * MB}),
        Line("t.py::b", 2, "passed", True, outside=50 * MB, peaks={"gpu:0": 500 * MB, "gpu:1": 1}),
        Line("t.py::c", 3, "passed", True, outside=10 * MB, peaks={"gpu:1": 300 * MB}),
        Line("t.py::d", 4, "passed", True, outside=10 * MB - 1),
    )
    session = Session(None, None, lines, 10 * MB)
    assert [line.test for line in session.grew_outside(5)] == ["t.py::b", "t.py::a", "t.py::c"]
    assert [line.test for line in session.highest(5)] == ["t.py::b", "t.py::c", "t.py::a"]
    assert [line.test for line in session.grew_outside(1)] == ["t.py::b"] == [x.test for x in session.highest(1)]
    left = [("a.py:3", "t::1", 6 * MB), ("a.py:3", "t::2", 6 * MB), ("b.py:9", "t::3", 20 * MB), ("b.py:9", "t::4", MB)]
    assert patterns(left, {}, {}, 10 * MB) == (
        Pattern("b.py:9", 2, nbytes=21 * MB),
        Pattern("a.py:3", 2, nbytes=12 * MB),
    )
