"""Same code, same verdict: every figure a gate compares comes from deterministic readings.

Each case here was found on a loaded 2-core runner, where the same clean code got different verdicts
and figures from run to run (issue 15). Each is planted, with its twin where it has one, and run
several times in one test where the point is that the figure does not move.
"""

import json

import jax
import jax.numpy as jnp
import pytest

from pytest_tpumem import check_leaks, message
from pytest_tpumem.readings import host
from pytest_tpumem.readings.devices import live_bytes_by_device
from pytest_tpumem.readings.inflight import wait_idle

MB = 10**6

# The peaks the sampler used to decide: each test is repeated 5 times in one run, the sampler
# looking every millisecond. Every copy must get the same figure, never below what was certainly
# alive at once.
PEAKS = """
import jax, jax.numpy as jnp, numpy as np, pytest

COPIES = pytest.mark.parametrize("copy", range(5))

@jax.jit
def double(x):
    return x * 2

def layer_norm_bf16(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

@COPIES
@pytest.mark.max_hbm("7MB")
def test_input_made_in_the_test_over(copy):
    x = jnp.ones((1_000_000,))           # 4 MB made here, and double's 4 MB output beside it
    double(x).block_until_ready()

@COPIES
@pytest.mark.max_hbm("8MB")
def test_input_made_in_the_test_at_its_budget(copy):
    x = jnp.ones((1_000_000,))
    double(x).block_until_ready()

@COPIES
@pytest.mark.max_hbm("1GB")
def test_bf16_layer_norm(copy):
    x = jnp.ones((4096, 2048), jnp.bfloat16)   # 16.8 MB, and its 16.8 MB output
    jax.jit(layer_norm_bf16)(x).block_until_ready()

@COPIES
@pytest.mark.max_hbm("1GB")
def test_loop_replaces_its_state(copy):
    f = jax.jit(lambda a: a * 2)
    x = jnp.ones((4096, 2048), jnp.bfloat16)
    for _ in range(5):
        x = f(x)                              # the old x and the new one: 33.6 MB at once
    x.block_until_ready()

@COPIES
@pytest.mark.max_hbm("1GB")
def test_numpy_to_device_and_dropped(copy):
    jax.device_put(np.ones((2_000_000,), np.float32)).block_until_ready()   # 8 MB, never bound to a name
"""

EXACT = {
    "test_input_made_in_the_test_over": ("over budget", 8_000_000),
    "test_input_made_in_the_test_at_its_budget": ("ok", 8_000_000),
    "test_bf16_layer_norm": ("ok", 2 * 4096 * 2048 * 2),
    "test_loop_replaces_its_state": ("ok", 2 * 4096 * 2048 * 2),
    "test_numpy_to_device_and_dropped": ("ok", 8_000_000),
}


def test_peaks_are_the_same_in_every_run_and_count_what_was_alive(pytester):
    pytester.makepyfile(test_peaks=PEAKS)
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:cacheprovider", "--tpumem-sample-ms=1", "--tpumem-json=r.json"
    )
    result.assert_outcomes(passed=20, failed=5)
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    for name, (verdict, peak) in EXACT.items():
        got = {
            (tests[f"test_peaks.py::{name}[{copy}]"]["verdict"], tests[f"test_peaks.py::{name}[{copy}]"]["peak"])
            for copy in range(5)
        }
        assert got == {(verdict, peak)}, name
    result.stdout.fnmatch_lines(
        ["max_hbm: peak 8.0MB on cpu:0 is over the budget of 7.0MB (max_hbm('7MB')), judged by program jit(double); *"]
    )


