"""The runner's memory, told in the ledger's summary (telling.ledger.session_lines): how close the
run came to the runner's limit, a climb towards it with when it would reach it, and what the
remedy (--tpumem-clear-caches) freed, step by step."""

import json

from pytest_tpumem.decisions.ledger import Line, Session
from pytest_tpumem.readings.between import Between
from pytest_tpumem.telling.ledger import crash_lines, session_lines

MB = 10**6
LIMIT = (1000 * MB, "/sys/fs/cgroup/ci/memory.max")


def _session(rss, **kw):
    lines = tuple(Line(f"t.py::t{i}", i + 1, "passed", True, {"cpu:0": 0}, True, rss=r) for i, r in enumerate(rss))
    first = Between(True, {"cpu:0": 0}, True, 0, rss[0])
    last = Between(True, {"cpu:0": 0}, True, 0, rss[-1])
    return Session(first, last, lines, 10 * MB, **kw)


def _said(session):
    return "\n".join(session_lines(session, 5))


def test_how_close_the_run_came_and_a_climb_with_when_it_reaches_the_limit():
    said = _said(_session([100 * MB + i * 10 * MB for i in range(6)], host_limit=LIMIT))
    assert (
        "  host RSS: 100.0MB -> 150.0MB; the most after a test 150.0MB, 15% of the runner's 1.0GB "
        "(/sys/fs/cgroup/ci/memory.max)" in said
    ), said
    assert (
        "  host memory climbs 10.0MB a test over the last 6 tests: at that rate it reaches the runner's 1.0GB in "
        "about 85 more tests (--tpumem-clear-caches=host:60% gives memory back before then)" in said
    ), said


def test_with_a_remedy_set_the_climb_does_not_point_at_one():
    said = _said(_session([100 * MB + i * 10 * MB for i in range(6)], host_limit=LIMIT, remedy="module"))
    assert "in about 85 more tests\n" in said + "\n" and "gives memory back" not in said, said


def test_a_flat_run_is_no_climb_and_without_a_limit_nothing_is_said_of_one():
    flat = _said(_session([100 * MB] * 6, host_limit=LIMIT))
    assert "climbs" not in flat and "0% of the runner's 1.0GB" in flat
    unknown = _said(_session([100 * MB + i * 10 * MB for i in range(6)]))
    assert "host RSS: 100.0MB -> 150.0MB\n" in unknown + "\n" and "runner's" not in unknown


def test_the_remedy_says_what_each_step_freed():
    lines = (
        Line("t.py::a", 1, "passed", True, {"cpu:0": 0}, True, rss=300 * MB, cleared=(38, 0), cleared_host=(0, 0, 0)),
        Line(
            "t.py::b",
            2,
            "passed",
            True,
            {"cpu:0": 0},
            True,
            rss=250 * MB,
            cleared=(2, 0),
            cleared_host=(278_500, -1000, 56 * MB),
        ),
    )
    s = Session(
        Between(True, {"cpu:0": 0}, True, 0, 200 * MB),
        Between(True, {"cpu:0": 0}, True, 0, 250 * MB),
        lines,
        10 * MB,
        remedy="host:200MB",
    )
    assert (
        "  jax.clear_caches(), gc.collect() and malloc_trim(0) ran after 2 tests (--tpumem-clear-caches=host:200MB): "
        "they freed 40 programs, 0B on the devices and 56.3MB of host memory (clear_caches 278.5kB, gc -1.0kB, "
        "malloc_trim 56.0MB)" in _said(s)
    ), _said(s)


RECORDS = [
    {"start": "t.py::a", "rss": 100 * MB},
    {"test": "t.py::a", "devices": {"cpu:0": 0}, "executables": 1, "rss": 400 * MB},  # +300MB
    {"start": "t.py::b", "rss": 400 * MB},
    {"test": "t.py::b", "devices": {"cpu:0": 0}, "executables": 2, "rss": 390 * MB},  # shrank: never named
    {"start": "t.py::c", "rss": 395 * MB},
    {"test": "t.py::c", "devices": {"cpu:0": 0}, "executables": 9, "rss": 420 * MB},  # +25MB
    {"start": "t.py::d", "rss": 421 * MB},
]


