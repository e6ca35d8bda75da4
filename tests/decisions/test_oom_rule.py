"""decisions.oom on real jax errors: an out-of-memory is jax's runtime error whose text starts with
RESOURCE_EXHAUSTED (after any leading blank), none where jax was never imported; ``free`` lets go of
what the failed code's frames held; OomResult.of keeps every figure it is given."""

import gc
import sys
import types
import weakref

import jax
import jax.numpy as jnp

from pytest_tpumem.decisions.oom import OomResult, free, is_oom
from pytest_tpumem.decisions.peak import DevicePeak, PeakReport
from pytest_tpumem.decisions.verdict import Verdict


def test_an_out_of_memory_after_a_leading_blank_is_one():
    assert is_oom(jax.errors.JaxRuntimeError("\n  RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes."))


def test_nothing_is_an_out_of_memory_where_jax_was_never_imported(monkeypatch):
    error = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")
    monkeypatch.delitem(sys.modules, "jax")
    assert is_oom(error) is False
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))  # a jax without its errors module
    assert is_oom(error) is False


class Held:
    """What a failed test's frame holds (an object a weak reference can watch)."""

    def __init__(self, array):
        self.array = array


def test_free_lets_go_of_what_the_failed_code_s_frames_held():
    def fails():
        held = Held(jnp.ones((1000,), jnp.float32))
        watch.append(weakref.ref(held))
        raise ValueError("RESOURCE_EXHAUSTED: as if")

    watch = []
    try:
        fails()
    except ValueError as e:
        error = e
    kept = error.__traceback__  # pytest's report keeps the traceback: its frames must be cleared
    gc.collect()
    assert watch[0]() is not None  # the frame still holds it
    free(error)
    assert watch[0]() is None and error.__traceback__ is None and kept is not None


def test_an_oom_result_keeps_every_figure_it_is_given():
    d = DevicePeak("gpu:0", 0, 70, "program", {"program": 70}, 100, False)
    peak = PeakReport({"gpu:0": d}, None)
    error = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory\nmore")
    later = OomResult.of(error, "in this test", 64, peak, (3, 5), {"gpu:0": 96})
    assert (later.error, later.during, later.limit, later.peak, later.run) == (
        "RESOURCE_EXHAUSTED: Out of memory",
        "in this test",
        64,
        peak,
        (3, 5),
    )
    assert later.figures == {"gpu:0": 96} and later.verdict is Verdict.OOM and later.failed
    first = OomResult.of(error, "in this test", peak=peak)
    assert (first.run, first.at_failure, first.figures) == (None, {}, {"gpu:0": 70})
