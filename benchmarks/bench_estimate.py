"""Seconds to estimate a ~100M-parameter transformer's training step for TPU targets, on this CPU.

The step (forward, loss, gradients, optax adam update) is compiled for one device of each target
with libtpu and no TPU, from ShapeDtypeStructs only: no parameter is ever allocated. Each round is a
fresh process (libtpu and jax's caches start cold, as in a CI run) that estimates every target
twice: "cold" is the real compile; "again" is the same call repeated, which jax answers from its
in-process compile cache.

    python benchmarks/bench_estimate.py [--rounds 3] [--targets v5e,v6e]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, optax
from pytest_tpumem.readings.tpu import estimate_hbm

VOCAB, D, LAYERS, HEADS, FF, SEQ, BATCH = 32000, 768, 12, 12, 3072, 512, 8
f32 = jnp.float32

def sds(*shape):
    return jax.ShapeDtypeStruct(shape, f32)

params = {
    "embed": sds(VOCAB, D),
    "layers": [
        {"qkv": sds(D, 3 * D), "out": sds(D, D), "up": sds(D, FF), "down": sds(FF, D), "ln1": sds(D), "ln2": sds(D)}
        for _ in range(LAYERS)
    ],
    "ln_f": sds(D),
}
n_params = sum(x.size for x in jax.tree.leaves(params))

def norm(x, g):
    return g * (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)

def forward(p, tokens):
    x = p["embed"][tokens]
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    for layer in p["layers"]:
        h = norm(x, layer["ln1"])
        q, k, v = jnp.split(h @ layer["qkv"], 3, axis=-1)
        q, k, v = (a.reshape(BATCH, SEQ, HEADS, D // HEADS) for a in (q, k, v))
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (D // HEADS) ** 0.5
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(BATCH, SEQ, D) @ layer["out"]
        x = x + jax.nn.gelu(norm(x, layer["ln2"]) @ layer["up"]) @ layer["down"]
    return norm(x, p["ln_f"]) @ p["embed"].T

opt = optax.adam(1e-4)

def train_step(p, opt_state, tokens):
    def loss(p):
        logits = forward(p, tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
    value, grads = jax.value_and_grad(loss)(p)
    updates, opt_state = opt.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state, value

# SEQ + 1 tokens so that inputs and labels are SEQ long.
tokens = jax.ShapeDtypeStruct((BATCH, SEQ + 1), jnp.int32)
opt_state = jax.eval_shape(opt.init, params)
out = {"params": n_params, "import_s": time.perf_counter() - t0, "runs": []}
for target in sys.argv[1].split(","):
    for attempt in ("cold", "again"):
        t = time.perf_counter()
        report = estimate_hbm(train_step, params, opt_state, tokens, target=target)
        out["runs"].append({"target": report.target, "attempt": attempt, "seconds": time.perf_counter() - t,
                            "peak": report.peak, "xla_peak": report.xla_peak, "capacity": report.capacity,
                            "refused": report.refused})
print("RESULT " + json.dumps(out))
"""


def run_child(targets: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, targets], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"child failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--targets", default="v5e,v6e")
    a = ap.parse_args()
    import jax

    print(f"python {sys.version.split()[0]}, jax {jax.__version__}, load average {os.getloadavg()[0]:.2f} before")
    rows: dict[tuple[str, str], list[float]] = {}
    info: dict[str, tuple[int, int, int, bool]] = {}
    params = 0
    for r in range(a.rounds):
        # Alternate the order of the targets so that neither is always the first (cold libtpu).
        order = a.targets.split(",")
        order = order if r % 2 == 0 else order[::-1]
        result = run_child(",".join(order))
        params = result["params"]
        for run in result["runs"]:
            key = (
                run["target"],
                f"{run['attempt']} ({'first' if run['target'].startswith(order[0]) else 'second'} in process)",
            )
            rows.setdefault((run["target"], run["attempt"]), []).append(run["seconds"])
            info[run["target"]] = (run["peak"], run["xla_peak"], run["capacity"], run["refused"])
            print(f"round {r + 1}: {key[0]:10s} {key[1]:28s} {run['seconds']:.2f} s")
    print(f"\nmodel: {params / 1e6:.1f}M parameters, adam, batch 8 x 512 tokens, float32, one device of each target")
    print(
        f"{'target':10s} {'attempt':6s} {'median s':>9s} {'min s':>7s} {'max s':>7s}  HBM per device / capacity (XLA's peak)"
    )
    for (target, attempt), secs in sorted(rows.items()):
        peak, xla_peak, cap, refused = info[target]
        what = (
            "refused by the compiler"
            if refused
            else f"{peak / 1e9:.2f} GB / {cap / 1e9:.2f} GB ({xla_peak / 1e9:.2f} GB)"
        )
        print(f"{target:10s} {attempt:6s} {statistics.median(secs):9.2f} {min(secs):7.2f} {max(secs):7.2f}  {what}")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
