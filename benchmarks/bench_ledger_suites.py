"""(m) The suite ledger on a real third-party suite: optax's own tests (the eight files of
bench_real_suite.py, 206 tests), in a venv outside this repository (``bench_real_suite.py
--make-venv DIR`` builds one).

1. Clean, under ``--tpumem`` (the ledger alone: no test is measured): how many tests it names at
   the default 10 MB, and the patterns it names. Goal: none.
2. With a leak planted in optax's own ``safe_norm`` from a conftest (nothing in site-packages
   edited): every call keeps a 16 MB device array in a list. A concrete array even where
   ``safe_norm`` is traced (``jax.ensure_compile_time_eval``). The conftest counts the calls per
   test, so each test's true residue is 16 MB times its calls. Goal: exactly the tests that called
   it are named, each residue within 2% of the truth.
3. The cost: ``pytest`` against ``pytest --tpumem`` on the clean files, paired, in alternating
   rounds; the ratio per round. Goal: at most 1.02x.

    python benchmarks/bench_ledger_suites.py --python /tmp/optax-venv/bin/python [--rounds 5]

``--haiku-python`` (a venv from ``bench_third_party.py --make-venv``) runs the second suite,
dm-haiku 0.0.16's 12 files of (i), clean and with (i)'s planted leaks (benchmarks/_planted_haiku.py):
a 16 MB device array kept by every ``hk.Linear.__call__`` in five chosen tests, which the ledger
must name at their true residue, and a 20 MB numpy array kept by every ``hk.LayerNorm.__call__`` in
five others. Those are host memory: with ``--tpumem-host-residue`` under their 20 MB a call, the
ledger must name them for the host memory they grew, with the numpy arrays the plant keeps and its
keeper; clean, no test may be named at the default 100 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import alternate_rounds, base_env, load_average, per_round, spread  # noqa: E402
from bench_real_suite import FILES  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 10**6
PER_CALL = 16 * MB

PLANTED = '''
"""A leak planted in optax's own safe_norm: every call keeps a 16 MB device array. Calls are counted per test."""
import json
import os

import jax
import jax.numpy as jnp
import pytest
from optax._src import numerics

KEPT = []
CALLS = {}
_original = numerics.safe_norm
_current = [None]


def planted_safe_norm(*args, **kwargs):
    with jax.ensure_compile_time_eval():  # a concrete array even where safe_norm is traced
        KEPT.append(jnp.ones((4_000_000,), jnp.float32))  # 16 MB, kept
    CALLS[_current[0]] = CALLS.get(_current[0], 0) + 1
    return _original(*args, **kwargs)


numerics.safe_norm = planted_safe_norm


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid
    try:
        return (yield)
    finally:
        _current[0] = None


def pytest_sessionfinish(session):
    with open(os.path.join(str(session.config.rootpath), "calls.json"), "w") as f:
        json.dump(CALLS, f)
