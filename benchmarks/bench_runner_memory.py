"""(s) The runner's memory: a suite the kernel kills for memory, told as such, and the remedy that
gives memory back, with what it costs.

Two suites whose host memory climbs, each run under ``--tpumem -n 1`` inside a memory cgroup this
script makes and removes (cgroup v2 ``memory.max`` or v1 ``memory.limit_in_bytes``, as root; the
cgroup is removed even when a run fails, its processes killed first; skipped with a reason where
none can be made):

- ``climbs`` (the shape of a real report): one test keeps 300 MB of numpy arrays in a module list,
  40 tests call one jit with 6 new shapes each (jax's caches keep every program), 10 are clean.
- ``loader`` (our own): a data loader's ``functools.lru_cache`` keeps each 40 MB numpy dataset it
  loads (10 of them, each test under the 100 MB threshold), and a model step is jitted anew for
  each batch size (60 tests).

For each suite:

1. Killed: in a cgroup too small for it. The worker dies; the report must say the kernel's OOM
   killer acted, what the limit was, and name the tests that grew the worker's memory most, the
   one that keeps numpy arrays within 5% of what it keeps.
2. With ``--tpumem-clear-caches=host:SIZE`` in the same cgroup: the suite passes.
3. (``climbs``, outside any cgroup) the remedy's cost and hold, in alternating rounds: no remedy,
   ``host:SIZE`` and clearing after every test (``test``): wall time, and the most host memory
   after a test against the trigger (goal: within 10% of it).

    python benchmarks/bench_runner_memory.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import PY, base_env, load_average, machine, timed_run  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 10**6
MiB = 2**20

CLIMBS = """
import numpy as np
import jax
import jax.numpy as jnp
import pytest

_KEPT = []


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum(axis=0) * 2.0 + jnp.cos(x).mean()


