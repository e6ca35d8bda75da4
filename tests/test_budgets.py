"""max_hbm on the real CPU backend: both sides of a known size, absolute peaks, every device, OOM."""

import pytest

SIZES = """
import jax, jax.numpy as jnp, pytest

MB40 = 10_000_000  # float32 elements: 40 MB

@pytest.fixture(scope="module")
def held():
    return jnp.ones((MB40,), jnp.float32)  # held before the test starts

@pytest.mark.max_hbm("60MB")
def test_local_under():
    x = jnp.ones((MB40,), jnp.float32)
    assert x.shape == (MB40,)

@pytest.mark.max_hbm("30MB")
def test_local_over():
    x = jnp.ones((MB40,), jnp.float32)
    assert x.shape == (MB40,)

@pytest.mark.max_hbm("30MB")
def test_second_device_over():
    with jax.default_device(jax.local_devices()[1]):
        x = jnp.ones((MB40,), jnp.float32)
    assert x.devices() == {jax.local_devices()[1]}

@pytest.mark.max_hbm("1.5GiB")
def test_loop_under():
    state = jnp.zeros((MB40,), jnp.float32)
    step = jax.jit(lambda s: s * 0.9 + 1.0)
    for _ in range(20):
        state = step(state)
    state.block_until_ready()

@pytest.mark.max_hbm(45_000_000)
def test_held_before_counts(held):
    y = jnp.ones((2_500_000,), jnp.float32)  # 10 MB on top of the 40 MB held: 50 MB absolute
    assert y.size
"""


def test_budgets_on_both_sides_of_a_known_size(pytester):
    pytester.makepyfile(test_sizes=SIZES)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_local_over _*",
            "max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB (max_hbm('30MB')), judged by body-end; live arrays stand in*",
            "*_ test_second_device_over _*",
            "max_hbm: peak 40.0MB on cpu:1 is over the budget of 30.0MB (max_hbm('30MB')), judged by body-end; *",
            "*_ test_held_before_counts _*",
            "max_hbm: peak 50.0MB on cpu:0 is over the budget of 45.0MB (max_hbm(45000000)), judged by body-end; *",
        ]
    )
    result.stdout.fnmatch_lines(["*= tpumem =*", "over budget  cpu:0 50.0MB *45.0MB*test_held_before_counts"])


