"""What a test named for host memory left in numpy arrays (measuring.ledger.NumpyLooks), on real
numpy arrays and a real walk of the heap: what no look before saw, by the keeper that holds it (its
largest array's path first, "and N more"), the largest keeper first, the test after which the look
before was taken, and a look that forgets an array once it dies."""

import functools
import gc
import sys
import tracemalloc
import types

import numpy as np
import pytest

from pytest_tpumem.measuring.ledger import BEFORE_TESTS, HostArrays, NumpyLooks
from pytest_tpumem.readings.keepers import Walk

MB = 2**20


@pytest.fixture
def plant():
    """A helper module of the suite's, as ``import plant`` makes one (its own imports included)."""
    module = types.ModuleType("plant")
    module.np = np
    sys.modules["plant"] = module
    yield module
    del sys.modules["plant"]


@pytest.fixture
def looks():
    gc.collect()
    found = NumpyLooks(MB)
    found.start()
    return found


def _past(walk):
    walk.deadline = walk.began - 1
    return walk


def test_what_no_look_saw_is_told_by_keeper_the_largest_keeper_first(plant, looks):
    plant._KEPT = [np.ones(MB // 8), np.ones(MB // 2), np.ones(MB // 2)]  # 1, 4 and 4 MiB of float64
    plant.TABLE = {"x": np.ones(MB, dtype=np.uint8)}  # 1 MiB, the threshold itself
    plant.SMALL = np.ones(MB // 8 - 1)  # under it: not looked at
    found = looks.look("t.py::test_a", "", Walk(5.0), {"b.py:2": 1, "a.py:1": 1, "c.py:3": 4})
    assert found.numpy == (
        HostArrays("global _KEPT of plant at [1] and 2 more", 9 * MB, 3, "f64[524288]"),
        HostArrays("global TABLE of plant at ['x']", MB, 1, "u8[1048576]"),
    )
    assert found.since == "" and found.cut is False
    assert found.programs == (("c.py:3", 4), ("a.py:1", 1), ("b.py:2", 1))


def test_a_second_look_tells_only_what_is_new_and_the_test_after_which_the_look_before_was_taken(plant, looks):
    plant.A = np.ones(MB // 8)
    first = looks.look("t.py::test_a", "", Walk(5.0), {})
    assert [h.keeper for h in first.numpy] == ["global A of plant"]
    plant.B = np.ones(MB // 8)
    again = looks.look("t.py::test_c", "t.py::test_b", Walk(5.0), {})  # test_b was not looked after
    assert [h.keeper for h in again.numpy] == ["global B of plant"] and again.since == "t.py::test_a"
    assert looks.look("t.py::test_d", "t.py::test_c", Walk(5.0), {}).since == ""  # the look just before


def test_where_no_look_was_taken_since_the_first_test_began_it_says_so(plant, looks):
    plant.A = np.ones(MB // 8)
    found = looks.look("t.py::test_b", "t.py::test_a", Walk(5.0), {})
    assert found.since == BEFORE_TESTS and [h.nbytes for h in found.numpy] == [MB]


def test_past_the_deadline_the_arrays_have_no_keeper_and_the_look_says_it_was_cut(plant, looks):
    walk = Walk(5.0)
    plant.A = np.ones(MB // 8)
    found = walk.numpy_arrays(MB)
    walk.numpy_arrays = lambda min_bytes: found  # the heap's walk done in time, the keepers' not
    looked = looks.look("t.py::test_a", "", _past(walk), {})
    assert looked.numpy == (HostArrays("", MB, 1, "f64[131072]"),) and looked.cut is True


def test_a_view_is_told_by_the_memory_it_views_and_each_memory_once(plant, looks):
    base = np.ones(MB // 4)  # 2 MiB
    plant.V = [base[::2], base[1::2]]
    found = looks.look("t.py::test_a", "", Walk(5.0), {})
    assert [(h.nbytes, h.count) for h in found.numpy] == [(2 * MB, 1)]
    del base


def test_an_array_seen_is_forgotten_when_it_dies_and_one_without_weak_references_is_skipped():
    class Unreferenced:
        __slots__ = ("base",)

    odd = Unreferenced()
    odd.base = None
    kept = np.ones(4)
    looks = NumpyLooks(MB)
    before = len(looks.seen)
    looks._remember([(odd, None, None), (kept, None, None)])
    assert id(kept) in looks.seen and len(looks.seen) == before + 1
    del kept
    gc.collect()
    assert len(looks.seen) == before


def test_a_keepers_bytes_are_all_its_arrays_and_its_first_path_that_of_the_largest_then_the_shortest(plant, looks):
    plant.ONE = np.ones(MB * 3 // 8)  # 3 MiB in one array
    plant.TWO = {"b": np.ones(MB // 4), "a": np.ones(MB // 4)}  # 2 + 2 MiB
    found = looks.look("t.py::test_a", "", Walk(5.0), {})
    assert [(h.keeper, h.nbytes, h.count) for h in found.numpy] == [
        ("global TWO of plant at ['a'] and 1 more", 4 * MB, 2),
        ("global ONE of plant", 3 * MB, 1),
    ]
    plant.ELEVEN = [np.ones(MB // 8) for _ in range(11)]
    plant.ELEVEN[10] = np.ones(MB // 4)
    plant.ELEVEN[9] = np.ones(MB // 4)
    found = looks.look("t.py::test_b", "t.py::test_a", Walk(5.0), {})
    assert [h.keeper for h in found.numpy] == ["global ELEVEN of plant at [9] and 10 more"]  # "[9]" before "[10]"


def _load(n):
    return np.ones(n)


def test_a_keeper_with_no_path_is_named_alone(plant, looks):
    plant.load = functools.cache(_load)
    plant.load(MB // 8)
    plant.load(MB // 4)
    found = looks.look("t.py::test_a", "", Walk(5.0), {})
    assert [(h.keeper, h.nbytes) for h in found.numpy] == [(f"the functools cache of _load ({__name__})", 3 * MB)]


def test_the_largest_arrays_are_looked_for_first_while_time_is_left(plant, looks):
    plant.SMALL = np.ones(MB // 8)
    plant.BIG = np.ones(MB // 2)
    walk = Walk(5.0)
    keeper = walk.keeper

    def one_then_out(*args):
        found = keeper(*args)
        _past(walk)
        return found

    walk.keeper = one_then_out
    found = looks.look("t.py::test_a", "", walk, {})
    assert [(h.keeper, h.nbytes) for h in found.numpy] == [("global BIG of plant", 4 * MB), ("", MB)]
    assert found.cut is True


def test_where_tracemalloc_traces_the_line_that_made_the_largest_array_is_told(plant, looks):
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start(4)
    try:
        plant.KEPT = [np.ones(MB // 8), np.ones(MB // 4)]
        line = sys._getframe().f_lineno - 1
        found = looks.look("t.py::test_a", "", Walk(5.0), {})
    finally:
        if not was_tracing:
            tracemalloc.stop()
    (held,) = found.numpy
    assert held.site is not None and (held.site.file.endswith("test_ledger_numpy_looks.py"), held.site.line) == (
        True,
        line,
    )
