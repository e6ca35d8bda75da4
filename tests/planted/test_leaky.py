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


@functools.cache
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


class Recorder:
    """Keeps a history of steps: the arrays are made in a method two calls away from the test."""

    def __init__(self):
        self.history = []

    def remember(self, step):
        self.history.append(jnp.full((N,), float(step)))  # the leak: every step's array is kept


_recorder = Recorder()


def train_one_step(step):
    _recorder.remember(step)


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_helper_method_keeps_arrays():
    train_one_step(len(_recorder.history))


_buffer = []


def batches():
    while True:
        batch = jnp.ones((N,), jnp.float32) * 3  # made here, kept by the buffer below
        _buffer.append(batch)
        yield batch


_stream = batches()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_generator_buffer_keeps_batches():
    next(_stream).block_until_ready()


def scale(x, factor):
    return x * factor


scale_jit = jax.jit(scale, static_argnums=1)
_factors = itertools.count(2)


@pytest.mark.leak_check(iterations=3, threshold="10MB", clear_caches=False)
def test_new_static_argument_every_call_grows_the_compile_cache():
    scale_jit(jnp.ones(8), next(_factors)).block_until_ready()  # a new program for every new factor


_copies_by_step = {}


def keep_host_copy(step, x):
    _copies_by_step[step] = np.asarray(x) + 0  # a numpy copy on the host, kept per step


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_dict_of_host_copies():
    keep_host_copy(len(_copies_by_step), jnp.arange(N, dtype=jnp.float32))


_jitted = []


@pytest.mark.leak_check(iterations=3, threshold="10MB", clear_caches=False)
def test_jit_made_again_every_call_and_kept():
    double = jax.jit(lambda v: v * 2)  # a new jit, and so a new program, on every call
    _jitted.append(double)  # kept: its compiled program stays in jax's caches
    double(jnp.ones(8)).block_until_ready()


class Trainer:
    """Its parameters are replaced every step (not a leak); its history keeps every step's output (the leak)."""

    def __init__(self):
        self.params = jnp.zeros((4000, 4000), jnp.float32)  # 64 MB, replaced each step
        self.history = []

    def step(self):
        self.params = self.params + 1.0  # the new parameters replace the old: one alive at a time
        self.history.append(jnp.ones((4000, 1000)) * self.params[0, 0])  # the leak: 16 MB kept per step


_trainer = Trainer()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_history_leaks_beside_replaced_parameters():
    _trainer.step()