def test_default_budget_and_marker_wins(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        def test_default_applies():
            x = jnp.ones((10_000_000,), jnp.float32)

        @pytest.mark.max_hbm("100MB")
        def test_marker_wins():
            x = jnp.ones((10_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-max-hbm=30MB")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB (--tpumem-max-hbm / ini tpumem_max_hbm)*"]
    )
    pytester.makeini("[pytest]\ntpumem = true\ntpumem_max_hbm = 30MB\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1, failed=1)


def test_out_of_memory_is_reported_and_the_next_tests_run(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        def test_asks_for_4tb():
            big = jnp.ones((10**12,), jnp.float32)

        def test_unmeasured_oom():
            big = jnp.ones((10**12,), jnp.float32)

        @pytest.mark.max_hbm("60MB")
        def test_after():
            x = jnp.ones((10_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_asks_for_4tb _*",
            "out of device memory in this test (budget 1.0GB): RESOURCE_EXHAUSTED*",
            "*_ test_unmeasured_oom _*",
            "out of device memory in this test (budget n/a): RESOURCE_EXHAUSTED*",
            "*= tpumem =*",
            "oom *test_asks_for_4tb",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()


def test_leak_marker_and_budget_together(pytester):
    """The budget judges the first run (the test as it runs without a leak check); the check, the growth."""
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest
        kept = []

        @pytest.mark.max_hbm("1GB")
        @pytest.mark.leak_check(iterations=2, threshold="1MB")
        def test_both():
            kept.append(jnp.ones((1_000_000,), jnp.float32))
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "leak_check: cpu:0 live arrays grew 4.0MB/iteration*",
            "*= tpumem =*",
            "leak *cpu:0 4.0MB*1.0GB*4.0MB*test_both",
        ]
    )


def test_a_test_that_fails_on_its_own_keeps_its_error_and_gets_the_budget_in_its_section(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("10MB")
        def test_wrong_and_big():
            x = jnp.ones((10_000_000,), jnp.float32)
            assert x.sum() == 0, "the test's own assertion"
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: the test's own assertion",
            "*Captured tpumem call*",
            "max_hbm: peak 40.0MB on cpu:0 is over the budget of 10.0MB (max_hbm('10MB')), judged by body-end; *",
            "*= tpumem =*",
            "over budget *test_wrong_and_big",
        ]
    )
    assert "During handling" not in result.stdout.str()


ORDER = """
import jax, jax.numpy as jnp, pytest

A = jnp.ones((2000, 8), jnp.float32)  # 64 kB each, made at import
B = jnp.ones((8, 2000), jnp.float32)

@jax.jit
def step(a, b):
    return jnp.cumsum(a @ b, axis=0)[-1].sum()  # 32 MB of temporaries (the product, its sums); a 4-byte result

def test_1_warms_up():
    step(A, B).block_until_ready()

@pytest.mark.max_hbm("12MB")
def test_2_budgeted():
    step(A, B).block_until_ready()

def test_3_default_budget():
    step(A, B).block_until_ready()
"""


def _row(result, name):
    """The summary row of test ``name``: its verdict and peak cells."""
    summary = result.stdout.str().split("= tpumem =")[1]
    (line,) = [line for line in summary.splitlines() if line.rstrip().endswith("::" + name)]
    return line.split()[:4]


@pytest.mark.parametrize("recompile", ["marked", "all", "none"])
def test_a_budgeted_test_gets_the_same_verdict_alone_and_after_a_warm_up(pytester, recompile):
    """Every program a test runs counts, whether an earlier test compiled it or the test starts
    with jax's caches cleared (--tpumem-recompile): the verdict and the peak do not depend on what
    ran before, nor on the setting."""
    pytester.makepyfile(test_order=ORDER)
    args = ["--tpumem", "-p", "no:cacheprovider", "--tpumem-max-hbm=1GB", f"--tpumem-recompile={recompile}"]
    after = pytester.runpytest_subprocess(*args)
    alone = {
        name: pytester.runpytest_subprocess(*args, "-k", name) for name in ("test_2_budgeted", "test_3_default_budget")
    }
    for name, run in alone.items():
        assert _row(run, name) == _row(after, name), f"{name} alone vs after the warm-up ({recompile})"
    budgeted = _row(after, "test_2_budgeted")
    assert budgeted[:4] == ["over", "budget", "cpu:0", "32.1MB"], budgeted  # 64 kB + 64 kB + 32 MB of temporaries
    after.stdout.fnmatch_lines(
        ["max_hbm: peak 32.1MB on cpu:0 is over the budget of 12.0MB (max_hbm('12MB')), judged by program jit(step); *"]
    )
    assert _row(after, "test_3_default_budget")[:3] == ["ok", "cpu:0", "32.1MB"]


def test_a_marker_a_fixture_adds_is_planned(pytester):
    """The plan is made once the fixtures are set up: ``request.applymarker`` in a fixture counts."""
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.fixture
        def model(request):
            request.applymarker(pytest.mark.max_hbm("30MB"))
            return jnp.ones((10_000_000,), jnp.float32)  # 40 MB

        def test_uses_model(model):
            assert model.shape
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB (max_hbm('30MB'))*"])


def _section(out, name):
    """The report section of test ``name`` in -rA output: from its header line to the next one."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip("_ ") == name and line.startswith("_"))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("____") or lines[i].startswith("====")),
        len(lines),
    )
    return "\n".join(lines[start:end])


def test_a_leak_checked_budget_is_the_peak_of_its_first_run(pytester):
    """Under a leak check the peak is measured on the first run, as the test would run without one:
    its programs count whether the check clears jax's caches between runs or keeps them."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        double = jax.jit(lambda x: x * 2)

        @pytest.mark.max_hbm("6MB")
        @pytest.mark.leak_check(iterations=1)
        def test_cleared_after_every_run():
            x = jnp.ones((1_000_000,))  # 4 MB, and double's 4 MB output beside it
            double(x).block_until_ready()

        @pytest.mark.max_hbm("6MB")
        @pytest.mark.leak_check(iterations=1, clear_caches=False)
        def test_kept():
            x = jnp.ones((1_000_000,))
            double(x).block_until_ready()

        @pytest.mark.max_hbm("6MB")
        def test_no_leak_check():
            x = jnp.ones((1_000_000,))
            double(x).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-rA")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    for name in ("test_cleared_after_every_run", "test_kept", "test_no_leak_check"):
        section = _section(out, name)
        assert (
            "max_hbm: peak 8.0MB on cpu:0 is over the budget of 6.0MB (max_hbm('6MB')), judged by program jit(<lambda>)"
            in section
        ), section
        assert "ran jit(<lambda>) on cpu:0: needs 8.0MB (arguments 4.0MB, outputs 4.0MB, temps 0B)" in section, section
        assert "not read" not in section


GROUP_NORM = """
import jax, jax.numpy as jnp, pytest


def group_norm_f32(x):
    xf = x.astype(jnp.float32)  # the silent upcast: a float32 copy of the whole activation
    mean = xf.mean(axis=(1, 2), keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    return ((xf - mean) / jnp.sqrt(var + 1e-5)).astype(x.dtype)


def group_norm_bf16(x):
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5)


@pytest.mark.max_hbm("40MB")
def test_group_norm_upcast():
    x = jnp.ones((8, 64, 128, 128), jnp.bfloat16)  # 16.8 MB in bf16, 33.6 MB in f32
    jax.jit(group_norm_f32)(x).block_until_ready()


@pytest.mark.max_hbm("40MB")
def test_group_norm_in_bf16():
    x = jnp.ones((8, 64, 128, 128), jnp.bfloat16)
    jax.jit(group_norm_bf16)(x).block_until_ready()
"""


def test_a_budget_failure_names_the_silent_upcast_first(pytester):
    """Planted: a bf16 GroupNorm computed in float32 (x.astype(jnp.float32)). Its failure names the
    astype line first. The twin computes in bf16: on CPU, XLA itself computes bf16 arithmetic in
    float32 (its own conversions, with no jax operation behind them), so the twin needs as much
    here and fails the same budget; no line of its code is named as an upcast, and the failure says
    which part of the figure is the CPU's own float32 and points at a target."""
    path = pytester.makepyfile(test_gn=GROUP_NORM)
    line = next(i + 1 for i, text in enumerate(path.read_text().splitlines()) if "x.astype(jnp.float32)" in text)
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_group_norm_upcast _*",
            "max_hbm: peak 67.1MB on cpu:0 is over the budget of 40.0MB (max_hbm('40MB')), judged by program jit(group_norm_f32);*",
            # 16.8MB in, 16.8MB out and 33.6MB of temporaries (XLA's memory analysis, the same on jax 0.10 and 0.12)
            "  cpu:0: start 0B, peak 67.1MB by program jit(group_norm_f32) [[]start 0B, end 0B, body-end 16.8MB, program 67.1MB[]]",
            "  upcasts in the programs this test ran (narrow floats the code turned wide, and what that costs):",
            # read from the jaxpr: the cast's line, though XLA fused it; its float32 arrays: a 33.6MB copy and the
            # 33.6MB difference made from it
            f"    test_gn.py:{line}: astype casts bf16 to f32[[]8,64,128,128[]]: 67.1MB of f32 arrays on cpu, 33.6MB more than in bf16",
            "  largest arrays the programs this test ran make (per device; XLA may reuse a temporary's memory):",
            "*33.6MB  f32[[]8,64,128,128[]]  temporary from jit(group_norm_f32)/*",
        ]
    )
    twin = result.stdout.str().split("_ test_group_norm_in_bf16 _")[1].split("Captured tpumem call")[0]
    assert "largest arrays the programs this test ran make" in twin
    assert "upcasts in the programs" not in twin
    # ... but the CPU's own float32 temporaries are said, as what this CPU figure overstates of a chip's
    assert "up to 33.6MB of the figure on cpu is float32 temporaries its compiler made" in twin, twin
    assert "a conversion XLA inserted" in twin and 'target="v5e"' in twin, twin


