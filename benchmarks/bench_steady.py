"""(h) Steadiness under load: the same clean code must get the same verdict and the same figures on
every run, on a busy 2-core runner too; planted leaks must be reported at their true rates.

Runs two suites N times each (alternating), each run in a fresh pytest process under --tpumem with
a JSON report, while a bounded CPU and memory load runs beside them (benchmarks/_load.py: started
before the first run, stopped after the last):

- the bundled examples/ (the README's main job),
- the clean twins of the planted leaks (tests/planted/test_clean.py), and
- a generated suite of the cases found on a loaded runner (issue 15): an input made inside a
  budgeted test, a bf16 layer norm, a loop that replaces its state, a numpy array put on the device
  and dropped, a failing test followed by a budgeted one, a clean leak-checked optax training step,
  a budget under the sweep, and planted leaks with known rates (device arrays, a list of numpy
  copies, a dict of host copies) that must fail.

Prints, per test: the verdicts seen, and the spread (lowest to highest) of the peak, the devices'
growth, and the host's (``host malloc`` and ``host other``, which a gate compares, and ``host RSS``,
shown only);
then the planted leaks' reported rates against their true rates. Goals: no false failure, no
spread for deterministic figures (peaks, device growth), planted rates within 2%.

    python benchmarks/bench_steady.py --runs 20            # ~30 min here
    python benchmarks/bench_steady.py --runs 3 --no-load   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _load import background_load, describe  # noqa: E402
from _util import PY, base_env, load_average, machine, table, timed_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 10**6

CASES = {
    "conftest.py": """
        import os
        os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    """,
    "test_peaks.py": """
        import jax, jax.numpy as jnp, numpy as np, pytest

        @jax.jit
        def double(x):
            return x * 2

        def layer_norm_bf16(x):
            mu = x.mean(-1, keepdims=True)
            return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

        @pytest.mark.max_hbm("8MB")          # x and double(x): 8 MB at once
        def test_input_made_in_the_test():
            x = jnp.ones((1_000_000,))
            double(x).block_until_ready()

        @pytest.mark.max_hbm("40MB")         # x and its output: 33.6 MB
        def test_bf16_layer_norm():
            x = jnp.ones((4096, 2048), jnp.bfloat16)
            jax.jit(layer_norm_bf16)(x).block_until_ready()

        @pytest.mark.max_hbm("40MB")         # the old x and the new one: 33.6 MB
        def test_loop_replaces_its_state():
            f = jax.jit(lambda a: a * 2)
            x = jnp.ones((4096, 2048), jnp.bfloat16)
            for _ in range(5):
                x = f(x)
            x.block_until_ready()

        @pytest.mark.max_hbm("30MB")         # 8 MB on the device, never bound to a name
        def test_numpy_to_device():
            jax.device_put(np.ones((2_000_000,), np.float32)).block_until_ready()
    """,
    "test_after_failure.py": """
        import pytest, jax.numpy as jnp

        @pytest.mark.xfail(strict=True)
        def test_fails_holding_array():
            big = jnp.ones((3_000_000,))     # 12 MB in the frame its traceback keeps
            assert float(big.sum()) < 0

        @pytest.mark.max_hbm("6MB")          # 4 MB
        def test_next():
            jnp.ones((1_000_000,)).block_until_ready()
    """,
    "test_train_step.py": """
        import jax, jax.numpy as jnp, numpy as np, optax, pytest

        SIZES = (512, 1024, 1024, 10)
        OPT = optax.adam(1e-3)

        def apply(params, x):
            for w, b in params[:-1]:
                x = jax.nn.relu(x @ w + b)
            w, b = params[-1]
            return x @ w + b

        def loss_fn(params, x, y):
            return optax.softmax_cross_entropy_with_integer_labels(apply(params, x), y).mean()

        @jax.jit
        def train_step(params, opt_state, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            updates, opt_state = OPT.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        @pytest.fixture
        def state():
            rng = np.random.default_rng(0)
            params = [(jnp.asarray(rng.standard_normal((a, b), np.float32) / np.sqrt(a)), jnp.zeros((b,)))
                      for a, b in zip(SIZES[:-1], SIZES[1:])]
            x = jnp.asarray(rng.standard_normal((256, SIZES[0]), np.float32))
            y = jnp.asarray(rng.integers(0, 10, (256,), np.int32))
            return params, OPT.init(params), x, y

        @pytest.mark.max_hbm("500MB")
        @pytest.mark.leak_check(threshold="10MB")
        def test_step_leak_checked(state):
            params, opt_state, x, y = state
            p, o, loss = train_step(params, opt_state, x, y)
            assert jnp.isfinite(loss)
    """,
    "test_planted.py": """
        import jax.numpy as jnp, numpy as np, pytest

        device_kept, host_list, host_dict = [], [], {}

        @pytest.mark.leak_check(threshold="10MB")
        def test_device_list_16MB():
            device_kept.append(jnp.ones((4_000_000,), jnp.float32))

        @pytest.mark.leak_check(threshold="10MB")
        def test_host_list_20MB():
            host_list.append(np.full((5_000_000,), 1.0, np.float32))

        @pytest.mark.leak_check(threshold="10MB")
        def test_host_dict_16MB():
            host_dict[len(host_dict)] = np.asarray(jnp.arange(4_000_000, dtype=jnp.float32)) + 0
    """,
}
TRUE_RATES = {"test_device_list_16MB": 16 * MB, "test_host_list_20MB": 20 * MB, "test_host_dict_16MB": 16 * MB}


# The suite ledger's planted suite, tests/test_ledger.py's own: a 64 MB list a test leaves in its
# module, a jit with a 4 MB constant kept in a registry, a module fixture of 100 MB, a failing test
# holding 50 MB, clean tests. Only the first may be named, with the same residues on every run.
sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_ledger import PLANTED  # noqa: E402

LEDGER_CASES = {"test_ledger_planted.py": PLANTED}


def write_cases(directory: str, cases: dict[str, str] = CASES) -> None:
    for name, source in cases.items():
        with open(os.path.join(directory, name), "w") as f:
            f.write(textwrap.dedent(source).lstrip())


def ledger_lines(path: str) -> dict[str, dict]:
    """The flight recorder's line of each test (the suite ledger's residue, and what it names)."""
    out = {}
    with open(path) as f:
        for text in f:
            record = json.loads(text)
            if "test" in record:
                out[record["test"]] = record
    return out


def series_growth(entry: dict, which: str) -> int | None:
    """The growth of a leak check's device series (the largest), or of its host series ``which``."""
    out = None
    for check in entry.get("checks", []):
        for name, series in (check.get("series") or {}).items():
            if (which == "device" and series.get("device") != "host") or name == which:
                out = series["growth"] if out is None else max(out, series["growth"])
    return out


