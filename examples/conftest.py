"""Fixtures for the pytest-tpumem examples: an MLP with optax adam state, and a tiny decoder.

Sizes are picked so the whole suite runs in well under a minute on a 2-core CPU while the arrays
stay big enough (megabytes) for the memory figures in the tpumem summary to mean something.
Every fixture is function-scoped: what a test holds is released before the next test starts, so
each test's peak starts from its own fixtures only. Parameters and data are drawn with numpy on the
host and put on the device: no program to compile, so nothing to compile again each time a budgeted
test or a leak check clears jax's caches (a jitted jax.random initialiser took ~1.7 s to compile).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

# MLP: 784 -> 2048 -> 2048 -> 10, 5.8M parameters (23.3 MB in float32); with adam's two moments
# the training state is 69.9 MB.
MLP_SIZES = (784, 2048, 2048, 10)
BATCH_SIZE = 128

# Decoder: 2 layers, d_model 256, vocab 1024, room for 512 tokens; 1.97M parameters (7.9 MB).
# The KV cache of a batch of 32 is 2 layers x (k, v) x 32 x 512 x 256 floats = 67.1 MB.
DECODER = dict(vocab=1024, d_model=256, layers=2, ffn=1024, max_len=512)
PROMPT_BATCH, PROMPT_LEN = 32, 16


def _dense(rng: np.random.Generator, n_in: int, n_out: int) -> np.ndarray:
    return rng.standard_normal((n_in, n_out), np.float32) * np.float32(np.sqrt(2.0 / n_in))


def init_mlp(seed: int) -> list[dict[str, jax.Array]]:
    rng = np.random.default_rng(seed)
    return [
        {"w": jnp.asarray(_dense(rng, n_in, n_out)), "b": jnp.zeros((n_out,), jnp.float32)}
        for n_in, n_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:])
    ]


@pytest.fixture
def mlp_params() -> list[dict[str, jax.Array]]:
    """One ``{"w", "b"}`` dict per layer, He-initialised from a fixed seed."""
    return init_mlp(0)


@pytest.fixture
def optimizer() -> optax.GradientTransformation:
    return optax.adam(1e-3)


@pytest.fixture
def train_state(mlp_params, optimizer) -> tuple:
    """``(params, opt_state)``: adam keeps two moments per parameter, so this is ~3x the params."""
    return mlp_params, jax.jit(optimizer.init)(mlp_params)


def make_batch(seed: int) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH_SIZE, MLP_SIZES[0]), np.float32)
    y = rng.integers(0, MLP_SIZES[-1], (BATCH_SIZE,), np.int32)
    return jnp.asarray(x), jnp.asarray(y)


@pytest.fixture
def batch() -> tuple[jax.Array, jax.Array]:
    """A fixed batch of inputs and integer labels (a stand-in for one MNIST-sized batch)."""
    return make_batch(1)


def init_decoder(seed: int) -> dict:
    c = DECODER
    d, ffn = c["d_model"], c["ffn"]
    rng = np.random.default_rng(seed)
    layers = [
        {
            "wq": _dense(rng, d, d),
            "wk": _dense(rng, d, d),
            "wv": _dense(rng, d, d),
            "wo": _dense(rng, d, d),
            "w1": _dense(rng, d, ffn),
            "w2": _dense(rng, ffn, d),
        }
        for _ in range(c["layers"])
    ]
    params = {
        "embed": rng.standard_normal((c["vocab"], d), np.float32) * np.float32(0.02),
        "pos": rng.standard_normal((c["max_len"], d), np.float32) * np.float32(0.02),
        "layers": layers,
    }
    return jax.tree.map(jnp.asarray, params)


@pytest.fixture
def decoder_params() -> dict:
    """Token and position embeddings, and per layer attention (wq, wk, wv, wo) and MLP (w1, w2)."""
    return init_decoder(2)


@pytest.fixture
def prompt() -> jax.Array:
    """A batch of prompts: int32 token ids, shape (PROMPT_BATCH, PROMPT_LEN)."""
    return jnp.asarray(np.random.default_rng(3).integers(0, DECODER["vocab"], (PROMPT_BATCH, PROMPT_LEN), np.int32))
