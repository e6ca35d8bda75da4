"""(f) What measuring every test costs a real, public JAX library's test suite: optax's own tests.

optax's wheel ships its tests (absltest TestCases) inside the package. This script needs an
interpreter that has optax with its test dependencies, jax and pytest installed, kept out of this
repository; ``--make-venv DIR`` builds one (``pip install "optax[test]==0.2.8" jax==<this jax>
pytest``). The plugin is loaded from this checkout (``PYTHONPATH`` and ``-p pytest_tpumem.plugin``)
in every variant, so the baseline is "installed but off":

    plain       pytest -q
    budget      pytest -q --tpumem --tpumem-max-hbm 1GB          (every test measured)
    nosampler   the same with --tpumem-sample-ms 0                 (diagnostic: the sampler's share)
    recompile   the same with --tpumem-recompile all               (every test starts with jax's caches
                                                                    cleared: the compiled witness for all)

The variants run in alternating order, repeated; ratios are per round (variant / plain of the same
round). Afterwards, in one process of the budget variant with cProfile on, the plugin's own
functions are ranked by cumulative time: where the time goes.

    python benchmarks/bench_real_suite.py --python /tmp/optax-venv/bin/python [--rounds 5] [--files ...]
    python benchmarks/bench_real_suite.py --make-venv /tmp/optax-venv
"""

from __future__ import annotations

import argparse
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import alternate_rounds, base_env, load_average, per_round, spread, table, timed_run  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A third of optax's test files (206 tests, ~22 s plain here); alias_test.py alone takes minutes.
FILES = (
    "transform_test.py",
    "combine_test.py",
    "update_test.py",
    "numerics_test.py",
    "utils_test.py",
    "lookahead_test.py",
    "base_test.py",
    "factorized_test.py",
)
VARIANTS = {
    "plain": [],
    "budget": ["--tpumem", "--tpumem-max-hbm", "1GB"],
    "nosampler": ["--tpumem", "--tpumem-max-hbm", "1GB", "--tpumem-sample-ms", "0"],
    "recompile": ["--tpumem", "--tpumem-max-hbm", "1GB", "--tpumem-recompile", "all"],
}


def make_venv(path: str) -> None:
    from importlib.metadata import version

    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    pip = [os.path.join(path, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "optax[test]==0.2.8", f"jax=={version('jax')}", "pytest"], check=True)
    print(f"made {path}; run: python benchmarks/bench_real_suite.py --python {path}/bin/python")


def suite_dir(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import optax, os; print(os.path.dirname(optax.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return os.path.join(out.stdout.strip(), "_src")


def profile(python: str, args: list[str], env: dict, workdir: str) -> None:
    """One budget run under cProfile: the plugin's functions by cumulative time."""
    out = os.path.join(workdir, "budget.prof")
    cmd = [
        python,
        "-m",
        "cProfile",
        "-o",
        out,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *VARIANTS["budget"],
        *args,
    ]
    subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    stats = pstats.Stats(out)
    total = stats.total_tt
    rows = []
    for (path, line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        if "pytest_tpumem" in path and ct / total > 0.002:
            rows.append((ct, f"{os.path.relpath(path, REPO)}:{line} {name}"))
    rows.sort(reverse=True)
    print(
        f"\nwhere the time goes (cProfile of one budget run, {total:.1f} s of CPU in the main thread; the sampler thread is not profiled)"
    )
    print(
        table(
            ["cumulative s", "share", "function"],
            [[f"{ct:.2f}", f"{ct / total:.1%}", where] for ct, where in rows[:15]],
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", help="an interpreter with optax[test], jax and pytest installed")
    ap.add_argument("--make-venv", metavar="DIR", help="build such an interpreter in DIR and stop")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", default=",".join(FILES), help="optax/_src test files to run")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    if args.make_venv:
        make_venv(args.make_venv)
        return
    if not args.python:
        sys.exit("give --python (an interpreter with optax[test] installed), or build one with --make-venv DIR")
    src = suite_dir(args.python)
    files = [os.path.join(src, f) for f in args.files.split(",")]
    names = args.variants.split(",")
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)  # optax's sharding tests set their own device count
    # The plugin from this checkout: by its entry point where the interpreter sees one (an editable
    # install's metadata in the checkout), else named with -p.
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
            "import jax, optax, pytest, sys; print(sys.version.split()[0], jax.__version__, optax.__version__, pytest.__version__)",
        ],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.split()
    print(
        f"interpreter {args.python}: Python {versions[0]}, jax {versions[1]}, optax {versions[2]}, pytest {versions[3]}; {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="tpumem-bench-real-") as workdir:
        cmd = {
            n: [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load, *VARIANTS[n], *files] for n in names
        }
        _, _, first = timed_run(cmd["plain"], cwd=workdir, env=env)  # file-system caches, and the test count
        m = re.search(r"(\d+) passed", first.stdout)
        if first.returncode != 0 or not m:
            sys.exit(f"the plain run failed:\n{first.stdout[-3000:]}\n{first.stderr[-3000:]}")
        n = int(m.group(1))
        print(f"suite: {n} tests in {len(files)} files of {src}; {args.rounds} rounds, order rotated each round")
        print(f"({load_average()} before)")

        def check(name: str, proc: subprocess.CompletedProcess) -> None:
            passed = re.search(r"(\d+) passed", proc.stdout)
            if proc.returncode != 0 or not passed or int(passed.group(1)) != n:
                sys.exit(f"{name} run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")

        wall, cpu = alternate_rounds(cmd, args.rounds, check, cwd=workdir, env=env)
        rows = []
        for name in names:
            rw = per_round(wall[name], wall["plain"])
            rc = per_round(cpu[name], cpu["plain"])
            per_test = [(a - b) / n * 1000 for a, b in zip(wall[name], wall["plain"])]
            rows.append(
                [
                    name,
                    f"{statistics.median(wall[name]):.2f}",
                    spread(rw),
                    spread(rc),
                    f"{statistics.median(per_test):+.1f}",
                ]
            )
        print()
        print(
            table(
                [
                    "variant",
                    "wall s (median)",
                    "wall ratio vs plain, per round",
                    "cpu ratio vs plain, per round",
                    "ms/test (wall)",
                ],
                rows,
            )
        )
        print(f"({load_average()} after)")
        if not args.no_profile:
            profile(args.python, [*load, *files], env, workdir)


if __name__ == "__main__":
    main()
