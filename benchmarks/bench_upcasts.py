"""(r) The upcast finder on public bf16 models: flax's own examples, ResNet-18 (examples/imagenet)
and the lm1b TransformerLM (examples/lm1b), each in bf16 as their train.py runs them on a TPU
(``dtype=jnp.bfloat16``), in a training step written after the example's train.py (its loss, its
gradient, an optax update). For each: the jaxpr's widenings (readings.precision), and every
float32 array the step's compiled program makes, on this machine's CPU and compiled for v5e
(readings.buffers, readings.tpu), placed in one kind by decisions.upcast.classify. Every float32
array must be named (an upcast of the code's) or explained (a library's float32 accumulator,
float32 inputs, the compiler's own); an unexplained one is a gap in the finder.

    python benchmarks/bench_upcasts.py --flax /path/to/flax/checkout [--target v5e]

``--flax``: a checkout of github.com/google/flax (its examples are not in the wheel); the models
are copied from it unchanged. Needs flax and optax in this interpreter, and libtpu for the target.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _util import load_average, machine  # noqa: E402

PLANT = ("    x = nn.relu(x)\n", "    x = nn.relu(x) * PLANTED_SCALE  # planted: a float32 constant\n")


def _load(path: str, name: str, planted: bool = False):
    if planted:  # a copy of the model with one float32 constant in its MLP, a bug a user makes
        text = open(path).read()
        assert text.count(PLANT[0]) == 1, f"{path}: the line to plant in is not there once"
        text = text.replace(PLANT[0], PLANT[1]) + "\n\nPLANTED_SCALE = jnp.float32(1.0)\n"
        path = os.path.join(tempfile.mkdtemp(prefix="planted-"), os.path.basename(path))
        with open(path, "w") as f:
            f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def resnet18_step(examples: str, batch: int, size: int):
    """examples/imagenet: ResNet18(num_classes=1000, dtype=bf16), the loss of its train.py
    (softmax cross-entropy on one-hot labels, an L2 weight penalty), SGD with momentum."""
    import jax
    import jax.numpy as jnp
    import optax

    models = _load(os.path.join(examples, "imagenet", "models.py"), "flax_imagenet_models")
    model = models.ResNet18(num_classes=1000, dtype=jnp.bfloat16)
    image = jax.ShapeDtypeStruct((batch, size, size, 3), jnp.float32)  # train.py feeds float32 images
    label = jax.ShapeDtypeStruct((batch,), jnp.int32)
    variables = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.ones(image.shape), train=False))
    tx = optax.sgd(0.1, momentum=0.9, nesterov=True)
    opt_state = jax.eval_shape(tx.init, variables["params"])

    def per_device(params, batch_stats, image, label):  # train.py pmaps over axis "batch"
        def loss_fn(params):
            logits, new_state = model.apply(
                {"params": params, "batch_stats": batch_stats}, image, mutable=["batch_stats"]
            )
            one_hot = jax.nn.one_hot(label, 1000)  # flax.training.common_utils.onehot: float32
            loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
            weight_l2 = sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(params) if x.ndim > 1)
            return loss + 0.0001 * 0.5 * weight_l2, new_state

        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        return jax.lax.pmean(grads, axis_name="batch"), new_state["batch_stats"], loss

    @jax.jit
    def train_step(params, batch_stats, opt_state, image, label):
        # one device's share of train.py's pmap, as a vmap over a leading axis of 1 named "batch"
        grads, batch_stats, loss = jax.vmap(per_device, in_axes=(None, None, 0, 0), axis_name="batch")(
            params, batch_stats, image[None], label[None]
        )
        grads, batch_stats = jax.tree.map(lambda x: x[0], (grads, batch_stats))
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), batch_stats, opt_state, loss[0]

    return train_step, (variables["params"], variables["batch_stats"], opt_state, image, label)


def lm1b_step(examples: str, batch: int, length: int, planted: bool = False):
    """examples/lm1b: TransformerLM with its default config in bf16 (6 layers, 512 wide, vocab
    30k), the loss of its train.py (compute_weighted_cross_entropy: one-hot soft targets times
    log_softmax of the logits), Adam with weight decay."""
    import jax
    import jax.numpy as jnp
    import optax

    models = _load(os.path.join(examples, "lm1b", "models.py"), "flax_lm1b_models" + "_planted" * planted, planted)
    config = models.TransformerConfig(
        vocab_size=30000, output_vocab_size=30000, dtype=jnp.bfloat16, max_len=length, deterministic=True
    )
    model = models.TransformerLM(config)
    inputs = jax.ShapeDtypeStruct((batch, length), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.ones(inputs.shape, jnp.int32)))["params"]
    tx = optax.adamw(1e-3, weight_decay=0.1)
    opt_state = jax.eval_shape(tx.init, params)

    @jax.jit
    def train_step(params, opt_state, inputs):
        weights = jnp.where(inputs > 0, 1, 0).astype(jnp.float32)

        def loss_fn(params):
            logits = model.apply({"params": params}, inputs)
            soft_targets = jax.nn.one_hot(inputs, logits.shape[-1])  # common_utils.onehot: float32
            loss = -jnp.sum(soft_targets * jax.nn.log_softmax(logits), axis=-1)
            return (loss * weights).sum() / weights.sum()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step, (params, opt_state, inputs)


def examine(name: str, step, args, target: str) -> dict:
    from pytest_tpumem.decisions import upcast as kinds_of_arrays
    from pytest_tpumem.decisions.budget import costly
    from pytest_tpumem.decisions.upcast import classify
    from pytest_tpumem.readings.buffers import hlo_buffers, wide_arrays
    from pytest_tpumem.readings.precision import read_precision
    from pytest_tpumem.readings.tpu import estimate_hbm
    from pytest_tpumem.targets import parse_target
    from pytest_tpumem.telling.upcast import upcast_line
    from pytest_tpumem.units import format_size

    t0 = time.perf_counter()
    traced = step.trace(*args)
    precision = read_precision(name, traced.jaxpr)
    cpu = wide_arrays(hlo_buffers(traced.lower().compile().as_text()))
    t_cpu = time.perf_counter() - t0
    arrays = {"cpu": tuple(cpu)}
    t1 = time.perf_counter()
    if target:
        tgt = parse_target(target)
        arrays[tgt.topology] = estimate_hbm(step, *args, target=tgt).wide
    t_target = time.perf_counter() - t1
    report = classify([precision], arrays)
    order = [
        getattr(kinds_of_arrays, k) for k in ("UPCAST", "ACCUMULATOR", "WIDE_INPUTS", "COMPILERS_OWN", "UNEXPLAINED")
    ]
    print(
        f"\n== {name}: {len(precision.widenings)} widenings in the jaxpr "
        f"(cpu compile {t_cpu:.0f} s, {target or 'no target'} {t_target:.0f} s)"
    )
    out = {"name": name, "unexplained": 0, "named": 0}
    for where, kinds in report.kinds.items():
        total = sum(len(v) for v in kinds.values())
        parts = ", ".join(
            f"{k} {len(kinds.get(k, ()))} ({format_size(sum(b.size for b in kinds.get(k, ())))})" for k in order
        )
        print(f"{where}: {total} float32 arrays: {parts}")
        out["unexplained"] += len(kinds.get("unexplained", ()))
        for b in kinds.get("unexplained", ())[:10]:
            print(f"  unexplained: {format_size(b.size)} {b.shape} {b.op} at {b.source or '?'}")
    named = [u for u in report.named if costly(u)]
    out["named"] = len(named)
    print(f"named upcasts ({len(report.named)}, {len(named)} costing at least the minimum):")
    for u in report.named:
        print("  " + upcast_line(u))
    kinds_of = collections.Counter(w.how for w in precision.widenings)
    print("widenings by how:", dict(sorted(kinds_of.items())))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flax", required=True, help="a checkout of github.com/google/flax")
    p.add_argument("--target", default="v5e", help="a TPU target to compile for ('' for none)")
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args()
    examples = os.path.join(a.flax, "examples")
    import flax
    import jax
    import optax

    print(f"{machine()}; load average {load_average()}")
    print(f"jax {jax.__version__}, flax {flax.__version__}, optax {optax.__version__}")
    results = [
        examine("resnet18", *resnet18_step(examples, a.batch, 224), a.target),
        examine("lm1b", *lm1b_step(examples, a.batch, 256), a.target),
        examine("lm1b, planted", *lm1b_step(examples, a.batch, 256, planted=True), a.target),
    ]
    print()
    for r in results:
        print(f"{r['name']}: {r['named']} upcasts named, {r['unexplained']} float32 arrays unexplained")
    planted = next(r for r in results if "planted" in r["name"])
    found = planted["named"] > next(r for r in results if r["name"] == "lm1b")["named"]
    print(f"the planted float32 constant: {'named' if found else 'MISSED'}")
    sys.exit(1 if any(r["unexplained"] for r in results) or not found else 0)


if __name__ == "__main__":
    main()