def test_unchanged_reruns_do_not_regress_against_their_baseline(pytester):
    pytester.makepyfile(test_peaks=PEAKS)
    args = ["--tpumem", "-p", "no:cacheprovider", "--tpumem-sample-ms=1", "-k", "not over"]
    pytester.runpytest_subprocess(*args, "--tpumem-save=base.json").assert_outcomes(passed=20)
    # one rerun here; many, under load, are benchmarks/bench_steady.py's
    again = pytester.runpytest_subprocess(*args, "--tpumem-compare=base.json", "--tpumem-compare-fail=peak:1%")
    again.assert_outcomes(passed=20)
    again.stdout.fnmatch_lines(["0 figures changed against base.json"])


AFTER_FAILURE = """
import pytest, jax.numpy as jnp

def test_fails_holding_array():            # an ordinary failing test, no tpumem marker
    big = jnp.ones((3_000_000,))           # 12 MB, in the frame its traceback keeps
    assert float(big.sum()) < 0

@pytest.mark.max_hbm("6MB")
def test_next():                           # 4 MB
    jnp.ones((1_000_000,)).block_until_ready()
"""


@pytest.mark.parametrize("expected", [False, True], ids=["failed", "xfailed"])
def test_a_failed_test_does_not_charge_the_next_one(pytester, expected):
    source = (
        AFTER_FAILURE.replace("def test_fails_holding_array", "@pytest.mark.xfail\ndef test_fails_holding_array")
        if expected
        else AFTER_FAILURE
    )
    pytester.makepyfile(test_after=source)
    after = pytester.runpytest_subprocess("--tpumem", "-p", "no:cacheprovider", "--tpumem-json=after.json")
    after.assert_outcomes(passed=1, **({"xfailed": 1} if expected else {"failed": 1}))
    alone = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:cacheprovider", "--tpumem-json=alone.json", "-k", "test_next"
    )
    alone.assert_outcomes(passed=1)
    figures = [
        json.loads((pytester.path / f).read_text())["tests"]["test_after.py::test_next"]
        for f in ("after.json", "alone.json")
    ]
    assert [(f["peak"], f["checks"][0]["devices"]["cpu:0"]["start"]) for f in figures] == [(4_000_000, 0)] * 2


SWEPT_BUDGETS = """
import jax, jax.numpy as jnp, pytest

def mlp(x, w):
    for _ in range(3):
        x = jax.nn.relu(x @ w)             # bf16 activations, computed through float32 temporaries on CPU
    return x

@pytest.mark.max_hbm("20MB")   # x and w: 10.5 MB; with mlp's output and temporaries 52.4 MB (jax 0.10), 27.3 MB (0.12)
def test_over_by_its_programs_temporaries():
    x = jnp.ones((4096, 1024), jnp.bfloat16)
    w = jnp.ones((1024, 1024), jnp.bfloat16) * 0.001
    jax.jit(mlp)(x, w).block_until_ready()

@pytest.mark.max_hbm("500MB")
def test_within():
    x = jnp.ones((4096, 1024), jnp.bfloat16)
    w = jnp.ones((1024, 1024), jnp.bfloat16) * 0.001
    jax.jit(mlp)(x, w).block_until_ready()
"""


def test_a_budget_gets_the_same_verdict_and_figure_under_the_sweep(pytester):
    pytester.makepyfile(test_swept=SWEPT_BUDGETS)
    rows = {}
    for name, extra in (("plain", []), ("swept", ["--tpumem-leak-check=all"])):
        result = pytester.runpytest_subprocess(
            "--tpumem", "-p", "no:cacheprovider", f"--tpumem-json={name}.json", *extra
        )
        result.assert_outcomes(passed=1, failed=1)
        tests = json.loads((pytester.path / f"{name}.json").read_text())["tests"]
        rows[name] = {t: (e["peak"], e["witness"].split(";")[0]) for t, e in tests.items()}
    assert rows["plain"] == rows["swept"]
    peak, witness = rows["plain"]["test_swept.py::test_over_by_its_programs_temporaries"]
    assert peak > 20 * MB and witness == "program"