def test_keeps_host_arrays():
    for _ in range(6):
        _KEPT.append(np.ones((50_000_000 // 8,), np.float64) * 1.5)  # 50 MB each, 300 MB kept


@pytest.mark.parametrize("n", range(1, 41))
def test_compiles_new_shapes(n):
    for k in range(6):
        step(jnp.ones((n * 7 + k, 3 + k), jnp.float32)).block_until_ready()


@pytest.mark.parametrize("n", range(10))
def test_clean(n):
    assert float(jnp.ones(100).sum()) == 100.0
"""

LOADER = """
import functools

import numpy as np
import jax
import jax.numpy as jnp
import pytest


@functools.lru_cache(maxsize=None)
def load_dataset(name):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    return rng.standard_normal(5_000_000)  # 40 MB, kept by the cache for the rest of the run


def model_step(batch):
    w = jnp.linspace(0.0, 1.0, batch.shape[-1])
    return jax.jit(lambda b: jnp.tanh(b * w).sum(axis=-1))(batch)  # a new jit per call: a program per shape


@pytest.mark.parametrize("name", [f"split{i}" for i in range(10)])
def test_dataset_mean(name):
    assert abs(float(load_dataset(name).mean())) < 0.01


@pytest.mark.parametrize("size", range(8, 8 + 60))
def test_model_step(size):
    batch = jnp.ones((size, 3 * size + 1))
    assert model_step(batch).shape == (size,)
"""

SUITES = {
    # suite: (source, the cgroup's limit in MiB that kills it, the trigger that saves it, (test, bytes it keeps))
    "climbs": (CLIMBS, 900, "host:750MB", ("test_keeps_host_arrays", 300 * MB)),
    "loader": (LOADER, 600, "host:600MB", ("test_dataset_mean[split0]", 40 * MB)),
}


class Cgroup:
    """A memory cgroup of ``limit`` bytes, made on entry and removed on exit (its processes killed)."""

    def __init__(self, limit: int):
        self.limit = limit
        if os.path.isdir("/sys/fs/cgroup/memory"):
            self.path, self.file = f"/sys/fs/cgroup/memory/tpumem_bench_{os.getpid()}", "memory.limit_in_bytes"
        else:
            self.path, self.file = f"/sys/fs/cgroup/tpumem_bench_{os.getpid()}", "memory.max"

    def __enter__(self) -> Cgroup:
        os.mkdir(self.path)
        try:
            with open(os.path.join(self.path, self.file), "w") as f:
                f.write(str(self.limit))
        except OSError:
            os.rmdir(self.path)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(50):
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.2)
        print(f"could not remove {self.path}", file=sys.stderr)

    def run(self, cmd: list[str], cwd: str, env: dict[str, str]) -> subprocess.CompletedProcess:
        """``cmd`` inside the cgroup (a shell moves itself in, then becomes the command)."""
        procs = os.path.join(self.path, "cgroup.procs")
        shell = f'echo $$ > "{procs}" && exec "$@"'
        return subprocess.run(["bash", "-c", shell, "bash", *cmd], cwd=cwd, env=env, capture_output=True, text=True)


def why_not() -> str:
    """Why no memory cgroup can be made here ("" where one can)."""
    if os.geteuid() != 0:
        return "not root"
    try:
        with Cgroup(2**40):
            return ""
    except OSError as e:
        return f"no memory cgroup can be made ({e})"


def pytest_cmd(*args: str) -> list[str]:
    return [PY, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--tpumem", "-n", "1", *args]


def host_after_tests(report: str) -> list[int]:
    with open(report) as f:
        tests = json.load(f)["ledger"]["tests"]
    return [t["host"]["rss"] for t in tests.values() if isinstance((t.get("host") or {}).get("rss"), int)]


def killed(name: str, tmp: str, env: dict[str, str]) -> None:
    source, limit_mib, trigger, (culprit, keeps) = SUITES[name]
    with Cgroup(limit_mib * MiB) as cg:
        done = cg.run(pytest_cmd(f"{name}_test.py"), tmp, env)
    out = done.stdout
    crashed = re.search(r"worker 'gw0' crashed while running '([^']+)'", out)
    oom = "the kernel's OOM killer acted during the run" in out
    most = re.search(r"the tests that grew its host memory most: (.*)", out)
    figure = re.search(re.escape(culprit) + r" \+([\d.]+)MB", most.group(1)) if most else None
    error = abs(float(figure.group(1)) * MB - keeps) / keeps if figure else None
    limit = re.search(r"the runner's ([\d.]+[kMG]B) \(([^)]*)\)", out)
    print(
        f"1. {name}, a {limit_mib} MiB cgroup: exit {done.returncode}; crashed in {crashed.group(1) if crashed else None}"
    )
    print(f"   told killed for memory: {oom}; the limit told: {limit.group(1) if limit else None}")
    print(f"   the tests that grew it most: {most.group(1) if most else None}")
    print(f"   {culprit}: {'not named' if error is None else f'{100 * error:.1f}% from the {keeps // MB} MB it keeps'}")
    with Cgroup(limit_mib * MiB) as cg:
        report = os.path.join(tmp, f"{name}.json")
        done = cg.run(
            pytest_cmd(f"{name}_test.py", f"--tpumem-clear-caches={trigger}", f"--tpumem-json={report}"), tmp, env
        )
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    most = max(host_after_tests(report), default=0) if os.path.exists(report) else 0
    print(f"2. {name}, the same cgroup, --tpumem-clear-caches={trigger}: exit {done.returncode}: {tail}")
    print(f"   the most host memory after a test: {most / MB:.0f} MB")
    cleared = [
        line for line in done.stdout.splitlines() if "jax.clear_caches(), gc.collect() and malloc_trim(0) ran" in line
    ]
    if cleared:
        print("  " + cleared[0])
    named = re.search(r"^(\d+ tests? grew the process's host memory.*)$", done.stdout, re.M)
    if named:
        lines = done.stdout[named.start() :].splitlines()[:4]
        print("   " + "\n   ".join(lines))


def cost(tmp: str, env: dict[str, str], rounds: int) -> None:
    source, limit_mib, trigger, _ = SUITES["climbs"]
    size = int(re.sub(r"\D", "", trigger)) * MB
    variants = {"no remedy": [], trigger: [f"--tpumem-clear-caches={trigger}"], "test": ["--tpumem-clear-caches=test"]}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    most: dict[str, list[int]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            report = os.path.join(tmp, "cost.json")
            t, _, done = timed_run(pytest_cmd("climbs_test.py", f"--tpumem-json={report}", *variants[name]), tmp, env)
            if done.returncode != 0:
                raise SystemExit(f"{name} failed:\n{done.stdout[-2000:]}")
            wall[name].append(t)
            most[name].append(max(host_after_tests(report)))
            print(
                f"  round {r + 1} {name:12s} wall {t:6.2f} s  most host memory after a test {most[name][-1] / MB:6.0f} MB"
            )
    base = statistics.median(wall["no remedy"])
    print(
        f"3. climbs, {rounds} rounds outside any cgroup (median wall; the most host memory after a test, over the rounds):"
    )
    for name in names:
        w = statistics.median(wall[name])
        hold = f", {100 * (max(most[name]) - size) / size:+.1f}% of the trigger" if name == trigger else ""
        print(f"   {name:12s} {w:6.2f} s ({w / base:.2f}x)  most {max(most[name]) / MB:.0f} MB{hold}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--suite", choices=sorted(SUITES), action="append")
    a = ap.parse_args()
    reason = why_not()
    print(machine())
    print(load_average())
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        for name, (source, *_) in SUITES.items():
            with open(os.path.join(tmp, f"{name}_test.py"), "w") as f:
                f.write(source)
        if reason:
            print(f"1-2. skipped: {reason}")
        else:
            for name in a.suite or sorted(SUITES):
                killed(name, tmp, env)
        if a.rounds:
            cost(tmp, env, a.rounds)


if __name__ == "__main__":
    main()