def test_a_budget_is_met_at_equality_and_a_byte_over_reads_apart(pytester):
    """max_hbm("64.1kB") is 64,100 bytes exactly (a float made it 64,099, and a test holding 64,100
    failed with "peak 64.1kB is over the budget of 64.1kB"). Equal passes; 4 bytes over fails with
    the digits that tell the two apart."""
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("64.1kB")
        def test_equal():
            x = jnp.ones((16_025,), jnp.float32)  # 64,100 bytes, alive at the body's end
            x.block_until_ready()

        @pytest.mark.max_hbm("64.1kB")
        def test_one_float_over():
            x = jnp.ones((16_026,), jnp.float32)  # 64,104 bytes
            x.block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly"
    )  # alone: no array another in-process run left
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["max_hbm: peak 64.104kB on cpu:0 is over the budget of 64.100kB (max_hbm('64.1kB')), judged by body-end*"]
    )


def test_an_out_of_memory_in_a_fixture_is_in_the_summary_and_the_report(pytester):
    """Planted: a fixture asks for 4 TB. The test errors at setup, saying so, and is a row of the
    summary and an entry of the JSON report with its verdict; the next test is unaffected."""
    import json

    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.fixture
        def huge():
            x = jnp.ones((10**12,), jnp.float32)
            x.block_until_ready()
            yield x

        @pytest.mark.max_hbm("1GB")
        def test_uses_huge(huge):
            pass

        @pytest.mark.max_hbm("60MB")
        def test_after():
            x = jnp.ones((10_000_000,), jnp.float32)
            x.block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-json", "r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["out of device memory while setting up this test (budget n/a): RESOURCE_EXHAUSTED*", "oom *test_uses_huge"]
    )
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert {k.split("::")[-1]: (e["verdict"], e["outcome"]) for k, e in tests.items()} == {
        "test_uses_huge": ("oom", "failed"),
        "test_after": ("ok", "passed"),
    }


