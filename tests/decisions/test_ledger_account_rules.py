"""The pytest-xdist account's rules at their edges (decisions.ledger.account and worker_order):
workers in their number's order (gw2 before gw10), the numpy arrays every worker's end found (each
named with its worker, the largest first), host memory named only from a threshold given, the
programs' patterns over every worker, and the end of a test no worker ran."""

import pytest

from pytest_tpumem.decisions.ledger import WORKERS_LOOKS, Line, Pattern, Session, account, worker_order
from pytest_tpumem.measuring.ledger import HostArrays, HostExplanation
from pytest_tpumem.readings.between import Between

MB = 10**6


def _session(lines=(), alive=None, **kw):
    return Session(None, Between(True, {"cpu:0": 0}, owned=alive or {}), tuple(lines), 10 * MB, **kw)


def test_workers_are_in_the_order_of_their_numbers_and_any_other_name_first():
    names = ["gw10", "gw2", "gw1", "main", "gw", "X1", "gw0"]
    assert sorted(names, key=worker_order) == ["X1", "gw", "main", "gw0", "gw1", "gw2", "gw10"]
    assert worker_order("gw12") == (12, "gw12") and worker_order("local") == (-1, "local")


def test_the_merged_lines_are_each_workers_in_the_order_of_the_workers_numbers():
    sessions = {w: _session([Line(f"t.py::{w}", 1, "passed", True)]) for w in ("gw10", "gw2", "gw1")}
    found = account(sessions, {}, {}, [], {}, {}, 10 * MB)
    assert [line.test for line in found.merged.lines] == ["t.py::gw1", "t.py::gw2", "t.py::gw10"]


def _host_end(*arrays):
    return HostExplanation(tuple(HostArrays(keeper, n, 1, "f64[1]") for keeper, n in arrays))


def test_the_numpy_arrays_every_workers_end_found_are_named_with_their_worker_the_largest_first():
    gw0 = _session(host_end=_host_end(("global CACHE of m", 300 * MB), ("", 100 * MB)))
    gw1 = _session(host_end=_host_end(("global TABLE of m", 200 * MB)))
    found = account({"gw1": gw1, "gw0": gw0, "gw2": _session()}, {}, {}, [], {}, {}, 10 * MB, 100 * MB)
    end = found.merged.host_end
    assert end is not None and end.since == WORKERS_LOOKS
    assert [(a.keeper, a.nbytes) for a in end.numpy] == [
        ("global CACHE of m on gw0", 300 * MB),
        ("global TABLE of m on gw1", 200 * MB),
        ("a keeper not found on gw0", 100 * MB),  # the walk found none in time
    ]
    assert [a.keeper for a in found.merged.host_kept()] == [a.keeper for a in end.numpy]  # each at the threshold


def test_where_no_worker_found_numpy_arrays_at_its_end_the_account_has_no_end_look():
    found = account({"gw0": _session(), "gw1": _session(host_end=HostExplanation())}, {}, {}, [], {}, {}, 10 * MB)
    assert found.merged.host_end is None and found.merged.host_kept() == []


def test_host_memory_is_named_only_from_a_threshold_given():
    grew = Line("t.py::a", 1, "passed", True, rss=2 * 10**9, grew=10**9)
    sessions = {"gw0": _session([grew])}
    assert account(sessions, {}, {}, [], {}, {}, 10 * MB).merged.host_named_count() == 0
    assert account(sessions, {}, {}, [], {}, {}, 10 * MB, 10**9).merged.host_named_count() == 1


def test_the_programs_pattern_counts_the_tests_of_every_worker():
    compiled = {"a.py:3": {"t.py::a", "t.py::b"}, "b.py:1": {"t.py::c"}}
    found = account({"gw0": _session(), "gw1": _session()}, {}, {}, [], compiled, {"a.py:3": 9, "b.py:1": 1}, 10 * MB)
    assert found.merged.patterns == (Pattern("a.py:3", 2, programs=9),)


def test_what_is_alive_at_the_end_is_each_tests_own_and_a_session_with_no_end_has_none():
    found = account({"gw0": _session(alive={"t.py::a": 12 * MB, "t.py::b": 0})}, {}, {}, [], {}, {}, 10 * MB)
    assert found.merged.alive_at_end("t.py::a") == 12 * MB and found.merged.alive_at_end("t.py::b") == 0
    assert Session(None, None, (), 10 * MB).alive_at_end("t.py::a") == 0  # no reading at the end


@pytest.mark.parametrize("crashed", [{"gw1": "t.py::x"}, {"": "t.py::x"}])
def test_a_test_no_worker_ran_has_no_fate(crashed):
    found = account({"gw0": _session([Line("t.py::a", 1, "passed", True)])}, {}, crashed, [], {}, {}, 10 * MB)
    assert found.fate("t.py::z") is None and found.fate("t.py::a") is None
