"""(b) Overhead of --tpumem on a suite of many small jax tests.

Generates 320 tests in a temp dir (10 files x 32 tests); each test jits a small function of its
own (distinct op mix and shapes, so every test compiles) and runs it on small arrays. The suite
is run three ways in subprocesses, alternated within each round and repeated:

    base     pytest -q
    tpumem   pytest -q --tpumem                       (tests unmarked: nothing measured)
    budget   pytest -q --tpumem --tpumem-max-hbm 1GB  (every test measured: PeakTracker)
    budget-nosampler  with --nosampler: budget plus --tpumem-sample-ms 0 (the sampler thread's share)
    budget-target     with --target v5e: budget plus --tpumem-target v5e, so every test's programs are
                      also compiled for the TPU target (needs libtpu)

Then, in this process, the cost of one PeakTracker start()/stop() around a tiny jit test.

Ratios are per round (variant / base of the same round); reported as median and spread.

    python benchmarks/bench_suite.py [--rounds 5] [--files 10] [--per-file 32] [--nosampler] [--target v5e]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import PY, alternate_rounds, base_env, load_average, machine, per_round, spread, table, timed_run  # noqa: E402

OPS = [
    "jnp.sin(x) * 2.0 + {k}",
    "jnp.tanh(x @ y) + {k}",
    "jnp.exp(-x * x) - {k}",
    "(x + {k}) @ y",
    "jnp.cumsum(x, axis=-1) * {k}",
    "jnp.maximum(x, {k} * 0.01).sum(axis=0)",
    "jnp.sort(x * {k}, axis=-1)",
    "jnp.where(x > 0.5, x, -x) * {k}",
]


def test_source(file_no: int, n: int) -> str:
    lines = [
        "import jax",
        "import jax.numpy as jnp",
        "import numpy as np",
        "",
    ]
    for i in range(n):
        k = file_no * n + i
        rows, cols = 2 + k % 7, 3 + (k // 7) % 5
        op = OPS[k % len(OPS)].format(k=k + 1)
        lines += [
            "",
            f"def test_f{file_no}_{i}():",
            f"    f = jax.jit(lambda x, y: {op})",
            f"    x = jnp.asarray(np.linspace(0.0, 1.0, {rows * cols}, dtype=np.float32).reshape({rows}, {cols}))",
            f"    y = jnp.ones(({cols}, {rows}), jnp.float32)",
            "    out = f(x, y)",
            "    assert np.all(np.isfinite(np.asarray(out)))",
            "",
        ]
    return "\n".join(lines)


def write_suite(path: str, files: int, per_file: int) -> int:
    for f in range(files):
        with open(os.path.join(path, f"test_gen_{f}.py"), "w") as fh:
            fh.write(test_source(f, per_file))
    return files * per_file


VARIANTS = {
    "base": [],
    "tpumem": ["--tpumem"],
    "budget": ["--tpumem", "--tpumem-max-hbm", "1GB"],
}
# Diagnostic (--nosampler): the budget run without the 5 ms sampler thread.
NOSAMPLER = ("budget-nosampler", ["--tpumem", "--tpumem-max-hbm", "1GB", "--tpumem-sample-ms", "0"])


def tracker_cost(reps: int = 60) -> None:
    """In this process: what one PeakTracker start()/stop() adds to a test that compiles a tiny jit."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import time

    import jax
    import jax.numpy as jnp

    from pytest_tpumem.decisions.peak import PeakTracker

    x = jnp.ones((4, 3), jnp.float32)

    def body(i: int) -> None:
        jax.jit(lambda v: jnp.sin(v) * (i + 1.5))(x).block_until_ready()

    def timed(f) -> tuple[float, float]:
        c0, t0 = time.process_time(), time.perf_counter()
        f()
        return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000

    def tracked(interval: float, i: int) -> None:
        t = PeakTracker(sample_interval=interval).start()
        body(i)
        t.stop()

    cases = {
        "test body alone (new jit + compile + run)": lambda i: body(i),
        "body inside PeakTracker, sampler 5 ms (default)": lambda i: tracked(0.005, i),
        "body inside PeakTracker, sampler off": lambda i: tracked(0, i),
        "PeakTracker start+stop only, sampler 5 ms": lambda i: PeakTracker(sample_interval=0.005).start().stop(),
        "PeakTracker start+stop only, sampler off": lambda i: PeakTracker(sample_interval=0).start().stop(),
    }
    for f in cases.values():
        f(-1)
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for i in range(reps):  # interleaved
        for k, f in cases.items():
            res[k].append(timed(lambda f=f, i=i: f(i)))
    rows = [
        [k, f"{statistics.median(w for w, _ in v):.2f}", f"{statistics.median(c for _, c in v):.2f}"]
        for k, v in res.items()
    ]
    print(f"\nper-test cost of the measurement, in one process ({reps} interleaved reps, median ms)")
    print(table(["what", "wall ms", "cpu ms"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nosampler", action="store_true", help="add the diagnostic variant budget-nosampler")
    ap.add_argument("--target", help="add the variant budget-target: every test also compiled for this TPU target")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--per-file", type=int, default=32)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    env = base_env()
    variants = dict(VARIANTS)
    if args.nosampler:
        variants[NOSAMPLER[0]] = NOSAMPLER[1]
    if args.target:
        variants["budget-target"] = [*VARIANTS["budget"], "--tpumem-target", args.target]
    with tempfile.TemporaryDirectory(prefix="tpumem-bench-suite-") as suite:
        n = write_suite(suite, args.files, args.per_file)
        print(f"suite: {n} tests in {args.files} files under {suite}; {args.rounds} rounds, order rotated each round")
        print(f"({load_average()} before)")
        cmd = {name: [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra] for name, extra in variants.items()}
        # One unmeasured run of the base suite: file-system caches.
        timed_run(cmd["base"], cwd=suite, env=env)

        def check(name: str, proc: subprocess.CompletedProcess) -> None:
            m = re.search(r"(\d+) passed", proc.stdout)
            if proc.returncode != 0 or not m or int(m.group(1)) != n:
                sys.exit(f"{name} run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            measured = re.search(r"(\d+) measured", proc.stdout)
            if name.startswith("budget") and (not measured or int(measured.group(1)) != n):
                sys.exit(f"{name}: the tpumem summary does not say {n} measured:\n{proc.stdout[-2000:]}")

        wall, cpu = alternate_rounds(cmd, args.rounds, check, cwd=suite, env=env)
        names = list(variants)
        rows = []
        for name in names:
            rw = per_round(wall[name], wall["base"])
            rc = per_round(cpu[name], cpu["base"])
            per_test = [(a - b) / n * 1000 for a, b in zip(wall[name], wall["base"])]
            rows.append(
                [
                    name,
                    " ".join(variants[name]) or "-",
                    f"{statistics.median(wall[name]):.2f}",
                    spread(rw),
                    spread(rc),
                    f"{statistics.median(per_test):+.2f}",
                ]
            )
        print()
        print(
            table(
                [
                    "variant",
                    "extra options",
                    "wall s (median)",
                    "wall ratio vs base, per round",
                    "cpu ratio vs base, per round",
                    "ms/test vs base (wall)",
                ],
                rows,
            )
        )
        print(f"({load_average()} after)")
    tracker_cost()


if __name__ == "__main__":
    main()