def test_each_device_buffer_is_counted_once():
    """jaxlib <= 0.11 makes a second jax.Array on the buffer of an array a jit closes over."""
    table = jnp.full((4_000_000,), 0.5, jnp.float32)  # 16 MB
    before = live_bytes_by_device().get("cpu:0", 0)
    step = jax.jit(lambda v: v + table[:3])  # noqa: F821 (table is deleted below: only the program holds it)
    step(jnp.ones(3)).block_until_ready()
    assert live_bytes_by_device().get("cpu:0", 0) - before < 100  # its 12-byte result, not another 16 MB
    del step, table


def test_a_program_left_running_is_waited_for():
    """A body can return while a program it dispatched still runs and holds a buffer it dropped:
    host memory read then counts the buffer, read once the runtime's threads are idle does not."""
    slow = jax.jit(lambda big, x: jax.lax.fori_loop(0, 40, lambda i, a: jnp.tanh(a @ a), x)[0, 0] + big[-1])
    x = jnp.ones((600, 600)) * 0.01
    slow(jnp.ones(10), x).block_until_ready()
    host.trim_host()
    base = host.host_rss()
    big = jnp.ones((25_000_000,))  # 100 MB, held by the program until it ends
    big.block_until_ready()
    slow(big, x)
    del big
    assert wait_idle() is True
    host.trim_host()
    assert host.host_rss() - base < 20 * MB


def test_work_left_in_flight_is_not_a_host_leak():
    """Clean twin of the bundled decode example's false host leak: each run returns while a program
    it dispatched still runs and holds buffers it dropped, one 40 MB buffer more each run. The
    verdict, and the growth each judged host series is given, stay under 5 MB an iteration.
    Asserted as the rule reads them (decisions.leak.Series.growth: a lower median, no more than the
    mean), not delta by delta: on a loaded runner one iteration's host other rose by 91 MB and
    stayed there for the rest, and host RSS, shown only, moves with freed memory malloc keeps.
    That a reading waits for the program to end is pinned by test_a_program_left_running_is_waited_for."""
    slow = jax.jit(
        lambda bigs, x: jax.lax.fori_loop(0, 60, lambda i, a: jnp.tanh(a @ a), x)[0, 0] + sum(b[-1] for b in bigs)
    )
    x = jnp.ones((700, 700)) * 0.01
    runs = []

    def body():
        runs.append(1)
        slow([jnp.ones((10_000_000,)) for _ in range(len(runs))], x)  # 40 MB each, dropped at once

    report = check_leaks(body, iterations=3, threshold="10MB")
    judged = [s for s in report.series if s.device == "host" and not s.shown_only]
    assert judged and not report.leaking, message(report)
    assert all(s.growth < 5 * MB for s in judged), [(s.name, s.deltas) for s in judged]


ONLY_THE_SAMPLER = """
import time, jax, jax.numpy as jnp, pytest

@pytest.mark.max_hbm("10MB")
def test_compiled_ahead_of_time():
    x = jnp.ones((1_000_000,))                              # 4 MB
    twice = jax.jit(lambda v: v * 2).lower(x).compile()
    a = twice(x)      # its first call runs from Python: read (x and a: 8 MB)
    b = twice(x)      # later calls take the compiled object's own C++ path, which tpumem does not watch
    time.sleep(0.2)   # x, a and b: 12 MB, seen by the sampler alone
    del a, b
"""


def test_what_only_the_sampler_saw_is_a_warning_not_a_verdict(pytester):
    pytester.makepyfile(test_aot=ONLY_THE_SAMPLER)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:cacheprovider", "--tpumem-sample-ms=1", "-rA")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*: only the sampler saw 12.0MB on cpu:0, over the budget of 10.0MB (max_hbm('10MB')); the test is judged by "
            "its deterministic peak, 8.0MB by program jit(<lambda>).*",
            "cpu:0: start 0B, peak 8.0MB by program jit(<lambda>) [[]*[]]; the sampler saw 12.0MB, 4.0MB more than any "
            "deterministic reading explains (timing-dependent, not judged)",
        ]
    )
