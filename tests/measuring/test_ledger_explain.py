"""Why a test left what it left (measuring.ledger.explain and its parts), on real readings of the
CPU backend: the bytes gc.collect() frees of them (never less than none), what a failed test's
traceback keeps (for a call that raised only), the arrays by the line that made them, the programs
by line, what a wider-scope fixture's value holds, and what each owner left alive at the end."""

import gc
import sys

import jax
import jax.numpy as jnp
import pytest

from pytest_tpumem.measuring.ledger import (
    Holder,
    _last_exception,
    explain,
    fixture_holds,
    made_at_end,
    made_by_line,
    traceback_arrays,
)
from pytest_tpumem.readings.between import Between, BetweenTests

TEST = "t.py::test_a"


@pytest.fixture
def reader():
    """A reader whose first reading has taken every array alive before the test as no test's."""
    jnp.ones(1).block_until_ready()
    gc.collect()
    found = BetweenTests()
    found.read("(before the first test)")
    return found


def _ones(n, each):
    out = []
    for _ in range(n):
        out.append(jnp.ones(each))
    return out


def _zeros(each):
    return jnp.zeros(each, dtype=jnp.int8)


def test_arrays_are_added_up_by_the_line_that_made_them_the_largest_first():
    ones, zero = _ones(3, 250), _zeros(2500)  # 3 x 1000 bytes from one line, 2500 from another
    made = made_by_line([*ones, zero])
    assert [(m.site.function, m.nbytes, m.count, m.shape) for m in made] == [
        ("_ones", 3000, 3, "f32[250]"),
        ("_zeros", 2500, 1, "s8[2500]"),
    ]
    assert made_by_line([]) == ()


def test_lines_of_equal_bytes_are_in_the_order_of_their_sites_and_an_unreadable_array_is_skipped():
    ones, zero = _ones(1, 1000), _zeros(4000)

    class Gone:  # an array describe() cannot read
        sharding = property(lambda self: 1 / 0)

    made = made_by_line([zero, Gone(), *ones])
    assert [m.site.function for m in made] == ["_ones", "_zeros"]  # same file: the earlier line first
    assert [m.nbytes for m in made] == [4000, 4000]


def _raises_holding():
    held = jnp.ones(250)
    tree = {"w": jnp.ones(500)}
    raise ValueError(held.shape, tree["w"].shape)


def _caught():
    try:
        _raises_holding()
    except ValueError as e:
        return e


def test_a_tracebacks_frames_keep_the_arrays_in_their_locals_and_pytrees():
    exc = _caught()
    frames = exc.__traceback__.tb_next.tb_frame.f_locals
    held, w = frames["held"], frames["tree"]["w"]
    found = traceback_arrays(exc)
    assert len(found) == 2
    from pytest_tpumem.measuring.ledger import _key

    assert _key(held) in found and _key(w) in found
    assert traceback_arrays(None) == set() and traceback_arrays(ValueError()) == set()  # never raised


def test_the_last_exception_is_pythons_newest_record_of_it(monkeypatch):
    newest, older = ValueError("new"), KeyError("old")
    monkeypatch.setattr(sys, "last_exc", newest, raising=False)
    monkeypatch.setattr(sys, "last_value", older, raising=False)
    assert _last_exception() is newest
    monkeypatch.setattr(sys, "last_exc", None)
    assert _last_exception() is older
    monkeypatch.setattr(sys, "last_value", "not an exception")
    assert _last_exception() is None


def test_where_python_kept_no_exception_there_is_none(monkeypatch):
    older = KeyError("old")
    monkeypatch.delattr(sys, "last_exc", raising=False)  # Python before 3.12 has no last_exc
    monkeypatch.setattr(sys, "last_value", older, raising=False)
    assert _last_exception() is older
    monkeypatch.delattr(sys, "last_value")
    assert _last_exception() is None


def _explain(reader, outcome, values=None, compiled=None, walk=None, reading=None):
    reading = reading if reading is not None else reader.read(TEST)
    return explain(reader, TEST, reading, outcome, values or {}, compiled or {}, walk)


@pytest.fixture
def no_gc():
    """gc's collections left to explain(): the cycle is freed by its gc.collect(), not one before."""
    was_on = gc.isenabled()
    gc.disable()
    yield
    if was_on:
        gc.enable()


def test_what_gc_collect_frees_of_the_residue_is_its_credit_and_the_reading_after_it_is_returned(reader, no_gc):
    kept = jnp.ones(500)  # 2000 bytes, alive
    cycle = [jnp.ones(250)]  # 1000 bytes a reference cycle alone keeps
    cycle.append(cycle)
    reading = reader.read(TEST)
    del cycle
    again, why = _explain(reader, "passed", reading=reading)
    assert reading.owned[TEST] == 3000 and again.owned[TEST] == 2000
    assert why.collected == 1000
    assert why.made[0].nbytes == 2000 and why.made[0].count == 1  # the arrays alive after it
    assert kept.shape == (500,)


def test_nothing_freed_is_no_credit_and_a_residue_under_the_reading_after_is_never_a_negative_one(reader):
    kept = jnp.ones(500)
    _, why = _explain(reader, "passed")
    assert why.collected == 0
    _, why = _explain(reader, "passed", reading=Between(True, owned={TEST: 500}))  # read before it made more
    assert why.collected == 0
    assert kept.shape == (500,)