def test_a_killed_worker_is_told_with_its_last_readings_its_culprits_and_the_oom_killer():
    killed = crash_lines("gw0", "t.py::d", "ledger.gw0.jsonl", RECORDS, oom=((0, "x"), (1, "/cg/memory.oom_control")))
    assert killed[1:] == [
        "  after t.py::c: cpu:0 0B; programs held 9; host RSS 420.0MB",
        "  at the start of t.py::d: host RSS 421.0MB",
        "  the tests that grew its host memory most: t.py::a +300.0MB, t.py::c +25.0MB",
        "  the kernel's OOM killer acted during the run (oom_kill 0 -> 1 in /cg/memory.oom_control): this worker was "
        "most likely killed for memory",
    ]
    other = crash_lines("gw0", "t.py::d", "ledger.gw0.jsonl", RECORDS, oom=((1, "x"), (1, "x")))
    assert not any("OOM killer" in line for line in other)  # no kill counted during the run: not said
    assert not any("OOM killer" in line for line in crash_lines("gw0", "t.py::d", "p", RECORDS))  # none read


def _host_line(test, index, grew, **kw):
    return Line(f"t.py::{test}", index, "passed", True, {"cpu:0": 0}, True, rss=500 * MB, grew=grew, **kw)


def test_a_test_named_for_host_memory_is_told_with_every_explanation_it_has():
    from pytest_tpumem.measuring.ledger import HostArrays, HostExplanation
    from pytest_tpumem.readings.frames import Frame

    site = Frame("t.py", 12, "test_a")
    kept = HostExplanation(
        numpy=(HostArrays("global KEEP of plant at [0] and 2 more", 120 * MB, 3, "f64[5000000]", site),),
        programs=((site, 4),),
    )
    lines = (
        _host_line("started", 1, 180 * MB, backend_started=True),
        _host_line("a", 2, 150 * MB, host=kept, compiled=4, kept_free=2 * MB, host_arrays=16 * MB),
        _host_line("nothing", 3, 110 * MB, host=HostExplanation(since="t.py::a", cut=True)),
        *(_host_line(f"c{i}", 4 + i, 3 * MB, compiled=2) for i in range(3)),  # 1.5 MB a program
    )
    session = Session(
        Between(True, {"cpu:0": 0}, True, 0, 100 * MB),
        Between(True, {"cpu:0": 0}, True, 0, 900 * MB),
        lines,
        10 * MB,
        host_threshold=100 * MB,
    )
    said = session_lines(session, 5)
    start = said.index(
        "2 tests grew the process's host memory (RSS, after it less before it) by 100.0MB or more (--tpumem-host-residue):"
    )
    assert said[start + 1 : start + 12] == [
        "  +150.0MB  t.py::a",
        "      numpy arrays alive: 120.0MB (3 arrays, e.g. f64[5000000]), made at t.py:12 in test_a, kept by global KEEP of plant at [0] and 2 more",
        "      jax arrays it made, alive on the CPU device (host memory on this backend): 16.0MB",
        "      compiled 4 programs jax holds (about 6.0MB: 1.5MB a program: the median over 3 tests that compiled and kept no arrays): 4 at t.py:12 in test_a",
        "      the C allocator holds 2.0MB freed and not given back to the OS after it (glibc; --tpumem-clear-caches' malloc_trim(0) returns it)",
        "  +110.0MB  t.py::nothing",
        "      nothing alive that a walk of the heap reaches explains it (numpy arrays of 1.0MB or more, jax arrays, programs): memory the allocator or a library kept",
        "      the walk stopped at its time limit: there may be more",
        *said[start + 9 : start + 12],
    ]
    assert (
        "  jax's backend started in test 1 of 6: host memory +180.0MB in it (the runtime, its compiler and plugins "
        "load once a process; no test is named for it)" in said
    )
    assert "t.py::started" not in "\n".join(said[start:])


