"""(l) What the suite ledger costs a test: 1,000 tiny tests (by default) beside a session fixture
that holds LIVE arrays (0, 1,000 and 10,000 by default), run under --tpumem with the ledger and
without it (``-p no:tpumem-ledger``, the one thing that differs), in alternating rounds.

The cost a test is (ledger - no ledger) / tests of the same round, from CPU seconds (user + sys of
the pytest process; far less disturbed than wall time by other load), with wall seconds beside.

    python benchmarks/bench_ledger.py [--tests 1000] [--live 0 1000 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import alternate_rounds, base_env, load_average, machine, spread, table  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUITE = """
import jax.numpy as jnp
import pytest


@pytest.fixture(scope="session")
def held():
    return [jnp.full((4,), float(i)) for i in range({live})]


@pytest.mark.parametrize("i", range({tests}))
def test_tiny(held, i):
    assert len(held) == {live}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--live", type=int, nargs="+", default=[0, 1000, 10000])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    print(machine())
    print(load_average())
    rows = []
    for live in args.live:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "test_tiny.py"), "w") as f:
                f.write(SUITE.format(live=live, tests=args.tests))
            base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--tpumem"]
            cmd = {"no ledger": [*base, "-p", "no:tpumem-ledger"], "ledger": base}

            def check(name: str, proc: object, live: int = live) -> None:
                out = getattr(proc, "stdout", "")
                if getattr(proc, "returncode", 1) != 0 or f"{args.tests} passed" not in out:
                    raise SystemExit(f"{name} with {live} live arrays did not pass:\n{out[-2000:]}")
                if (name == "ledger") != ("tpumem ledger" in out):
                    raise SystemExit(f"{name} with {live} live arrays: the ledger was {'not ' * (name == 'ledger')}on")

            print(f"{live} live arrays, {args.tests} tests:")
            wall, cpu = alternate_rounds(cmd, args.rounds, check, cwd=tmp, env=env)
        per_test_cpu = [(a - b) / args.tests * 1000 for a, b in zip(cpu["ledger"], cpu["no ledger"])]
        per_test_wall = [(a - b) / args.tests * 1000 for a, b in zip(wall["ledger"], wall["no ledger"])]
        rows.append(
            (
                live,
                f"{statistics.median(cpu['no ledger']):.2f}",
                f"{statistics.median(cpu['ledger']):.2f}",
                spread(per_test_cpu),
                spread(per_test_wall),
            )
        )
    print()
    print(
        table(
            ("live arrays", "CPU s, no ledger", "CPU s, ledger", "ms a test (CPU)", "ms a test (wall)"),
            rows,
        )
    )


if __name__ == "__main__":
    main()