@pytest.mark.parametrize(
    ("outcome", "held"), [("failed", 3000), ("xfailed", 3000), ("passed", 0), ("error", 0), ("skipped", 0)]
)
def test_a_traceback_keeps_arrays_only_where_the_call_raised(reader, monkeypatch, outcome, held):
    exc = _caught()  # its frames hold 1000 + 2000 bytes the "test" made
    other = jnp.ones(100)  # made by the test, held by no frame of the traceback
    monkeypatch.setattr(sys, "last_exc", exc, raising=False)
    monkeypatch.setattr(sys, "last_value", exc, raising=False)
    _, why = _explain(reader, outcome)
    assert why.traceback == held
    assert other.shape == (100,)


def test_a_buffer_two_arrays_share_is_made_once_and_held_once(reader):
    a = jnp.ones(250)
    alias = jax.make_array_from_single_device_arrays(a.shape, a.sharding, [a])
    _, why = _explain(reader, "passed", values={"global KEEP of t": [alias, a]})
    assert [(m.nbytes, m.count) for m in why.made] == [(1000, 1)]
    assert why.held == (Holder("global KEEP of t", "[0]", 1000),)


def test_the_programs_it_compiled_are_the_most_first_then_by_line(reader):
    _, why = _explain(reader, "passed", compiled={"c.py:1": 1, "b.py:2": 3, "a.py:9": 3, "a.py:1": 1})
    assert why.programs == (("a.py:9", 3), ("b.py:2", 3), ("a.py:1", 1), ("c.py:1", 1))


def test_a_residue_the_reading_after_gc_no_longer_sees_was_all_freed(reader):
    _, why = _explain(reader, "passed", reading=Between(True, owned={TEST: 500}))  # none of it alive now
    assert why.collected == 500 and why.made == ()
    _, why = _explain(reader, "passed", reading=Between(True))  # a reading that saw none of the test's
    assert why.collected == 0


def test_arrays_first_seen_at_the_reading_after_gc_are_the_tests_too(reader):
    reading = reader.read(TEST)
    late = jnp.ones(250)  # made after the reading explain is given (a finalizer's, say)
    again, why = _explain(reader, "passed", reading=reading)
    assert again.owned[TEST] == 1000 and [(m.nbytes, m.count) for m in why.made] == [(1000, 1)]
    assert why.collected == 0
    assert late.shape == (250,)


def test_arrays_no_value_given_holds_are_looked_for_up_their_referrers(reader, monkeypatch):
    import types

    from pytest_tpumem.readings.keepers import Walk

    plant = types.ModuleType("plant")
    monkeypatch.setitem(sys.modules, "plant", plant)
    plant.KEPT = [jnp.ones(250)]
    _, why = _explain(reader, "passed", walk=Walk(5.0))
    assert why.held == (Holder("global KEPT of plant", "[0]", 1000),)
    _, why = _explain(reader, "passed")
    assert why.held == ()  # no walk: not looked for


def test_a_fixtures_value_holds_what_it_made_by_path_the_largest_first(reader):
    before = jnp.ones(2000)  # alive before its setup: not the fixture's
    reader.read("(before)")
    owner = "module fixture params (t.py)"
    value = {"b": jnp.ones(250), "w": jnp.ones(1000), "w_again": None, "old": before}
    value["w_again"] = value["w"]
    reader.read(owner)
    assert fixture_holds(reader, owner, value) == (Holder(owner, "['w']", 4000), Holder(owner, "['b']", 1000))
    assert fixture_holds(reader, "module fixture other (t.py)", value) == ()


def test_what_each_owner_left_alive_at_the_end_is_said_by_line_each_buffer_once(reader):
    a = _ones(1, 250)[0]
    reader.read("t.py::test_a")
    z = _zeros(300)
    reader.read("t.py::test_b")
    found = made_at_end(reader, ["t.py::test_b", "t.py::test_a", "t.py::test_c"])
    assert [(site.function, owner, n) for site, owner, n in found] == [
        ("_zeros", "t.py::test_b", 300),
        ("_ones", "t.py::test_a", 1000),
    ]
    assert a is not None and z is not None


def test_a_jit_closing_over_an_earlier_tests_array_does_not_make_it_the_later_tests(reader):
    """jaxlib makes a second jax.Array on the buffer of an array a jit closes over: the memory is
    the test's that made the array, not the one whose jit made the second (no line two tests left,
    no array the later test made)."""
    kept = _ones(1, 250_000)[0]  # 1 MB, test_a's
    reader.read("t.py::test_a")
    out = jax.jit(lambda v: v + kept[:3])(_zeros(3).astype(jnp.float32))  # test_b's: 12 bytes
    reading = reader.read("t.py::test_b")
    assert (reading.owned["t.py::test_a"], reading.owned["t.py::test_b"]) == (1_000_000, 12)
    found = made_at_end(reader, ["t.py::test_a", "t.py::test_b"])
    assert [(owner, n) for _, owner, n in found] == [("t.py::test_a", 1_000_000), ("t.py::test_b", 12)]
    _, why = explain(reader, "t.py::test_b", reading, "passed", {}, {})
    assert [(m.nbytes, m.count) for m in why.made] == [(12, 1)]
    _, why = explain(reader, "t.py::test_a", reading, "passed", {}, {})
    assert [(m.site.function, m.nbytes, m.count) for m in why.made] == [("_ones", 1_000_000, 1)]
    assert out.shape == (3,)
