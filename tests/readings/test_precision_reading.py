"""readings.precision on real jaxprs (and decisions.upcast on their CPU compiles): a promotion's cause
is named wherever the constant sits; a training step's backward pass and a library's own float32
are told from the code's upcasts."""

import pathlib

import jax
import jax.numpy as jnp
import optax

from pytest_tpumem.decisions.upcast import ACCUMULATOR, UNEXPLAINED, UPCAST, WIDE_INPUTS, classify
from pytest_tpumem.readings.buffers import hlo_buffers
from pytest_tpumem.readings.precision import _called, read_precision

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


# A bf16 training step with float32 parameters, as mixed precision is written: a leaky relu (its
# where is jnp's own jit, whose equations carry no line: XLA writes its caller's), the parameters
# cast to bf16, optax's softmax cross-entropy with float32 labels, the gradient. Every float32 array
# the CPU compile makes is placed, and none is an upcast of the code's.
X = jax.ShapeDtypeStruct((512, 1024), jnp.bfloat16)
W = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
LABELS = jax.ShapeDtypeStruct((512, 512), jnp.float32)
SCALE = jnp.float32(0.5)  # the planted bug: a float32 constant that promotes the activations


def _step(planted):
    def loss(w, x, labels):
        h = jnp.where(x > 0, x, 0.1 * x)
        h = h * SCALE if planted else h
        return jnp.mean(optax.softmax_cross_entropy(h @ w.astype(h.dtype), labels))

    return jax.jit(jax.value_and_grad(loss)).trace(W, X, LABELS)


def _classified(traced):
    report = classify([read_precision("step", traced.jaxpr)], {"cpu": hlo_buffers(traced.lower().compile().as_text())})
    return report, report.kinds["cpu"]


def test_a_mixed_precision_training_step_names_nothing_and_explains_every_float32_array():
    """The backward pass casts the parameter's bf16 gradient back to float32 (a gradient, not an
    upcast); optax computes the loss in float32 inside and returns it reduced (its own)."""
    report, kinds = _classified(_step(planted=False))
    assert [u.root for u in report.named] == []
    assert UNEXPLAINED not in kinds and UPCAST not in kinds, kinds
    assert kinds[WIDE_INPUTS] and kinds[ACCUMULATOR]  # the gradients; optax's float32 loss


def test_the_same_step_with_a_float32_constant_names_it_with_its_arrays():
    report, kinds = _classified(_step(planted=True))
    lines = pathlib.Path(__file__).read_text().splitlines()
    at = next(i + 1 for i, line in enumerate(lines) if "h * SCALE if planted" in line)
    assert [(u.root.how, u.root.line.rsplit("/", 1)[-1], u.root.cause.split(" (")[0]) for u in report.named] == [
        ("promotion", f"test_precision_reading.py:{at}", "float32 constant SCALE")
    ]
    assert UNEXPLAINED not in kinds, kinds
    assert report.named[0].costs[0].wide >= 512 * 1024 * 4  # the promoted activations, forward and backward


def test_the_function_a_line_called_is_a_modules_class_past_flaxs_wrappers():
    """The frames between the user's line and a cast inside flax.linen's BatchNorm, innermost first."""
    names = [
        "Primitive.bind",
        "_convert_element_type",
        "astype",
        "_compute_stats",
        "BatchNorm.__call__",
        "Module._call_wrapped_method",
        "wrap_method_once.<locals>.wrapped_module_method",
        "Module.apply",
        "api_boundary.<locals>.reraise_with_filtered_traceback",
    ]
    assert _called(names) == "BatchNorm"
    assert _called(["Primitive.bind", "_convert_element_type", "astype", "ufunc.__call__"]) == "astype"