def run_once(args: list[str], cwd: str, env: dict, report: str) -> tuple[float, dict, dict]:
    ledger = report + ".ledger.jsonl"
    wall, _, proc = timed_run(
        [
            PY,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--tpumem",
            f"--tpumem-json={report}",
            f"--tpumem-ledger={ledger}",
            *args,
        ],
        cwd=cwd,
        env=env,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(report) as f:
        return wall, json.load(f)["tests"], ledger_lines(ledger)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--load-cpus", type=int, default=2)
    ap.add_argument("--load-mb", type=int, default=300)
    ap.add_argument("--no-load", action="store_true")
    a = ap.parse_args()
    env = base_env()
    print(machine())
    print("load:", "none" if a.no_load else describe(a.load_cpus, a.load_mb))
    with tempfile.TemporaryDirectory() as tmp:
        cases = os.path.join(tmp, "cases")
        os.mkdir(cases)
        write_cases(cases)
        ledger_dir = os.path.join(tmp, "ledger")
        os.mkdir(ledger_dir)
        write_cases(ledger_dir, LEDGER_CASES)
        twins_dir = os.path.join(tmp, "twins")
        os.mkdir(twins_dir)
        twins = (Path(ROOT) / "tests" / "planted" / "test_clean.py").read_text()
        write_cases(twins_dir, {"conftest.py": CASES["conftest.py"], "test_clean.py": twins})
        suites = {
            "examples": (["examples/"], ROOT),
            # the clean twins of tests/planted (leak checks of training steps, fixtures, metrics):
            # once in tests/test_leaks.py, here N times under load
            "planted clean twins": (["."], twins_dir),
            "cases": ([".", "--tpumem-leak-check=marked"], cases),
            "cases under the sweep": (
                ["test_peaks.py", "test_train_step.py", "--tpumem-leak-check=all", "--tpumem-leak-threshold=10MB"],
                cases,
            ),
            "ledger planted": (["."], ledger_dir),
        }
        seen: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        residues: dict[str, list[int]] = defaultdict(list)  # suite: test -> its residue, a run each
        named: dict[str, list[tuple[str, ...]]] = defaultdict(list)  # suite -> the tests it named, a run each
        walls: dict[str, list[float]] = defaultdict(list)
        began = time.perf_counter()
        with background_load(a.load_cpus, a.load_mb) if not a.no_load else contextlib.nullcontext():
            print(load_average())
            for r in range(a.runs):
                for suite, (args, cwd) in suites.items():
                    wall, tests, lines = run_once(args, cwd, env, os.path.join(tmp, "report.json"))
                    walls[suite].append(wall)
                    for nodeid, line in lines.items():
                        residues[f"{suite}: {nodeid}"].append(line["residue"])
                    named[suite].append(tuple(sorted(n for n, line in lines.items() if line["left"] >= 10 * MB)))
                    for nodeid, e in tests.items():
                        key = f"{suite}: {nodeid}"
                        seen[key]["verdict"].append(f"{e['verdict']}/{e['outcome']}")
                        seen[key]["peak"].append(e.get("peak"))
                        seen[key]["growth"].append(e.get("growth"))
                        seen[key]["device"].append(series_growth(e, "device"))
                        seen[key]["malloc"].append(series_growth(e, "host malloc"))
                        seen[key]["other"].append(series_growth(e, "host other"))
                        seen[key]["rss"].append(series_growth(e, "host RSS"))
                print(
                    f"  run {r + 1}/{a.runs} done ({time.perf_counter() - began:.0f} s; {load_average()})", flush=True
                )
    rows, false_failures = [], 0
    moved: dict[str, list[float]] = {"peak": [], "device": [], "malloc": [], "other": []}
    for key, figures in sorted(seen.items()):
        planted = any(name in key for name in TRUE_RATES)
        verdicts = ", ".join(f"{v} x{figures['verdict'].count(v)}" for v in sorted(set(figures["verdict"])))
        if not planted and "test_fails_holding_array" not in key:
            false_failures += sum(1 for v in figures["verdict"] if not v.startswith("ok/passed"))
        cells = []
        for figure in ("peak", "device", "malloc", "other", "rss"):
            values = [v for v in figures[figure] if v is not None]
            if not values:
                cells.append("-")
                continue
            lo, hi = min(values), max(values)
            if figure in moved and not planted:
                moved[figure].append(hi - lo)
            cells.append(f"{lo / MB:.3f}" if lo == hi else f"{lo / MB:.3f} to {hi / MB:.3f}")
        rows.append((key, verdicts, *cells))
    print()
    print(
        table(
            (
                "test",
                "verdicts",
                "peak MB",
                "device growth MB/iter",
                "host malloc MB/iter",
                "host other MB/iter",
                "host RSS MB/iter (shown only)",
            ),
            rows,
        )
    )
    print()
    rates = []
    for key, figures in sorted(seen.items()):
        for name, true in TRUE_RATES.items():
            if key.endswith("::" + name):
                got = [g for g in figures["growth"] if g is not None]
                worst = max(abs(g - true) / true for g in got)
                rates.append(
                    (key, f"{true / MB:.1f}", f"{min(got) / MB:.2f}-{max(got) / MB:.2f}", f"{100 * worst:.2f}%")
                )
    print(table(("planted leak", "true MB/iter", "reported MB/iter", "worst error"), rates))
    print()
    print(f"false failures (clean tests that did not pass): {false_failures}")
    for figure, spreads in moved.items():
        n = sum(1 for d in spreads if d)
        print(
            f"{figure}: {n} of {len(spreads)} clean tests' figures moved between runs; largest spread {max(spreads, default=0) / 1e3:.1f} kB"
        )
    print()
    print("the suite ledger (residue: bytes of the arrays a test made alive after its teardown; named at 10 MB):")
    moving = {k: v for k, v in residues.items() if len(set(v)) > 1}
    print(f"  residues that moved between runs: {len(moving)} of {len(residues)} tests")
    for key, values in sorted(moving.items()):
        print(f"    {key}: {min(values)} to {max(values)} bytes")
    for suite, runs in named.items():
        kinds = sorted(set(runs))
        said = "; ".join(f"{', '.join(k) or 'none'} (x{runs.count(k)})" for k in kinds)
        print(f"  {suite}: {'the same tests named on every run' if len(kinds) == 1 else 'NAMED TESTS DIFFER'}: {said}")
    for suite, w in walls.items():
        print(f"{suite}: {len(w)} runs, wall {min(w):.1f}-{max(w):.1f} s")


if __name__ == "__main__":
    main()
