"""Fixtures for the pytest-tpumem examples: an MLP with optax adam state, and a tiny decoder.

Sizes are picked so the whole suite runs in well under a minute on a 2-core CPU while the arrays
stay big enough (megabytes) for the memory figures in the tpumem summary to mean something.
Every fixture is function-scoped: what a test holds is released before the next test starts, so
each test's peak starts from its own fixtures only. Initialisers are jitted: a leak check calls
jax.clear_caches(), and one small program recompiles faster than dozens of eager ops.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
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


def _dense(key: jax.Array, n_in: int, n_out: int) -> jax.Array:
    return jax.random.normal(key, (n_in, n_out), jnp.float32) * jnp.sqrt(2.0 / n_in)


@jax.jit
def init_mlp(key: jax.Array) -> list[dict[str, jax.Array]]:
    keys = jax.random.split(key, len(MLP_SIZES) - 1)
    return [
        {"w": _dense(k, n_in, n_out), "b": jnp.zeros((n_out,), jnp.float32)}
        for k, n_in, n_out in zip(keys, MLP_SIZES[:-1], MLP_SIZES[1:])
    ]


@pytest.fixture
def mlp_params() -> list[dict[str, jax.Array]]:
    """One ``{"w", "b"}`` dict per layer, He-initialised from a fixed seed."""
    return init_mlp(jax.random.key(0))


@pytest.fixture
def optimizer() -> optax.GradientTransformation:
    return optax.adam(1e-3)


@pytest.fixture
def train_state(mlp_params, optimizer) -> tuple:
    """``(params, opt_state)``: adam keeps two moments per parameter, so this is ~3x the params."""
    return mlp_params, jax.jit(optimizer.init)(mlp_params)


@jax.jit
def make_batch(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (BATCH_SIZE, MLP_SIZES[0]), jnp.float32)
    y = jax.random.randint(ky, (BATCH_SIZE,), 0, MLP_SIZES[-1])
    return x, y


@pytest.fixture
def batch() -> tuple[jax.Array, jax.Array]:
    """A fixed batch of inputs and integer labels (a stand-in for one MNIST-sized batch)."""
    return make_batch(jax.random.key(1))


@jax.jit
def init_decoder(key: jax.Array) -> dict:
    c = DECODER
    d, ffn = c["d_model"], c["ffn"]
    key_embed, key_pos, *layer_keys = jax.random.split(key, 2 + c["layers"])
    layers = []
    for key in layer_keys:
        kq, kk, kv, ko, k1, k2 = jax.random.split(key, 6)
        layers.append(
            {
                "wq": _dense(kq, d, d),
                "wk": _dense(kk, d, d),
                "wv": _dense(kv, d, d),
                "wo": _dense(ko, d, d),
                "w1": _dense(k1, d, ffn),
                "w2": _dense(k2, ffn, d),
            }
        )
    return {
        "embed": jax.random.normal(key_embed, (c["vocab"], d), jnp.float32) * 0.02,
        "pos": jax.random.normal(key_pos, (c["max_len"], d), jnp.float32) * 0.02,
        "layers": layers,
    }


@pytest.fixture
def decoder_params() -> dict:
    """Token and position embeddings, and per layer attention (wq, wk, wv, wo) and MLP (w1, w2)."""
    return init_decoder(jax.random.key(2))


@pytest.fixture
def prompt() -> jax.Array:
    """A batch of prompts: int32 token ids, shape (PROMPT_BATCH, PROMPT_LEN)."""
    return jax.random.randint(jax.random.key(3), (PROMPT_BATCH, PROMPT_LEN), 0, DECODER["vocab"], jnp.int32)
