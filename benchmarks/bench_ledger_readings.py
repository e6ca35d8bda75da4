"""What each reading the suite ledger (issue 18) could take between two tests costs, with 0, 1,000
and 10,000 live arrays held (as a session fixture would hold them), so that the ledger's design
rests on measured costs: its target is under 0.5 ms a test with 1,000 live arrays.

    python benchmarks/bench_ledger_readings.py [--repeat 400]

Each reading is timed ``--repeat`` times in this process (CPU backend, two devices), wall time,
after a warm-up; the median and the 90th percentile in microseconds. Nothing else should run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import weakref

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _util import load_average, machine, table  # noqa: E402

from pytest_tpumem.readings import devices as device_readings  # noqa: E402
from pytest_tpumem.readings import host, jaxcompat  # noqa: E402
from pytest_tpumem.readings.between import BetweenTests  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, float]:
    for _ in range(10):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


class Incremental:
    """Bytes of live arrays kept up to date between readings: each array's size is read once, when
    it is first seen (by id, checked with a weak reference, since a freed array's id is reused)."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[object, int]] = {}

    def __call__(self) -> int:
        known, fresh = self.known, {}
        total = 0
        for a in jax.live_arrays():
            entry = known.get(id(a))
            if entry is None or entry[0]() is not a:
                entry = (weakref.ref(a), a.nbytes)
            fresh[id(a)] = entry
            total += entry[1]
        self.known = fresh
        return total


def readings(devices: list) -> dict[str, object]:
    client = devices[0].client
    return {
        "backends_started() (jax's private flag)": jaxcompat.backends_started,
        "jax.live_arrays() (the list alone)": jax.live_arrays,
        "count and sum(nbytes) of live arrays": lambda: sum(a.nbytes for a in jax.live_arrays()),
        "live bytes per device (each shard, each buffer once)": lambda: device_readings.read_used(devices),
        "bytes of live arrays, each size read once (incremental)": Incremental(),
        "the plugin's reading: readings.between.BetweenTests().read()": BetweenTests().read,
        "memory_stats() of every device": lambda: [d.memory_stats() for d in devices],
        "client.live_executables() (count)": lambda: len(client.live_executables()),
        "host RSS (/proc/self/status)": host.host_rss,
        "malloc's figures (mallinfo2)": host.malloc_figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=400)
    args = parser.parse_args()
    devices = jax.local_devices()
    print(machine())
    print(f"jax {jax.__version__}, {len(devices)} CPU devices; {load_average()}")
    held: list = []
    rows = []
    for live in (0, 1_000, 10_000):
        while len(held) < live:
            held.append(jnp.full((16,), len(held), jnp.float32))
        jax.block_until_ready(held)
        for k in range(3):  # some programs compiled and held by jax's caches, as in a suite
            jax.jit(lambda x, k=float(k + live): x * k)(held[0] if held else jnp.ones(3))
        for name, fn in readings(devices).items():
            med, p90 = timed(fn, args.repeat)
            rows.append((live, name, f"{med:.1f}", f"{p90:.1f}"))
    print(table(("live arrays", "reading", "median us", "p90 us"), rows))


if __name__ == "__main__":
    main()
