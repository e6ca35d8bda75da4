"""XLA's compiled peak against the runtime's measured peak, one fresh process per program.

For each program: start a process, read the device's peak_bytes_in_use, compile the program
(memory_analysis().peak_memory_in_bytes, the figure pytest-tpumem judges for compiled programs), run
it once, read peak_bytes_in_use again. The ratio measured / compiled says how far the compiled
figure can be trusted on that device. Needs a device with memory_stats (GPU, TPU); on CPU every
program is reported as "no runtime peak".

    python3 docs/validation/compare_peaks.py            # all programs, a table at the end
    python3 docs/validation/compare_peaks.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, os, sys
import jax, jax.numpy as jnp, numpy as np
name = sys.argv[1]
f32 = jnp.float32
_rng = np.random.default_rng(0)

def rand(*shape, scale=1.0):
    # made on the host and copied over, so creating the arguments sets no device peak of its own
    return jax.device_put((_rng.standard_normal(shape, dtype=np.float32) * scale))

def matmul_chain():
    xs = [rand(4096, 4096) for i in range(4)]
    def f(a, b, c, d):
        return jnp.tanh(a @ b) @ jnp.tanh(c @ d)
    return f, xs, ()

def mlp_train_step():
    import optax
    sizes = [2048, 8192, 8192, 2048]
    params = [{"w": rand(m, n, scale=0.01), "b": jnp.zeros(n, f32)}
              for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))]
    opt = optax.adam(1e-3)
    state = opt.init(params)
    x = rand(1024, 2048)
    def loss(p, x):
        for layer in p[:-1]:
            x = jax.nn.relu(x @ layer["w"] + layer["b"])
        return ((x @ p[-1]["w"] + p[-1]["b"]) ** 2).mean()
    def step(p, s, x):
        g = jax.grad(loss)(p, x)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s
    return step, [params, state, x], (0, 1)

def scan():
    x = rand(64, 1024, 1024)
    w = rand(1024, 1024, scale=0.03)
    def f(x, w):
        def body(c, xi):
            c = jnp.tanh(c @ w + xi)
            return c, c.sum()
        return jax.lax.scan(body, jnp.zeros((1024, 1024), f32), x)
    return f, [x, w], ()

def attention():
    b, s, h, d = 8, 2048, 16, 64
    q, k, v = (rand(b, s, h, d) for i in range(3))
    def f(q, k, v):
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k) / d ** 0.5
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(a, axis=-1), v)
    return f, [q, k, v], ()

def convolution():
    x = rand(32, 256, 256, 64)
    w = rand(3, 3, 64, 128, scale=0.05)
    def f(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y).mean(axis=(1, 2))
    return f, [x, w], ()

fn, args, donate = globals()[name]()
jax.block_until_ready(args)
dev = jax.devices()[0]
stats = dev.memory_stats()
before = stats.get("peak_bytes_in_use") if stats else None
in_use = stats.get("bytes_in_use") if stats else None
compiled = jax.jit(fn, donate_argnums=donate).lower(*args).compile()
ma = compiled.memory_analysis()
jax.block_until_ready(compiled(*args))
stats = dev.memory_stats()
after = stats.get("peak_bytes_in_use") if stats else None
print("RESULT " + json.dumps({
    "program": name, "device": dev.device_kind, "jax": jax.__version__,
    "compiled_peak": int(ma.peak_memory_in_bytes), "arguments": int(ma.argument_size_in_bytes),
    "outputs": int(ma.output_size_in_bytes), "temps": int(ma.temp_size_in_bytes),
    "alias": int(ma.alias_size_in_bytes), "in_use_before": in_use, "peak_before": before, "peak_after": after,
}))
"""

PROGRAMS = ["matmul_chain", "mlp_train_step", "scan", "attention", "convolution"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    a = ap.parse_args()
    results = []
    for name in a.programs.split(","):
        proc = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True)
        line = next((out for out in proc.stdout.splitlines() if out.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(line[7:])
        if r["peak_after"] is None or r["peak_after"] <= (r["peak_before"] or 0):
            # no runtime peak (CPU), or the run did not raise it: nothing to compare
            r["measured"] = r["ratio"] = None
        else:
            # A fresh process whose arguments were copied from the host: the runtime peak is the
            # arguments plus what the run added, as the compiled peak is.
            r["measured"] = r["peak_after"]
            r["ratio"] = r["measured"] / r["compiled_peak"] if r["compiled_peak"] else None
        results.append(r)
    print(f"{'program':16s} {'device':24s} {'compiled peak':>14s} {'measured peak':>14s} {'measured/compiled':>18s}")
    for r in results:
        measured = "no runtime peak" if r["measured"] is None else f"{r['measured'] / 1e6:.1f} MB"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(
            f"{r['program']:16s} {r['device'][:24]:24s} {r['compiled_peak'] / 1e6:11.1f} MB {measured:>14s} {ratio:>18s}"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
