"""Planted for the whole-suite sweep (--tpumem-leak-check=all) and compiled programs (issue 27):
a library function that makes a jit on every call and keeps it must fail its test whatever the
threshold, with the line that compiled it; its clean twins (a jit of a closure that dies with it,
an eager scan of a new function, which jax's own bounded caches keep, a jit compiled once) pass.
A test that calls the leak_check fixture is judged by its own check, never run again by the sweep.
"""

import functools

import jax
import jax.numpy as jnp

_registry = []


def scale_and_register(x):
    """A library function with the bug: a new jit on every call, kept in a registry."""
    step = jax.jit(lambda v: v * 2 + 1)
    _registry.append(step)
    return step(x)


def scale(x):
    """Its clean twin: the closure's program dies with the closure."""
    return jax.jit(lambda v: v * 2 + 1)(x)


@jax.jit
def scale_once(x):
    return x * 2 + 1


def cumulative(x):
    """Eager control flow over a new function each call: compiled every call (slow), and kept by
    jax's own value-keyed caches, which bound themselves: not a leak of the code."""

    def body(carry, v):
        return carry + v, carry

    return jax.lax.scan(body, 0.0, x)[0]


def test_bug_jit_per_call_kept():
    scale_and_register(jnp.ones(100)).block_until_ready()


def test_clean_jit_per_call_dies():
    scale(jnp.ones(100)).block_until_ready()


def test_clean_jit_compiled_once():
    scale_once(jnp.ones(100)).block_until_ready()


def test_clean_eager_scan_of_a_new_function():
    cumulative(jnp.arange(8.0)).block_until_ready()


# A static argument that changes on every call, checked by the leak_check fixture inside the test:
# the fixture's own verdict, not the sweep's, and the same alone or after any other test.
@functools.partial(jax.jit, static_argnames="lr")
def _sgd_static_lr(p, lr):
    return p * (1 - lr)


class _Decaying:
    def __init__(self):
        self.step = 0

    def __call__(self, p):
        self.step += 1
        return _sgd_static_lr(p, lr=0.5**self.step)


def test_bug_fixture_finds_the_growing_cache(leak_check):
    leak_check(_Decaying(), jnp.ones(8), iterations=3, clear_caches=False)


def test_clean_fixture_with_one_program(leak_check):
    leak_check(scale_once, jnp.ones(8), iterations=3, clear_caches=False)
