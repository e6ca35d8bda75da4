"""(n) Climbing suites and the remedy: what the ledger says of two suites whose memory climbs test
after test, and what ``--tpumem-clear-caches`` does to them.

- ``closures``: 200 parametrized tests, each jitting a new closure over a 4 MB constant that an
  ``lru_cache`` keeps (on jax 0.10.2 a closure dropped after its test is freed with its jit, so
  something must keep it for memory to climb). No test reaches the 10 MB residue; the pattern
  does.
- ``shapes``: 200 tests that call one module-level jit with a new shape each: jax's caches keep a
  program per shape, which only ``jax.clear_caches()`` frees.

Each runs plain ``--tpumem`` and with ``--tpumem-clear-caches=module`` and ``=20``; printed: the
ledger's summary lines for memory, programs and host RSS, and its pattern lines.

    python benchmarks/bench_ledger_remedy.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import PY, base_env, load_average, machine  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = {
    "closures": """
import functools

import jax
import jax.numpy as jnp
import pytest


@functools.lru_cache(maxsize=None)
def scaler(i):
    c = jnp.full((1_000_000,), float(i))  # 4 MB, closed over by a program the cache keeps
    return jax.jit(lambda x: x * c)


@pytest.mark.parametrize("i", range(200))
def test_closure(i):
    assert scaler(i)(jnp.ones(1_000_000))[0] == i
""",
    "shapes": """
import jax
import jax.numpy as jnp
import pytest


@jax.jit
def double(x):
    return x * 2


@pytest.mark.parametrize("n", range(1, 201))
def test_new_shape(n):
    assert double(jnp.ones(n))[0] == 2
""",
}
SAID = ("cpu:0:", "programs jax holds", "host RSS", "clear_caches() ran", " tests left ", " tests compiled ")


def main() -> None:
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    print(machine())
    print(load_average())
    for name, source in SUITES.items():
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, f"test_{name}.py"), "w") as f:
                f.write(source)
            for remedy in ("off", "module", "20"):
                done = subprocess.run(
                    [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--tpumem"]
                    + [f"--tpumem-clear-caches={remedy}", f"--tpumem-json={tmp}/r.json", "."],
                    cwd=tmp,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0:
                    raise SystemExit(done.stdout[-3000:])
                print(f"{name}, --tpumem-clear-caches={remedy}: {done.stdout.strip().splitlines()[-1]}")
                ledger = done.stdout[done.stdout.find("tpumem ledger") :].splitlines()
                for line in ledger:
                    if any(s in line for s in SAID):
                        print("   " + line.strip())


if __name__ == "__main__":
    main()
