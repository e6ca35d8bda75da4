"""Each test's line from the readings around it (decisions.ledger.line_of), field by field at its
edges (the first reading with a backend, the reading before without one, a peak equal to the mark
before), and the session's lists cut at a top of 0: what --tpumem-clear-caches freed over the run,
the failed tests whose traceback kept their arrays, the patterns of equal size by line."""

import pytest

from pytest_tpumem.decisions.ledger import Line, Pattern, Session, line_of, patterns
from pytest_tpumem.measuring.ledger import Explanation, HostExplanation
from pytest_tpumem.readings.between import Between

MB = 10**6
TEST = "t.py::test_a"


def _after(**kw):
    """The reading after TEST: two GPUs, 40 programs, 1 GB of host memory, TEST's arrays."""
    return Between(
        True,
        {"gpu:0": 500 * MB, "gpu:1": 100 * MB},
        False,
        40,
        1000 * MB,
        owned={TEST: 30 * MB, "t.py::other": 5 * MB},
        compiled={"a.py:1": 3, "b.py:2": 1},
        peaks={"gpu:0": 700 * MB, "gpu:1": 100 * MB, "gpu:2": 0},
        arrays={"gpu:0": 300 * MB, "gpu:1": 60 * MB},
        owned_on={TEST: {"cpu:0": 2 * MB, "cpu:1": 3 * MB, "gpu:0": 25 * MB}, "t.py::other": {"cpu:0": 5 * MB}},
        **kw,
    )


BEFORE = Between(
    True,
    {"gpu:0": 200 * MB, "gpu:3": 50 * MB},
    False,
    30,
    800 * MB,
    peaks={"gpu:0": 600 * MB, "gpu:1": 100 * MB},
    arrays={"gpu:0": 150 * MB},
)


def test_a_line_is_what_changed_since_the_reading_before():
    explanation, host = Explanation(collected=1), HostExplanation(since="t.py::x")
    fixtures, ended = (("module fixture big (t.py)", 4 * MB),), (("class fixture c (t.py)", 0),)
    line = line_of(TEST, 7, "failed", _after(), BEFORE, fixtures, ended, explanation, None, host)
    assert (line.test, line.index, line.outcome, line.started, line.stand_in) == (TEST, 7, "failed", True, False)
    assert line.devices == {"gpu:0": 500 * MB, "gpu:1": 100 * MB}
    assert line.change == {"gpu:0": 300 * MB, "gpu:1": 100 * MB}  # a device the reading before did not have: all
    assert line.peaks == {"gpu:0": 700 * MB, "gpu:2": 0}  # raised the mark, or the first mark of its device
    assert line.residue == 30 * MB and line.host_arrays == 5 * MB  # its arrays on CPU devices: host memory
    assert (line.executables, line.compiled, line.rss, line.grew) == (40, 4, 1000 * MB, 200 * MB)
    assert line.outside == (600 - 360) * MB - (250 - 150) * MB  # what no array holds grew by
    assert (line.fixtures, line.ended, line.explanation, line.host) == (fixtures, ended, explanation, host)
    assert line.backend_started is False and line.cleared is None


def test_the_programs_given_are_the_tests_and_else_the_readings():
    assert line_of(TEST, 1, "passed", _after(), BEFORE).compiled == 4
    assert line_of(TEST, 1, "passed", _after(), BEFORE, compiled={"c.py:3": 2}).compiled == 2
    assert line_of(TEST, 1, "passed", _after(), BEFORE, compiled={}).compiled == 0


@pytest.mark.parametrize("last", [None, Between(False, rss=900 * MB)])
def test_the_first_line_with_a_backend_takes_the_devices_whole_and_started_it(last):
    line = line_of(TEST, 1, "passed", _after(), last)
    assert line.change == {"gpu:0": 500 * MB, "gpu:1": 100 * MB}
    assert line.peaks == {"gpu:0": 700 * MB, "gpu:1": 100 * MB, "gpu:2": 0}
    assert line.outside == 240 * MB and line.backend_started is True
    assert line.grew == (None if last is None else 100 * MB)


def test_a_line_says_where_its_device_figures_are_live_arrays_bytes():
    assert line_of(TEST, 1, "passed", Between(True, {"cpu:0": MB}, True), BEFORE).stand_in is True
    assert line_of(TEST, 1, "passed", _after(), BEFORE).stand_in is False