def test_arrays_a_look_found_since_an_earlier_look_say_so():
    from pytest_tpumem.measuring.ledger import BEFORE_TESTS, HostArrays, HostExplanation
    from pytest_tpumem.telling.ledger import host_lines

    arrays = (HostArrays("", 50 * MB, 1, "f32[12500000]"),)
    first = host_lines(_host_line("a", 1, 60 * MB, host=HostExplanation(arrays, since=BEFORE_TESTS)), None)
    later = host_lines(_host_line("b", 5, 60 * MB, host=HostExplanation(arrays, since="t.py::a")), None)
    exact = host_lines(_host_line("c", 6, 60 * MB, host=HostExplanation(arrays)), None)
    assert first[0] == (
        "numpy arrays alive (new since the first test started: the tests before it may have made some): 50.0MB "
        "(1 array, e.g. f32[12500000]), what keeps them was not found in time"
    )
    assert later[0].startswith("numpy arrays alive (new since t.py::a ended: the tests between may have made some): ")
    assert exact[0].startswith("numpy arrays alive: 50.0MB")


def test_no_test_named_for_host_memory_is_said_once_and_a_zero_threshold_says_nothing():
    lines = (_host_line("a", 1, 99 * MB),)
    first, last = Between(True, {"cpu:0": 0}, True, 0, 1), Between(True, {"cpu:0": 0}, True, 0, 1)
    said = session_lines(Session(first, last, lines, 10 * MB, host_threshold=100 * MB), 5)
    assert said.count("no test grew the process's host memory by 100.0MB or more (--tpumem-host-residue)") == 1
    assert not any("host-residue" in s for s in session_lines(Session(first, last, lines, 10 * MB), 5))


def test_the_workers_are_added_up_against_the_runners_whole_limit():
    from pytest_tpumem.decisions.ledger import account
    from pytest_tpumem.telling.ledger import account_lines

    def worker(rss):
        lines = tuple(_host_line(f"w{r}", i + 1, 0) for i, r in enumerate(rss))
        lines = tuple(line.__class__(**{**line.__dict__, "rss": r}) for line, r in zip(lines, rss))
        return Session(None, Between(True, {"cpu:0": 0}, True, 0, rss[-1]), lines, 10 * MB)

    workers = {"gw0": worker([300 * MB, 450 * MB, 400 * MB]), "gw1": worker([200 * MB, 350 * MB])}
    merged = account(workers, {"gw0": 3, "gw1": 2}, {}, [], {}, {}, 10 * MB)
    said = account_lines(merged, 5, {}, (1000 * MB, "/sys/fs/cgroup/ci/memory.max"))
    assert (
        "  the workers together: at most 800.0MB (each worker's most after a test, added), 80% of the runner's "
        "1.0GB (/sys/fs/cgroup/ci/memory.max)" in said
    )
    assert not any("workers together" in s for s in account_lines(merged, 5, {}, None))


def test_a_killed_workers_culprits_are_its_host_growth_and_the_backends_start_is_said():
    records = [
        {"start": "t.py::a", "rss": 100 * MB},
        {
            "test": "t.py::a",
            "devices": {"cpu:0": 0},
            "rss": 280 * MB,
            "host": {"grew": 180 * MB, "backend_started": True},
        },
        {"start": "t.py::b", "rss": 280 * MB},
        {
            "test": "t.py::b",
            "devices": {"cpu:0": 0},
            "rss": 700 * MB,
            "host": {"grew": 300 * MB, "fixtures_grew": 120 * MB},
        },
        {"start": "t.py::c", "rss": 700 * MB},
    ]
    said = crash_lines("gw0", "t.py::c", "ledger.gw0.jsonl", records)
    assert (
        "  the tests that grew its host memory most: t.py::b +300.0MB, t.py::a +180.0MB (jax's backend started in it)"
        in said
    ), said


