"""(a) What the installed but disabled plugin costs an unrelated pytest run.

1. Import time of ``pytest_tpumem.plugin`` after pytest is imported (pytest loads it anyway):
   ``python -X importtime -c "import pytest; import pytest_tpumem.plugin"``, summing the
   cumulative microseconds of the pytest_tpumem import (everything it pulls in that pytest had
   not), plus the same import timed with perf_counter (no importtime overhead).
2. Whether jax gets imported: a conftest writes ``'jax' in sys.modules`` at pytest_unconfigure.
3. Wall time of ``pytest`` vs ``pytest -p no:tpumem`` on a tiny suite, alternated, as a ratio.

Each is done twice: with no bytecode for pytest_tpumem (this environment sets
PYTHONDONTWRITEBYTECODE=1, so every run compiles the plugin from source) and with a warm
bytecode cache (PYTHONPYCACHEPREFIX in a temp dir, as after a regular pip install).

    python benchmarks/bench_import.py [--rounds 30] [--import-runs 11]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import PY, base_env, load_average, machine, spread, table, timed_run  # noqa: E402

_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)\s*$")


def conditions(tmp: str) -> dict[str, dict]:
    no_pyc = base_env()
    no_pyc["PYTHONDONTWRITEBYTECODE"] = "1"
    no_pyc.pop("PYTHONPYCACHEPREFIX", None)
    pyc = base_env()
    pyc.pop("PYTHONDONTWRITEBYTECODE", None)
    pyc["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    return {"no .pyc (this env)": no_pyc, "warm .pyc cache": pyc}


def parse_importtime(stderr: str) -> dict:
    """Cost of what ``import pytest_tpumem.plugin`` added after ``import pytest``."""
    entries = []
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            entries.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    start = next(i for i, e in enumerate(entries) if e[2] == 0 and e[3] == "pytest") + 1
    after = entries[start:]
    return {
        "cumulative_us": sum(cum for _, cum, depth, _ in after if depth == 0),
        "self_us_tpumem": sum(s for s, _, _, name in after if name.startswith("pytest_tpumem")),
        "modules": [name for _, _, _, name in after],
        "self_by_module": {name: s for s, _, _, name in after},
        "jax": any(name == "jax" or name.startswith("jax.") for _, _, _, name in after),
    }


PERF = (
    "import time, pytest, sys\n"
    "t = time.perf_counter(); import pytest_tpumem.plugin; t = time.perf_counter() - t\n"
    "print(t * 1e6, 'jax' in sys.modules)"
)


def import_cost(env: dict, runs: int) -> dict:
    cums, selfs, perfs, jax_seen, modules, by_module = [], [], [], False, [], {}
    for _ in range(runs):
        proc = subprocess.run(
            [PY, "-X", "importtime", "-c", "import pytest; import pytest_tpumem.plugin"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        r = parse_importtime(proc.stderr)
        cums.append(r["cumulative_us"] / 1000)
        selfs.append(r["self_us_tpumem"] / 1000)
        jax_seen |= r["jax"]
        modules = r["modules"]
        for name, us in r["self_by_module"].items():
            by_module.setdefault(name, []).append(us / 1000)
        out = subprocess.run([PY, "-c", PERF], env=env, capture_output=True, text=True, check=True).stdout.split()
        perfs.append(float(out[0]) / 1000)
        jax_seen |= out[1] == "True"
    return {
        "importtime_ms": cums,
        "self_ms": selfs,
        "perf_ms": perfs,
        "jax": jax_seen,
        "modules": modules,
        "by_module": {k: statistics.median(v) for k, v in by_module.items()},
    }


PROBE_CONFTEST = textwrap.dedent(
    """
    import json, os, sys

    def pytest_unconfigure(config):
        with open(os.environ["TPUMEM_PROBE_OUT"], "w") as f:
            json.dump({
                "jax": "jax" in sys.modules,
                "jaxlib": "jaxlib" in sys.modules,
                "tpumem_modules": sorted(m for m in sys.modules if m.startswith("pytest_tpumem")),
            }, f)
    """
)


def write_tiny_suite(path: str, conftest: bool) -> None:
    os.makedirs(path)
    with open(os.path.join(path, "test_tiny.py"), "w") as f:
        for i in range(5):
            f.write(f"def test_{i}():\n    assert {i} + 1 == {i + 1}\n\n")
    if conftest:
        with open(os.path.join(path, "conftest.py"), "w") as f:
            f.write(PROBE_CONFTEST)


def probe(suite: str, env: dict, extra: list[str]) -> dict:
    env = dict(env, TPUMEM_PROBE_OUT=os.path.join(suite, "probe.json"))
    proc = subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", *extra], cwd=suite, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(env["TPUMEM_PROBE_OUT"]) as f:
        return json.load(f)


def wall(suite: str, env: dict, rounds: int) -> dict:
    cmd = {"plain": [PY, "-m", "pytest", "-q"], "no:tpumem": [PY, "-m", "pytest", "-q", "-p", "no:tpumem"]}
    times: dict[str, list[float]] = {"plain": [], "no:tpumem": []}
    cpus: dict[str, list[float]] = {"plain": [], "no:tpumem": []}
    for name in cmd:  # one unmeasured run each: file caches, .pytest_cache
        timed_run(cmd[name], cwd=suite, env=env)
    for r in range(rounds):
        order = ["plain", "no:tpumem"] if r % 2 == 0 else ["no:tpumem", "plain"]
        for name in order:
            t, cpu, proc = timed_run(cmd[name], cwd=suite, env=env)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            times[name].append(t)
            cpus[name].append(cpu)
    return {
        "times": times,
        "cpus": cpus,
        "ratios": [a / b for a, b in zip(times["plain"], times["no:tpumem"])],
        "diffs_ms": [(a - b) * 1000 for a, b in zip(times["plain"], times["no:tpumem"])],
        "cpu_ratios": [a / b for a, b in zip(cpus["plain"], cpus["no:tpumem"])],
        "cpu_diffs_ms": [(a - b) * 1000 for a, b in zip(cpus["plain"], cpus["no:tpumem"])],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30, help="alternated pairs of pytest runs per condition")
    ap.add_argument("--import-runs", type=int, default=11, help="fresh processes per import measurement")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    pycache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pytest_tpumem", "__pycache__")
    if os.path.isdir(pycache):
        print(f"note: {pycache} exists; the 'no .pyc' condition may read bytecode from it")

    with tempfile.TemporaryDirectory(prefix="tpumem-bench-import-") as tmp:
        conds = conditions(tmp)
        tiny = os.path.join(tmp, "tiny")
        probe_suite = os.path.join(tmp, "probe")
        write_tiny_suite(tiny, conftest=False)
        write_tiny_suite(probe_suite, conftest=True)
        # Fill the bytecode cache of the 'warm' condition (pytest, jax, plugin, the suites).
        warm = conds["warm .pyc cache"]
        for _ in range(2):
            subprocess.run([PY, "-c", "import pytest, pytest_tpumem.plugin"], env=warm, check=True)
            subprocess.run([PY, "-m", "pytest", "-q"], cwd=tiny, env=warm, capture_output=True)
            subprocess.run(
                [PY, "-m", "pytest", "-q", "--tpumem"],
                cwd=probe_suite,
                env=dict(warm, TPUMEM_PROBE_OUT=os.path.join(tmp, "p.json")),
                capture_output=True,
            )

        print("\n1. import pytest_tpumem.plugin after import pytest (fresh process each; ms)")
        rows, imports = [], {}
        for name, env in conds.items():
            r = imports[name] = import_cost(env, args.import_runs)
            rows.append(
                [
                    name,
                    spread(r["importtime_ms"], "{:.2f}"),
                    f"{statistics.median(r['self_ms']):.2f}",
                    spread(r["perf_ms"], "{:.2f}"),
                    "yes" if r["jax"] else "no",
                ]
            )
        print(
            table(
                ["condition", "-X importtime cumulative", "self of tpumem modules", "perf_counter", "jax imported"],
                rows,
            )
        )
        for name, r in imports.items():
            parts = ", ".join(f"{m} {ms:.2f}" for m, ms in r["by_module"].items())
            print(f"self ms per module, median, {name}: {parts}")

        print(
            "\n2. inside a pytest run (tiny suite, not -q so --tpumem prints its header; a conftest reads sys.modules at pytest_unconfigure)"
        )
        rows = []
        for label, extra in (
            ("pytest", []),
            ("pytest -p no:tpumem", ["-p", "no:tpumem"]),
            ("pytest --tpumem", ["--tpumem"]),
        ):
            p = probe(probe_suite, conds["no .pyc (this env)"], extra)
            rows.append(
                [
                    label,
                    p["jax"],
                    p["jaxlib"],
                    ", ".join(m.removeprefix("pytest_tpumem") or "pytest_tpumem" for m in p["tpumem_modules"]) or "-",
                ]
            )
        print(table(["command", "jax in sys.modules", "jaxlib", "pytest_tpumem modules loaded"], rows))

        print(
            f"\n3. pytest vs pytest -p no:tpumem, tiny suite (5 trivial tests), {args.rounds} alternated pairs per condition"
        )
        print(f"   ({load_average()} before)")
        rows = []
        for name, env in conds.items():
            w = wall(tiny, env, args.rounds)
            med = {k: statistics.median(v) * 1000 for k, v in w["times"].items()}
            cmed = {k: statistics.median(v) * 1000 for k, v in w["cpus"].items()}
            rows.append(
                [
                    name,
                    "wall",
                    f"{med['plain']:.0f}",
                    f"{med['no:tpumem']:.0f}",
                    spread(w["ratios"]),
                    spread(w["diffs_ms"], "{:.1f}"),
                ]
            )
            rows.append(
                [
                    name,
                    "cpu",
                    f"{cmed['plain']:.0f}",
                    f"{cmed['no:tpumem']:.0f}",
                    spread(w["cpu_ratios"]),
                    spread(w["cpu_diffs_ms"], "{:.1f}"),
                ]
            )
        print(
            table(
                [
                    "condition",
                    "time",
                    "pytest ms",
                    "-p no:tpumem ms",
                    "ratio plain / no:tpumem, per pair",
                    "difference ms, per pair",
                ],
                rows,
            )
        )
        print(f"   ({load_average()} after)")


if __name__ == "__main__":
    main()
