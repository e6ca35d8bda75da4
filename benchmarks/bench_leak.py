"""(c) What check_leaks costs beyond the calls it makes and their recompilation.

1. Fixed cost per run: ``check_leaks(fn, x, iterations=N, warmup=1)`` (N+1 runs) against a plain
   loop of N+1 runs of ``block_until_ready(fn(x)); jax.clear_caches()`` (so recompilation is in
   both), alternated and repeated; (check - loop) / (N+1). Done with 0 and a few thousand extra
   live arrays held, since every run waits for and reads jax.live_arrays(), and the full
   gc.collect() before gc.freeze() walks every Python object. A breakdown times the pieces
   check_leaks adds (per run, and once per check).
2. The default check (iterations=3, warmup=1: 4 runs) on a test body whose first call takes
   ~1 s on this CPU (a jitted, long unrolled chain): the seconds it adds to that test.

    python benchmarks/bench_leak.py [--rounds 9] [--iterations 5] [--live 0,2000,5000]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _util import load_average, machine, spread, table  # noqa: E402

from pytest_tpumem.checks import check_leaks  # noqa: E402
from pytest_tpumem.measuring import leak  # noqa: E402
from pytest_tpumem.readings import devices as sources  # noqa: E402
from pytest_tpumem.readings import host


@jax.jit
def small(x):
    return jnp.tanh(x * 2.0 + 1.0).sum()


def plain_loop(fn, x, runs: int) -> None:
    for _ in range(runs):
        jax.block_until_ready(fn(x))
        jax.clear_caches()


def timeit(f) -> tuple[float, float]:
    """(wall, cpu) seconds of f(); cpu is process time, all threads (XLA compiles on its own threads)."""
    c0, t0 = time.process_time(), time.perf_counter()
    f()
    return time.perf_counter() - t0, time.process_time() - c0


def fixed_cost(rounds: int, iterations: int, live_levels: list[int]) -> None:
    runs = iterations + 1
    x = jnp.ones((256,), jnp.float32)
    print(
        f"\n1. fixed cost per run: check_leaks(small, x, iterations={iterations}, warmup=1) = {runs} runs,"
        f" vs a loop of {runs} x (call + block + jax.clear_caches()); {rounds} alternated rounds; ms per run"
    )
    rows, parts = [], []
    devices = sources.local_devices()
    for n_live in live_levels:
        held = [jnp.full((16,), float(i)) for i in range(n_live)]
        jax.block_until_ready(held)
        plain_loop(small, x, runs)  # warm-up: both paths once
        check_leaks(small, x, iterations=iterations, warmup=1)
        loops, checks = [], []
        for r in range(rounds):
            pair = [
                ("loop", lambda: plain_loop(small, x, runs)),
                ("check", lambda: check_leaks(small, x, iterations=iterations, warmup=1)),
            ]
            for name, f in pair if r % 2 == 0 else pair[::-1]:
                (loops if name == "loop" else checks).append(timeit(f))
        for k, clock in ((0, "wall"), (1, "cpu")):
            per_run = [(c[k] - lo[k]) / runs * 1000 for c, lo in zip(checks, loops)]
            rows.append(
                [
                    n_live,
                    clock,
                    f"{statistics.median(lo[k] for lo in loops) / runs * 1000:.1f}",
                    f"{statistics.median(c[k] for c in checks) / runs * 1000:.1f}",
                    spread(per_run, "{:.1f}"),
                ]
            )

        def med(f, k=15):  # median cpu ms of k calls
            return statistics.median(timeit(f)[1] for _ in range(k)) * 1000

        full_gc = med(gc.collect)  # once per check, before gc.freeze()
        gc.freeze()
        try:
            frozen_gc = med(gc.collect)  # per run: only objects created since the freeze
        finally:
            gc.unfreeze()
        parts.append(
            [
                n_live,
                len(gc.get_objects()),
                f"{full_gc:.1f}",
                f"{frozen_gc:.2f}",
                f"{med(host.trim_host):.2f}",
                f"{med(lambda: leak.settle(None)):.2f}",
                f"{med(lambda: leak.read(devices)):.2f}",
                f"{med(jax.live_arrays):.2f}",
            ]
        )
        del held
        gc.collect()
    print(
        table(
            [
                "extra live arrays",
                "clock",
                "loop ms/run",
                "check ms/run",
                "fixed cost ms/run (check - loop), per round",
            ],
            rows,
        )
    )
    print(
        "\n   pieces check_leaks adds (once per check: full gc.collect, then gc.freeze; each run: _settle, then _cleanup:"
        " gc.collect of the unfrozen objects, clear_caches, host.trim_host; then read), cpu ms, median of 15:"
    )
    print(
        table(
            [
                "extra live arrays",
                "gc-tracked objects",
                "gc.collect() full (once)",
                "gc.collect() frozen (per run)",
                "host.trim_host() (malloc_trim)",
                "leak.settle(None) (wait live arrays + effects)",
                "leak.read() (live arrays + stats + RSS)",
                "jax.live_arrays() alone",
            ],
            parts,
        )
    )


def make_chain(k: int):
    def f(x):
        for i in range(k):
            x = jnp.sin(x) * (1.0 + i * 1e-4) + jnp.cos(x * 0.5)
        return x

    return jax.jit(f)


def one_second_body(rounds: int) -> None:
    x = jnp.linspace(0.0, 1.0, 1024, dtype=jnp.float32)

    def first_call(k: int) -> float:
        jax.clear_caches()
        f = make_chain(k)
        return timeit(lambda: jax.block_until_ready(f(x)))[0]

    # Calibrate the chain length so the first call (trace + lower + compile) takes about 1 s.
    k = 100
    while (t := first_call(k)) < 0.4 and k < 20000:
        k *= 2
    k = max(1, round(k / t))
    k = max(1, round(k / statistics.median(first_call(k) for _ in range(3))))  # one refinement
    f = make_chain(k)

    def body():
        jax.block_until_ready(f(x))

    m: dict[str, list[tuple[float, float]]] = {n: [] for n in ("first", "compile", "warm", "loop4", "check")}
    for r in range(rounds):
        jax.clear_caches()
        m["first"].append(timeit(body))
        m["warm"].append(timeit(body))
        jax.clear_caches()
        lowered = jax.jit(f.__wrapped__ if hasattr(f, "__wrapped__") else f).lower(x)
        m["compile"].append(timeit(lowered.compile))
        del lowered
        pair = [("loop4", lambda: plain_loop(lambda y: f(y), x, 4)), ("check", lambda: check_leaks(body))]
        for name, g in pair if r % 2 == 0 else pair[::-1]:
            jax.clear_caches()
            m[name].append(timeit(g))
    print(
        f"\n2. default check_leaks(body) (iterations=3, warmup=1: 4 runs, clear_caches between) where body calls a "
        f"{k}-link unrolled jitted chain; {rounds} rounds; seconds, median [IQR] (min, max)"
    )
    rows = []
    for k_, clock in ((0, "wall"), (1, "cpu")):
        col = {n: [v[k_] for v in vs] for n, vs in m.items()}
        rows += [
            [clock, "body, first call (trace + lower + compile + run)", spread(col["first"])],
            [clock, "  .compile() alone", spread(col["compile"])],
            [clock, "body, second call (cached)", spread(col["warm"], "{:.4f}")],
            [clock, "plain loop: 4 x (body + clear_caches)", spread(col["loop4"])],
            [clock, "check_leaks(body) total", spread(col["check"])],
            [
                clock,
                "ADDED to the test: check - first call",
                spread([c - t for c, t in zip(col["check"], col["first"])]),
            ],
            [
                clock,
                "check - plain loop of 4 (fixed cost, 4 runs)",
                spread([c - lo for c, lo in zip(col["check"], col["loop4"])]),
            ],
        ]
    print(table(["clock", "measure", "seconds"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--live", default="0,2000,5000")
    ap.add_argument("--body-rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine()}; backend {jax.default_backend()}")
    print(f"({load_average()} before)")
    fixed_cost(args.rounds, args.iterations, [int(v) for v in args.live.split(",")])
    one_second_body(args.body_rounds)
    print(f"({load_average()} after)")


if __name__ == "__main__":
    main()
