"""Clean twins of the planted leaks: every one of these must PASS under leak_check."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

N = 4_000_000  # float32: 16 MB


@pytest.fixture(scope="module")
def mlp():
    """A small MLP (about 8 MB of float32 parameters) and a batch."""
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {
        "w1": jax.random.normal(k1, (256, 4096)) * 0.02,
        "w2": jax.random.normal(k2, (4096, 256)) * 0.02,
    }
    batch = (jax.random.normal(k3, (64, 256)), jnp.zeros((64, 256)))
    return params, batch


def loss_fn(params, batch):
    x, y = batch
    h = jax.nn.relu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


OPT = optax.adam(1e-3)


def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = OPT.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


train_step = jax.jit(train_step, donate_argnums=(0, 1))


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_training_loop_with_donated_state(mlp):
    params, batch = mlp
    params = jax.tree.map(jnp.copy, params)  # the step donates its state: start from a copy
    opt_state = OPT.init(params)
    for _ in range(5):
        params, opt_state, loss = train_step(params, opt_state, batch)
    assert np.isfinite(float(loss))


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_scan_loop():
    def body(carry, x):
        carry = carry * 0.5 + x
        return carry, carry.sum()

    xs = jnp.ones((8, N // 8), jnp.float32)
    carry, sums = jax.lax.scan(body, jnp.zeros((N // 8,), jnp.float32), xs)
    assert sums.shape == (8,)


@functools.cache
def embedding_for(seed):
    return jax.random.normal(jax.random.key(seed), (N,))


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_cache_filled_once():
    embedding_for(0).block_until_ready()  # filled on the first call, reused after


@pytest.mark.leak_check(iterations=3, warmup=0, threshold="10MB")
def test_cache_filled_once_without_warmup():
    embedding_for(1).block_until_ready()  # the one-off lands in iteration 1: not a leak


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_arrays_freed_at_the_end():
    x = jnp.ones((N,), jnp.float32)
    y = (x * 2).block_until_ready()
    host = np.array(y)
    assert host[0] == 2.0


def test_fixture_metrics_as_floats(leak_check):
    metrics = []

    def step():
        out = jnp.ones((N,), jnp.float32) * 3
        metrics.append({"activations_mean": float(out.mean())})  # a float, not the array
        return out.sum()

    report = leak_check(step, iterations=3, threshold="10MB")
    assert not report.leaking


class Recorder:
    """The clean twin: it keeps a float of each step, not the array."""

    def __init__(self):
        self.history = []

    def remember(self, step):
        self.history.append(float(jnp.full((N,), float(step)).mean()))


_recorder = Recorder()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_helper_method_keeps_floats():
    _recorder.remember(len(_recorder.history))


def batches():
    while True:
        yield jnp.ones((N,), jnp.float32) * 3  # nothing holds it after the consumer drops it


_stream = batches()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_generator_without_a_buffer():
    next(_stream).block_until_ready()


scale_jit = jax.jit(lambda x, factor: x * factor, static_argnums=1)


@pytest.mark.leak_check(iterations=3, threshold="10MB", clear_caches=False)
def test_same_static_argument_compiles_once():
    scale_jit(jnp.ones(8), 2).block_until_ready()  # compiled in the warmup, reused after


_totals_by_step = {}


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_dict_of_host_totals():
    x = np.asarray(jnp.arange(N, dtype=jnp.float32)) + 0
    _totals_by_step[len(_totals_by_step)] = float(x.sum())  # a float per step, not the copy


class Trainer:
    """Makes its jitted step again on every call, keeping only the newest: the cache stays one program."""

    def __init__(self):
        self.step = None

    def run(self, x):
        self.step = jax.jit(lambda v: v * 2)  # replaces the last one, and with it its compiled program
        return self.step(x)


_trainer = Trainer()


@pytest.mark.leak_check(iterations=3, threshold="10MB", clear_caches=False)
def test_jit_replaced_every_call_is_not_growth():
    _trainer.run(jnp.ones(8)).block_until_ready()