def test_a_line_without_a_backend_has_host_figures_alone():
    line = line_of(TEST, 2, "passed", Between(False, rss=900 * MB), Between(False, rss=950 * MB))
    assert (line.started, line.devices, line.change, line.peaks) == (False, {}, {}, {})
    assert (line.outside, line.residue, line.host_arrays, line.backend_started) == (0, 0, 0, False)
    assert line.grew == -50 * MB


def test_a_line_after_a_reading_with_a_backend_started_none():
    line = line_of(TEST, 3, "passed", _after(), BEFORE)
    assert line.backend_started is False
    unread = line_of(TEST, 3, "passed", Between(True, {"cpu:0": 0}), Between(True, {"cpu:0": 0}, rss=MB))
    assert unread.grew is None and unread.residue == 0 and unread.host_arrays == 0 and unread.compiled == 0


# --- the session's lists ---------------------------------------------------------------------------


def _lines():
    failed = Explanation(traceback=10 * MB)
    return (
        Line("t.py::a", 1, "passed", True, residue=20 * MB, outside=20 * MB, peaks={"gpu:0": 1}, cleared=(3, 5 * MB)),
        Line("t.py::b", 2, "failed", True, residue=30 * MB, explanation=failed, cleared_host=(1, 2, 3)),
        Line("t.py::c", 3, "xfailed", True, residue=10 * MB, explanation=Explanation(traceback=10 * MB - 1)),
        Line("t.py::d", 4, "passed", True, residue=10 * MB, explanation=failed, cleared=(1, 2 * MB)),
        Line("t.py::e", 5, "error", True, residue=10 * MB, explanation=failed, cleared_host=(10, -20, 30)),
        Line("t.py::f", 6, "failed", True, residue=40 * MB),  # not explained
    )


def test_a_top_of_none_names_none():
    session = Session(None, None, _lines(), 10 * MB)
    for listed in (session.worst, session.grew_outside, session.highest, session.host_worst):
        assert listed(0) == [] and listed(-1) == []
    assert [line.test for line in session.worst(2)] == ["t.py::f", "t.py::a"]
    assert session.named_count() == 5  # b's traceback holds 10 of its 30 MB: 20 left


def test_what_clearing_the_caches_freed_over_the_run():
    session = Session(None, None, _lines(), 10 * MB)
    assert session.cleared() == (2, 4, 7 * MB)
    assert session.cleared_host() == (11, -18, 33)
    assert Session(None, None, (), 10 * MB).cleared() == (0, 0, 0)
    assert Session(None, None, (), 10 * MB).cleared_host() is None


def test_the_tests_whose_traceback_kept_the_threshold_raised_and_were_explained():
    session = Session(None, None, _lines(), 10 * MB)
    assert [line.test for line in session.kept_by_tracebacks()] == ["t.py::b"]


def test_the_host_memory_named_count_is_a_test_a_line():
    lines = tuple(Line(f"t.py::{i}", i, "passed", True, rss=MB, grew=g) for i, g in enumerate([5 * MB, 9 * MB, MB]))
    assert Session(None, None, lines, 10 * MB, host_threshold=5 * MB).host_named_count() == 2


def test_a_session_whose_backend_started_where_host_memory_was_not_read_has_no_start_told():
    lines = (Line("t.py::a", 1, "passed", True, backend_started=True), Line("t.py::b", 2, "passed", True, grew=MB))
    assert Session(None, None, lines, 10 * MB).backend_start() is None


def test_patterns_of_equal_size_are_in_the_order_of_their_lines():
    left = [
        ("b.py:1", "t::1", 5 * MB),
        ("b.py:1", "t::2", 5 * MB),
        ("a.py:1", "t::3", 5 * MB),
        ("a.py:1", "t::4", 5 * MB),
    ]
    compiled = {"d.py:1": {"t::1", "t::2"}, "c.py:1": {"t::3", "t::4"}}
    assert patterns(left, compiled, {"d.py:1": 5, "c.py:1": 5}, 10 * MB) == (
        Pattern("a.py:1", 2, nbytes=10 * MB),
        Pattern("b.py:1", 2, nbytes=10 * MB),
        Pattern("c.py:1", 2, programs=5),
        Pattern("d.py:1", 2, programs=5),
    )


def test_a_line_no_test_or_one_test_compiled_at_and_one_holding_no_program_are_no_pattern():
    compiled = {"a.py:1": {"t::1", "t::2"}, "b.py:1": {"t::1"}}
    assert patterns([], compiled, {"a.py:1": 0, "b.py:1": 4, "c.py:1": 4, None: 4}, 10 * MB) == ()
    assert patterns([], {}, {}, 10 * MB) == ()
