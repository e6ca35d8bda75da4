"""readings.precision on real jaxprs: a promotion's cause is named wherever the constant sits."""

import pathlib

import jax
import jax.numpy as jnp

from pytest_tpumem.readings.precision import read_precision

EPS = jnp.float32(1e-5)  # a strongly typed float32 module constant: it promotes what it meets


@jax.jit
def inner(x):
    return x / jnp.sqrt(x * x + EPS)


def outer(x):
    return inner(x) * 2


BF16 = jax.ShapeDtypeStruct((64, 64), jnp.bfloat16)


def _causes(traced):
    return [(w.how, w.line.rsplit("/", 1)[-1], w.cause) for w in read_precision("p", traced.jaxpr).widenings if w.cause]


def test_a_module_constant_is_named_in_the_jitted_function_and_inside_an_outer_jit():
    """The constant is the program's own in inner's jaxpr and a nested jit's constant inside
    jit(outer) or jit(inner): named with its definition line all three ways."""
    lines = pathlib.Path(__file__).read_text().splitlines()
    use, made = (
        next(i + 1 for i, line in enumerate(lines) if line.startswith(t)) for t in ("    return x / jnp", "EPS = ")
    )
    expected = [
        (
            "promotion",
            f"test_precision_reading.py:{use}",
            f"float32 constant EPS (tests/readings/test_precision_reading.py:{made})",
        )
    ]
    assert _causes(inner.trace(BF16)) == expected
    assert _causes(jax.jit(inner).trace(BF16)) == expected
    assert _causes(jax.jit(outer).trace(BF16)) == expected
