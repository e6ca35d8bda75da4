"""Planted leaks: every one of these must FAIL under leak_check (threshold 10MB, leaks of 16-32MB)."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

N = 4_000_000  # float32: 16 MB

_kept_arrays = []


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_module_list_keeps_arrays():
    x = jnp.ones((N,), jnp.float32) * 2
    _kept_arrays.append(x)  # the leak: a module-level list of device arrays


@functools.lru_cache(maxsize=None)
def embedding_for(seed):
    return jax.random.normal(jax.random.key(seed), (N,))


_seeds = itertools.count()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_lru_cache_keeps_every_result():
    embedding_for(next(_seeds)).block_until_ready()  # a new key every call: the cache grows


_host_copies = []


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_host_list_of_numpy_copies():
    x = jnp.arange(N, dtype=jnp.float32)
    _host_copies.append(np.array(x))  # device array copied to host and kept


_steps = []


def make_step():
    table = jnp.full((N,), 0.5, jnp.float32)  # a device constant captured by the closure
    step = jax.jit(lambda v: v + table[:3])
    _steps.append(step)  # a registry of compiled steps keeps each closure, and its constant, alive
    return step


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_jit_recreated_with_new_closure():
    make_step()(jnp.ones(3)).block_until_ready()


_metrics = []


def test_fixture_metrics_dict_keeps_arrays(leak_check):
    def step():
        out = jnp.ones((N,), jnp.float32) * 3
        _metrics.append({"activations": out})  # metrics keep a large array alive every step
        return out.sum()

    leak_check(step, iterations=3, threshold="10MB")