def test_what_many_tests_kept_in_one_place_is_told_from_the_threshold_and_over_every_worker():
    from pytest_tpumem.decisions.ledger import account
    from pytest_tpumem.measuring.ledger import BEFORE_TESTS, HostArrays, HostExplanation
    from pytest_tpumem.telling.ledger import account_lines

    end = HostExplanation(
        (
            HostArrays("the functools cache of load (data)", 100 * MB, 3, "f64[5000000]"),
            HostArrays("global SMALL of m at [0]", 100 * MB - 1, 1, "f64[1]"),
        ),
        since=BEFORE_TESTS,
    )
    lines = (_host_line("a", 1, 40 * MB), _host_line("b", 2, 40 * MB))
    first, last = Between(True, {"cpu:0": 0}, True, 0, 1), Between(True, {"cpu:0": 0}, True, 0, 1)
    session = Session(first, last, lines, 10 * MB, host_threshold=100 * MB, host_end=end)
    said = session_lines(session, 5)
    kept = [s for s in said if s.startswith("numpy arrays made")]
    assert kept == [
        "numpy arrays made during the run and alive at the end: 100.0MB (3 arrays, e.g. f64[5000000]), kept by the "
        "functools cache of load (data)"
    ]
    merged = account({"gw1": session}, {"gw1": 2}, {}, [], {}, {}, 10 * MB, 100 * MB)
    told = [s for s in account_lines(merged, 5, {}) if s.startswith("numpy arrays made")]
    assert told == [
        "numpy arrays made since each worker's last look and alive at the end: 100.0MB (3 arrays, e.g. "
        "f64[5000000]), kept by the functools cache of load (data) on gw1"
    ]


def test_a_crashed_workers_long_recorder_is_read_from_its_header(tmp_path):
    """A worker that ran thousands of tests wrote megabytes before it died: all of them up to 64 MiB
    are read back, its header and its first tests' readings with them."""
    from pytest_tpumem.telling.ledger import read_recorder, recorder_header

    lines = [recorder_header(1, "gw0", "run-1")] + [
        {"test": f"t.py::t{i}", "devices": {"cpu:0": 0}, "executables": i, "rss": 100 * MB} for i in range(20_000)
    ]
    path = tmp_path / "ledger.gw0.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert path.stat().st_size > 1 << 20  # over a MiB
    assert read_recorder(str(path)) == lines


def test_a_named_tests_lines_past_the_first_three_or_under_its_hundredth_are_counted_in_one_line():
    """A named test's explanation names three lines of code at most, each 1% of its residue or more;
    the rest are one line: how many more lines, and their bytes."""
    from pytest_tpumem.measuring.ledger import Explanation, Made
    from pytest_tpumem.telling.ledger import explanation_lines

    made = tuple(Made(f"t.py:{i} in test_a", n * MB, 1, "f32[1]") for i, n in enumerate((40, 30, 20, 6, 4), 1))
    said = explanation_lines(Line("t.py::a", 1, "passed", True, residue=100 * MB, explanation=Explanation(made)))
    assert said[2:] == ["made at t.py:3 in test_a: 20.0MB (1 array, e.g. f32[1])", "made at 2 more lines: 10.0MB"]
    small = (made[0], Made("t.py:9 in test_a", MB - 1, 1, "f32[1]"))  # under 1% of the residue: not shown by name
    said = explanation_lines(Line("t.py::a", 1, "passed", True, residue=100 * MB, explanation=Explanation(small)))
    assert said == ["made at t.py:1 in test_a: 40.0MB (1 array, e.g. f32[1])", "made at 1 more line: 1000.0kB"]
