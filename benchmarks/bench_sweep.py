"""(g) The whole-suite leak sweep (``--tpumem-leak-check=all``) on a real, public JAX library's
test suite: optax's own tests (absltest/parameterized TestCases), in a venv outside this repo.

Two questions, one script:

- **Cost.** ``plain`` (pytest -q) and ``sweep`` (pytest -q --tpumem --tpumem-leak-check=all, the
  sweep's defaults: 1 warmup + 2 iterations, jax's caches kept between runs) run in alternating
  order, repeated; the ratio is per round (sweep / plain of the same round). Every body runs three
  times; with the caches kept, only the first run compiles, so the floor is about the plain run
  plus twice the bodies' execution. ``--clear-caches`` adds a variant that clears them after every
  run (the marker's default), whose floor is three compiles of every program.
- **False leaks.** A clean suite must come out with no leak at the default threshold. The
  sweep's JSON report keeps every series of every test, so the script also lists, per threshold
  from 1MB to 100MB, the tests that *would* fail if that were the threshold: device (live arrays)
  and host RSS apart. That is how the smallest reliable threshold is read off, without re-running.

    python benchmarks/bench_sweep.py --python /tmp/optax-venv/bin/python [--rounds 2] [--files ...]
    python benchmarks/bench_real_suite.py --make-venv /tmp/optax-venv   (builds that interpreter)

Another suite: ``--root DIR --files a_test.py,b_test.py`` runs those files under DIR instead (run
from DIR, so its conftest and package layout apply). flax 0.12.8's tests, which its wheel does not
ship, for the flax that optax[test] installs: ``git archive v0.12.8 tests | tar -x -C /tmp/flax``
in a clone of google/flax, then ``--root /tmp/flax --files tests/nnx/rngs_test.py,...``.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import alternate_rounds, base_env, load_average, per_round, spread, table  # noqa: E402
from bench_real_suite import FILES, REPO, suite_dir  # noqa: E402

THRESHOLDS = (1, 2, 5, 10, 20, 50, 100)  # MB


def _first_growth(series: dict) -> int:
    """A series' growth before any confirmation: the first iterations' rule alone."""
    values = series["values"]
    deltas = sorted(b - a for a, b in zip(values, values[1:]))
    if not deltas:
        return 0
    pick = deltas[0] if series.get("every") else deltas[(len(deltas) - 1) // 2]
    return min(pick, (values[-1] - values[0]) // len(deltas))


def would_fail(report: dict, threshold: int, device: bool) -> list[tuple[str, int, str]]:
    """(test, growth, series) for every test one of whose series grew by ``threshold`` or more per iteration."""
    out = []
    for nodeid, entry in report["tests"].items():
        for check in entry["checks"]:
            for name, s in check.get("series", {}).items():
                if (s["device"] != "host") == device and _first_growth(s) >= threshold:
                    out.append((nodeid, _first_growth(s), name))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="an interpreter with optax[test], jax and pytest installed")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--files", default=",".join(FILES), help="test files to run, relative to --root")
    ap.add_argument("--root", help="where the test files are (default: optax/_src of --python's optax)")
    ap.add_argument(
        "--clear-caches", action="store_true", help="add the variant that clears jax's caches after every run"
    )
    ap.add_argument(
        "--threshold",
        default=None,
        help="the sweep's --tpumem-leak-threshold (default: the plugin's, 100MB; 10MB is the smallest the README documents)",
    )
    ap.add_argument("--label", default="optax", help="the suite's name, for the output")
    args = ap.parse_args()
    src = args.root or suite_dir(args.python)
    files = [os.path.join(src, f) for f in args.files.split(",")]
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)
    seen = (
        subprocess.run(
            [
                args.python,
                "-c",
                "from importlib.metadata import entry_points; print(any(e.name == 'tpumem' for e in entry_points(group='pytest11')))",
            ],
            capture_output=True,
            text=True,
            env=env,
        ).stdout.strip()
        == "True"
    )
    load = [] if seen else ["-p", "pytest_tpumem.plugin"]
    versions = subprocess.run(
        [
            args.python,
            "-c",
            "import jax, pytest, sys; print(sys.version.split()[0], jax.__version__, pytest.__version__)",
        ],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.split()
    print(f"suite {args.label}: {len(files)} files under {src}")
    print(
        f"interpreter {args.python}: Python {versions[0]}, jax {versions[1]}, pytest {versions[2]}; {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="tpumem-bench-sweep-") as workdir:
        report_path = os.path.join(workdir, "sweep.json")
        base = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load]
        cmd = {
            "plain": [*base, *files],
            "sweep": [
                *base,
                "--tpumem",
                "--tpumem-leak-check=all",
                *([f"--tpumem-leak-threshold={args.threshold}"] if args.threshold else []),
                "--tpumem-json",
                report_path,
                *files,
            ],
        }
        if args.clear_caches:  # the same sweep with jax.clear_caches() after every run, via a conftest-free plugin
            cmd["sweep-clear"] = [*base, "-p", "_sweep_clear", "--tpumem", "--tpumem-leak-check=all", *files]
            env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + os.pathsep + env["PYTHONPATH"]
        counts: dict[str, str] = {}

        def check(name: str, proc: subprocess.CompletedProcess) -> None:
            m = re.search(r"(\d+) passed", proc.stdout)
            counts[name] = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            if not m:
                sys.exit(
                    f"{name}: no test passed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                )
            if name == "sweep" and proc.returncode != 0:
                failed = re.findall(r"^FAILED (\S+)", proc.stdout, re.M)
                print(f"  sweep failed {len(failed)} test(s): {failed}", flush=True)

        print(f"({load_average()} before)")
        wall, cpu = alternate_rounds(cmd, args.rounds, check, cwd=args.root or workdir, env=env)
        print(f"({load_average()} after)")
        print()
        print(
            table(
                [
                    "variant",
                    "wall s (median)",
                    "wall ratio vs plain, per round",
                    "cpu ratio vs plain, per round",
                    "last line",
                ],
                [
                    [
                        n,
                        f"{statistics.median(wall[n]):.1f}",
                        spread(per_round(wall[n], wall["plain"])),
                        spread(per_round(cpu[n], cpu["plain"])),
                        counts[n],
                    ]
                    for n in cmd
                ],
            )
        )
        with open(report_path) as f:
            report = json.load(f)
        tests = report["tests"]
        print(
            f"\nsweep report: {len(tests)} tests leak-checked, verdicts: "
            + ", ".join(
                f"{v} {sum(1 for t in tests.values() if t['verdict'] == v)}"
                for v in sorted({t["verdict"] for t in tests.values()})
            )
        )
        rows = []
        for mb in THRESHOLDS:
            dev = would_fail(report, mb * 10**6, device=True)
            host = would_fail(report, mb * 10**6, device=False)
            rows.append([f"{mb}MB", len({t for t, *_ in dev}), len({t for t, *_ in host})])
        print("\ntests whose first iteration grew by a threshold (before any confirmation):")
        print(table(["threshold", "device series (live arrays)", "host series (malloc or RSS)"], rows))
        confirmed = [t for t, e in tests.items() for c in e["checks"] if c.get("confirmed_by")]
        print(f"\nconfirmed (more runs, caches cleared): {len(confirmed)} tests {confirmed[:10]}")
        for name in ("host malloc", "host RSS"):
            growths = sorted(
                (
                    s["growth"]
                    for t in tests.values()
                    for c in t["checks"]
                    for n, s in c.get("series", {}).items()
                    if n == name
                ),
                reverse=True,
            )
            if growths:
                print(
                    f"\n{name} growth per iteration, as judged: max {growths[0] / 1e6:.2f}MB, top 5 {[round(g / 1e6, 2) for g in growths[:5]]} MB"
                )
        for nodeid, growth, name in sorted(would_fail(report, 10**6, device=False), key=lambda x: -x[1])[:10]:
            print(f"  {growth / 1e6:6.2f}MB  {name:10s} {nodeid}")
        for nodeid, growth, name in sorted(would_fail(report, 10**6, device=True), key=lambda x: -x[1])[:10]:
            print(f"  {growth / 1e6:6.2f}MB  {name:10s} {nodeid}")


if __name__ == "__main__":
    main()
