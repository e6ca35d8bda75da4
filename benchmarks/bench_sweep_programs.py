"""(q) Compiled programs kept by the code, under the whole-suite sweep: two real suites (optax's
and dm-haiku's own tests), clean and with a jit made on every call and kept in a list, planted in
each library's own function (``_planted_programs.py``: ``optax.apply_updates`` and
``hk.Linear.__call__``). Every test that calls the planted function must fail its sweep for the
compile cache, at the planted line, whatever the threshold; the clean suites must fail nothing.

    python benchmarks/bench_sweep_programs.py --python /tmp/venv/bin/python

``--python``: an interpreter with optax (its tests ship in its wheel), dm-haiku, jax and pytest
installed (bench_real_suite.py --make-venv and bench_third_party.py --make-venv build such venvs;
one venv with both works). The plugin is loaded from this checkout (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import base_env, load_average, machine, table  # noqa: E402
from bench_real_suite import FILES as OPTAX_FILES  # noqa: E402
from bench_third_party import FILES as HAIKU_FILES  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SWEEP = ["--tpumem", "--tpumem-leak-check=all", "--tpumem-leak-threshold=10MB"]
PLANTED_FILE = "_planted_programs.py"


def _root(python: str, module: str, up: int) -> str:
    out = subprocess.run(
        [python, "-c", f"import {module}, os; print(os.path.dirname(os.path.abspath({module}.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for _ in range(up):
        out = os.path.dirname(out)
    return out


def _pytest(python: str, root: str, args: list[str]) -> tuple[float, str]:
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([REPO, HERE, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    began = time.monotonic()
    out = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_planted_programs", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    return time.monotonic() - began, (out.stdout.strip().splitlines() or ["(no output)"])[-1]


def _failed(report: str) -> dict[str, str]:
    """Each test the sweep failed, with what it said (the compile cache and its line, or the series)."""
    tests = json.load(open(report))["tests"]
    out = {}
    for nodeid, entry in tests.items():
        if entry.get("outcome") != "failed" and entry.get("verdict") == "ok":
            continue
        for check in entry.get("checks", []):
            if check.get("check") == "leak" and check.get("verdict") != "ok":
                kept = check.get("kept_programs") or []
                out[nodeid] = (
                    f"compile cache at {kept[0]['site']} ({kept[0]['per_iteration']}/run)"
                    if kept
                    else check.get("growth_source", "")
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--suites", default="optax,haiku")
    args = ap.parse_args()
    suites = {
        "optax": (_root(args.python, "optax", 0) + "/_src", list(OPTAX_FILES)),
        "haiku": (_root(args.python, "haiku", 1), list(HAIKU_FILES)),
    }
    print(f"machine: {machine()}; load before: {load_average()}")
    rows, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.suites.split(","):
            root, files = suites[name]
            plain_path = os.path.join(tmp, f"{name}-calls.json")
            wall, said = _pytest(args.python, root, ["--planted-off", f"--planted-record={plain_path}", *files])
            plain = json.load(open(plain_path))
            print(f"{name} plain, counting calls: {said} ({wall:.0f} s); {len(plain)} tests call the planted function")
            results, swept = {}, {}
            for variant in ("clean", "planted"):
                report = os.path.join(tmp, f"{name}-{variant}.json")
                record = os.path.join(tmp, f"{name}-{variant}-calls.json")
                extra = ["--planted-off"] if variant == "clean" else []
                wall, said = _pytest(
                    args.python, root, [*extra, f"--planted-record={record}", *SWEEP, f"--tpumem-json={report}", *files]
                )
                results[variant], swept[variant] = _failed(report), json.load(open(record))
                print(f"{name} sweep {variant}: {said} ({wall:.0f} s)")
            # A test calls the planted function again when its body runs again only where nothing caches
            # the call: jax.jit(planted)(x) traces it once, and a later run reuses the trace (no new
            # program, in the sweep as in a real process). Those are the tests the sweep must fail.
            again = {t for t, n in swept["clean"].items() if n > plain.get(t, 0)}
            planted = results["planted"]
            caught = [t for t in again if t in planted and PLANTED_FILE in planted[t]]
            missed = sorted(again - set(caught))
            false = sorted(t for t in planted if t not in plain) + sorted(results["clean"])
            rows.append((name, len(plain), len(again), len(caught), len(missed), len(results["clean"]), len(false)))
            problems += [f"{name}: missed {t}" for t in missed]
            problems += [
                f"{name}: failed without calling the planted function: {t}: {planted.get(t) or results['clean'].get(t)}"
                for t in false
            ]
    print()
    header = ("suite", "tests calling it", "calling it again", "caught at its line", "missed", "clean failed", "false")
    print(table(header, rows))
    print(f"load after: {load_average()}")
    print("problems: " + ("none" if not problems else ""))
    for p in problems:
        print("  " + p)


if __name__ == "__main__":
    main()