def test_two_budgets_on_one_test_fail_it_and_the_nearest_of_two_levels_wins(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        @pytest.mark.max_hbm("1B")
        def test_two_markers():
            pass

        @pytest.mark.max_hbm("1GB")
        class TestLevels:
            @pytest.mark.max_hbm("60MB")
            def test_nearest_wins(self):
                x = jnp.ones((10_000_000,), jnp.float32)  # 40MB: over 1GB? no; over 60MB? no
                x.block_until_ready()

            @pytest.mark.max_hbm("30MB")
            def test_nearest_fails(self):
                x = jnp.ones((10_000_000,), jnp.float32)
                x.block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly"
    )  # alone: no array another in-process run left
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.max_hbm('1B'), @pytest.mark.max_hbm('1GB'): 2 max_hbm markers on test_two_markers; give one "
            "(the nearest of a function, class or module wins)",
            "max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB (max_hbm('30MB')), judged by body-end*",
        ]
    )


def test_an_xfail_whose_condition_is_false_does_not_expect_the_oom(pytester):
    """xfail(False, ...) expects nothing: the OOM is reported. xfail(raises=pytest.RaisesExc(...))
    that matches expects it (pytest's own matching, no TypeError)."""
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.xfail(False, reason="only on small devices")
        @pytest.mark.max_hbm("1GB")
        def test_condition_false():
            jnp.ones((10**12,), jnp.float32).block_until_ready()

        @pytest.mark.xfail("sys.platform == 'nowhere'", reason="a string condition that is false")
        @pytest.mark.max_hbm("1GB")
        def test_string_condition_false():
            jnp.ones((10**12,), jnp.float32).block_until_ready()

        @pytest.mark.xfail(True, reason="expected")
        @pytest.mark.max_hbm("1GB")
        def test_condition_true():
            jnp.ones((10**12,), jnp.float32).block_until_ready()
        """
        + (
            """
        @pytest.mark.xfail(raises=pytest.RaisesExc(Exception, match="RESOURCE_EXHAUSTED"))
        @pytest.mark.max_hbm("1GB")
        def test_raises_exc():
            jnp.ones((10**12,), jnp.float32).block_until_ready()
        """
            if hasattr(pytest, "RaisesExc")
            else ""
        )
    )
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly")
    xfailed = 2 if hasattr(pytest, "RaisesExc") else 1
    result.assert_outcomes(failed=2, xfailed=xfailed)
    result.stdout.fnmatch_lines(
        ["*_ test_condition_false _*", "out of device memory in this test (budget 1.0GB): RESOURCE_EXHAUSTED*"]
    )
    assert "TypeError" not in result.stdout.str()


def test_an_oom_in_a_leak_checks_later_run_tells_that_run(pytester):
    """round2/oom_in_leak_rerun_figures, in the project's words: a test that keeps 100 MB a run runs
    out of device memory on its leak check's 4th run. The failure, the summary and the JSON report
    give that run's figures (300 MB in use when it ran out), not the first run's 100 MB peak; its
    twin runs out on its first run and keeps the first run's figures."""
    pytester.makepyfile(
        """
        import pytest, jax.numpy as jnp
        HOLD = []

        @pytest.mark.leak_check(iterations=3, threshold="1MB")
        def test_leak_then_oom():
            if len(HOLD) == 3:
                jnp.ones((40_000_000_000,), jnp.float32).block_until_ready()  # 160 GB: the 4th run runs out
            HOLD.append(jnp.ones((25_000_000,), jnp.float32))  # 100 MB kept a run

        @pytest.mark.leak_check(iterations=3, threshold="1MB")
        def test_oom_on_its_first_run():
            jnp.ones((40_000_000_000,), jnp.float32).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-json=r.json", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_leak_then_oom _*",
            "out of device memory in this test, on run 4 of 4 of its leak check (budget n/a): RESOURCE_EXHAUSTED*",
            "  cpu:0: 300.0MB in use when run 4 ran out",
            "  the first run's peak: cpu:0: start 0B, peak 100.0MB*",
            "*_ test_oom_on_its_first_run _*",
            "out of device memory in this test (budget n/a): RESOURCE_EXHAUSTED*",
        ]
    )
    import json

    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    later = tests["test_an_oom_in_a_leak_checks_later_run_tells_that_run.py::test_leak_then_oom"]
    assert later["verdict"] == "oom" and 300_000_000 <= later["peak"] < 300_001_000
    oom = next(c for c in later["checks"] if c["check"] == "oom")
    assert oom["run"] == [4, 4]
    first = tests["test_an_oom_in_a_leak_checks_later_run_tells_that_run.py::test_oom_on_its_first_run"]
    assert first["verdict"] == "oom" and "run" not in next(c for c in first["checks"] if c["check"] == "oom")
