"""(i) A real third-party suite under the sweep, on a loaded runner: no false leak, the same verdicts
twice, and leaks planted in the library's own functions caught at their true rates.

The suite is dm-haiku 0.0.16's own tests (shipped in its wheel; not used by the other benchmarks),
installed in a venv outside this repository (``--make-venv DIR`` builds one: jax 0.10.2, dm-haiku
0.0.16, chex 0.1.92, pytest 9.2.0, this checkout editable). With a bounded CPU and memory load
beside it (benchmarks/_load.py), it runs:

1. the plain file set under ``--tpumem --tpumem-leak-check=all --tpumem-leak-threshold=10MB``,
   twice: every test must pass its checks, with the same verdict both times;
2. the planted tests alone without the plugin, counting the calls of the planted functions
   (benchmarks/_planted_haiku.py: a 16 MB device array kept by every ``hk.Linear.__call__`` and a
   20 MB numpy array kept by every ``hk.LayerNorm.__call__``, in ten chosen tests only): the true
   rate of each planted test is the bytes a call keeps times its calls per run;
3. the file set under the sweep again with the leaks planted, twice: every planted test must fail
   with a leak whose reported growth is within 2% of its true rate, and no other test may fail.

    python benchmarks/bench_third_party.py --make-venv /tmp/haiku-venv
    python benchmarks/bench_third_party.py --python /tmp/haiku-venv/bin/python      # ~8 min here
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _load import background_load, describe  # noqa: E402
from _util import base_env, load_average, machine, table  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FILES = [
    "haiku/_src/basic_test.py",
    "haiku/_src/batch_norm_test.py",
    "haiku/_src/bias_test.py",
    "haiku/_src/depthwise_conv_test.py",
    "haiku/_src/embed_test.py",
    "haiku/_src/group_norm_test.py",
    "haiku/_src/initializers_test.py",
    "haiku/_src/layer_norm_test.py",
    "haiku/_src/moving_averages_test.py",
    "haiku/_src/pool_test.py",
    "haiku/_src/rms_norm_test.py",
    "haiku/_src/nets/mlp_test.py",
]
PER_CALL = {"device": 16_000_000, "host": 20_000_000}
SWEEP = ["--tpumem", "--tpumem-leak-check=all", "--tpumem-leak-threshold=10MB"]


def make_venv(path: str) -> None:
    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    pip = [os.path.join(path, "bin", "pip"), "install", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "jax==0.10.2", "jaxlib==0.10.2", "dm-haiku==0.0.16", "chex==0.1.92", "dm-tree", "pytest==9.2.0"],
        check=True,
    )
    subprocess.run([*pip, "-e", REPO], check=True)
    print(f"built {path}; run: python {sys.argv[0]} --python {path}/bin/python")


def site_packages(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import haiku, os; print(os.path.dirname(os.path.dirname(haiku.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def pytest_run(python: str, root: str, env: dict, args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - began, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", help="an interpreter with dm-haiku 0.0.16, jax and this checkout installed")
    ap.add_argument("--make-venv", metavar="DIR", help="build that interpreter's venv and stop")
    ap.add_argument("--no-load", action="store_true")
    a = ap.parse_args()
    if a.make_venv:
        return make_venv(a.make_venv)
    if not a.python:
        ap.error("give --python (or --make-venv DIR first)")
    root = site_packages(a.python)
    env = base_env()
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)
    sys.path.insert(0, HERE)
    import _planted_haiku

    planted_ids = list(_planted_haiku.PLANTED)
    print(machine())
    print(f"suite: dm-haiku's tests, {len(FILES)} files under {root}")
    print("load:", "none" if a.no_load else describe(2, 300))
    problems: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="tpumem-third-party-") as tmp,
        background_load() if not a.no_load else contextlib.nullcontext(),
    ):
        print(load_average())
        verdicts = []
        for run in (1, 2):
            report = os.path.join(tmp, f"clean{run}.json")
            wall, proc = pytest_run(a.python, root, env, [*SWEEP, f"--tpumem-json={report}", *FILES])
            tests = json.load(open(report))["tests"]
            bad = {t: e["verdict"] for t, e in tests.items() if e["verdict"] != "ok"}
            verdicts.append({t: e["verdict"] for t, e in tests.items()})
            print(
                f"clean sweep {run}: {len(tests)} tests checked in {wall:.0f} s, {proc.stdout.strip().splitlines()[-1]}; not ok: {bad or 'none'}"
            )
            problems += [f"clean sweep {run}: {t} {v}" for t, v in bad.items()]
        if verdicts[0] != verdicts[1]:
            problems.append("the two clean sweeps gave different verdicts")
        calls_path = os.path.join(tmp, "calls.json")
        pytest_run(a.python, root, env, ["-p", "_planted_haiku", f"--planted-record={calls_path}", *planted_ids])
        calls = json.load(open(calls_path))
        rows = []
        for run in (1, 2):
            report = os.path.join(tmp, f"planted{run}.json")
            wall, proc = pytest_run(
                a.python, root, env, ["-p", "_planted_haiku", *SWEEP, f"--tpumem-json={report}", *FILES]
            )
            tests = json.load(open(report))["tests"]
            print(f"planted sweep {run}: {wall:.0f} s, {proc.stdout.strip().splitlines()[-1]}")
            for nodeid, c in sorted(calls.items()):
                true = PER_CALL[c["kind"]] * c["calls"]
                e = tests[nodeid]
                error = (e["growth"] - true) / true if e.get("growth") is not None else float("inf")
                rows.append(
                    (
                        run,
                        nodeid.split("::", 1)[1],
                        c["kind"],
                        c["calls"],
                        f"{true / 1e6:.1f}",
                        f"{(e.get('growth') or 0) / 1e6:.3f}",
                        f"{100 * error:+.3f}%",
                        e["verdict"],
                        e["growth_source"],
                    )
                )
                if e["verdict"] != "leak" or abs(error) > 0.02:
                    problems.append(
                        f"planted sweep {run}: {nodeid} {e['verdict']} growth {e.get('growth')} for a true {true}"
                    )
            others = {t: e["verdict"] for t, e in tests.items() if t not in calls and e["verdict"] != "ok"}
            problems += [f"planted sweep {run}: {t} {v} (not planted)" for t, v in others.items()]
        print(load_average())
    print()
    print(
        table(
            (
                "run",
                "planted test",
                "kind",
                "calls/run",
                "true MB/run",
                "reported MB/run",
                "error",
                "verdict",
                "source",
            ),
            rows,
        )
    )
    print()
    print("problems: " + ("none" if not problems else "\n  " + "\n  ".join(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