'''


def lines_of(path: str) -> dict[str, dict]:
    with open(path) as f:
        records = [json.loads(text) for text in f]
    return {r["test"]: r for r in records if "test" in r}


def run(python: str, cwd: str, env: dict, *args: str, path: str | None = ".") -> subprocess.CompletedProcess:
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args, *([path] if path else [])],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    return done


def haiku(python: str) -> None:
    """The second suite: dm-haiku's tests, clean and planted (see the module's text)."""
    import _planted_haiku
    from bench_third_party import FILES as HAIKU_FILES
    from bench_third_party import site_packages

    root = site_packages(python)
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([REPO, os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    with tempfile.TemporaryDirectory() as tmp:
        ledger = os.path.join(tmp, "ledger.jsonl")
        clean = run(python, root, env, "--tpumem", f"--tpumem-ledger={ledger}", *HAIKU_FILES, path=None)
        lines = lines_of(ledger)
        named = sorted(t for t, line in lines.items() if line["left"] >= 10 * MB)
        print(f"4. haiku clean: {len(lines)} tests read; named at 10 MB: {len(named)} {named[:5]}")
        print("   " + clean.stdout.strip().splitlines()[-1])
        clean_host = host_named(lines, HOST_RESIDUE)
        print(
            f"   host: named at {HOST_RESIDUE // MB} MB: {len(clean_host)} {sorted(clean_host)[:5]}; {grew_most(lines)}"
        )
        calls_path = os.path.join(tmp, "calls.json")
        run(
            python,
            root,
            env,
            "-p",
            "_planted_haiku",
            f"--planted-record={calls_path}",
            *_planted_haiku.PLANTED,
            path=None,
        )
        with open(calls_path) as f:
            calls = json.load(f)
        run(
            python,
            root,
            env,
            "-p",
            "_planted_haiku",
            "--tpumem",
            f"--tpumem-ledger={ledger}",
            f"--tpumem-host-residue={PLANTED_HOST_RESIDUE // MB}MB",
            *HAIKU_FILES,
            path=None,
        )
        lines = lines_of(ledger)
        named_now = {t for t, line in lines.items() if line["left"] >= 10 * MB}
        device = {t: PER_CALL * c["calls"] for t, c in calls.items() if c["kind"] == "device"}
        host = {t: _planted_haiku.HOST_ELEMENTS * 4 * c["calls"] for t, c in calls.items() if c["kind"] == "host"}
        worst = max(abs(lines[t]["residue"] - truth) / truth for t, truth in device.items())
        print(
            f"5. haiku planted: device-planted tests {len(device)}, named {len(named_now & set(device))}, worst residue "
            f"error {100 * worst:.3f}%; host-planted tests named for their residue: {len(named_now & set(host))}; "
            f"other tests named: {len(named_now - set(device) - set(host))}"
        )
        named_host = host_named(lines, PLANTED_HOST_RESIDUE)
        found = {t: sum(a["bytes"] for a in lines[t]["host"].get("numpy") or []) for t in named_host}
        kept_by = sorted(
            {a["kept_by"].split(" at ")[0] for t in named_host for a in lines[t]["host"].get("numpy") or []}
        )
        errors = [abs(found[t] - truth) / truth for t, truth in host.items() if t in found]
        print(
            f"6. haiku planted, --tpumem-host-residue={PLANTED_HOST_RESIDUE // MB}MB: host-planted tests {len(host)}, "
            f"named for host memory {len(named_host & set(host))}, their numpy arrays' worst error "
            f"{100 * max(errors, default=1):.3f}%, kept by {kept_by}; other tests named for host memory: "
            f"{len(named_host - set(host))} {[(t, lines[t]['host']['grew'] // MB) for t in sorted(named_host - set(host))][:5]}"
        )


HOST_RESIDUE = 100 * MB  # --tpumem-host-residue's default
PLANTED_HOST_RESIDUE = 15 * MB  # under the planted 20 MB a call, for the planted run


def host_named(lines: dict[str, dict], threshold: int) -> set[str]:
    """The tests a ledger names for host memory, by the plugin's own rule (decisions.ledger.host_named)
    on the recorder's lines."""
    from pytest_tpumem.decisions.ledger import host_named as named
    from pytest_tpumem.telling.ledger import line_of_record

    return {t for t, line in lines.items() if named(line_of_record(t, line), threshold)}


def grew_most(lines: dict[str, dict]) -> str:
    """The three largest host growths, for the record (what the threshold is measured against)."""
    grew = sorted(
        (
            (line["host"]["grew"], t)
            for t, line in lines.items()
            if isinstance((line.get("host") or {}).get("grew"), int) and not line["host"].get("backend_started")
        ),
        reverse=True,
    )[:3]
    return "largest host growths " + ", ".join(f"{t.split('::')[-1]} {g / MB:+.1f} MB" for g, t in grew)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--python", help="an interpreter with optax's tests' dependencies (bench_real_suite.py --make-venv)"
    )
    ap.add_argument("--haiku-python", help="an interpreter with dm-haiku 0.0.16 (bench_third_party.py --make-venv)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.haiku_python:
        haiku(a.haiku_python)
    if not a.python:
        return
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    source = subprocess.run(
        [a.python, "-c", "import optax, os; print(os.path.dirname(optax.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(load_average())
    with tempfile.TemporaryDirectory() as tmp:
        for name in FILES:
            shutil.copy(os.path.join(source, "_src", name), tmp)
        ledger = os.path.join(tmp, "ledger.jsonl")

        clean = run(a.python, tmp, env, "--tpumem", f"--tpumem-ledger={ledger}")
        lines = lines_of(ledger)
        named = sorted(t for t, line in lines.items() if line["left"] >= 10 * MB)
        summary = clean.stdout[clean.stdout.find("tpumem ledger") :].splitlines()
        patterns = [s for s in summary if " tests left arrays made at " in s or " tests compiled programs at " in s]
        print(f"1. clean: {len(lines)} tests read; named at 10 MB: {len(named)} {named[:5]}; patterns: {len(patterns)}")
        print("   " + clean.stdout.strip().splitlines()[-1])
        clean_host = host_named(lines, HOST_RESIDUE)
        print(
            f"   host: named at {HOST_RESIDUE // MB} MB: {len(clean_host)} {sorted(clean_host)[:5]}; {grew_most(lines)}"
        )

        with open(os.path.join(tmp, "conftest.py"), "w") as f:
            f.write(PLANTED)
        run(a.python, tmp, env, "--tpumem", f"--tpumem-ledger={ledger}")
        with open(os.path.join(tmp, "calls.json")) as f:
            calls = json.load(f)
        truth = {t: PER_CALL * n for t, n in calls.items() if t}
        lines = lines_of(ledger)
        named_now = {t for t, line in lines.items() if line["left"] >= 10 * MB}
        worst = max(abs(lines[t]["residue"] - truth[t]) / truth[t] for t in truth)
        keepers = sorted({h[0]["by"] for t in named_now if (h := lines[t].get("held"))})
        print(
            f"2. planted: {len(truth)} tests called safe_norm ({sum(calls.values())} calls); named: {len(named_now)}; "
            f"named without a call: {len(named_now - set(truth))}; called but not named: {len(set(truth) - named_now)}; "
            f"worst residue error {100 * worst:.3f}%; named with what keeps them: "
            f"{sum(1 for t in named_now if lines[t].get('held'))} {keepers}"
        )
        os.remove(os.path.join(tmp, "conftest.py"))

        base = [a.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "."]
        cmd = {"plain": base, "--tpumem": [*base, "--tpumem", f"--tpumem-ledger={ledger}"]}  # the recorder on

        def check(name: str, proc: subprocess.CompletedProcess) -> None:
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed:\n{proc.stdout[-2000:]}")

        wall, cpu = alternate_rounds(cmd, a.rounds, check, cwd=tmp, env=env)
    print(f"3. cost, {a.rounds} paired rounds (ratio per round, --tpumem over plain):")
    print(f"   wall {spread(per_round(wall['--tpumem'], wall['plain']))}")
    print(f"   cpu  {spread(per_round(cpu['--tpumem'], cpu['plain']))}")
    print(f"   plain wall median {statistics.median(wall['plain']):.2f} s; {load_average()}")


if __name__ == "__main__":
    main()
