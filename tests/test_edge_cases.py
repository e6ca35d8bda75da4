"""Edge cases found in review: decorated tests, failures and their locals, skips, xfail, unittest,
fixtures that run out of memory, a backend that does not start, colliding user properties."""

import pytest


def test_decorated_test_is_judged_on_its_own_locals(pytester):
    pytester.makepyfile(
        """
        import functools, jax.numpy as jnp, pytest

        def traced(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        @pytest.mark.max_hbm("30MB")
        @traced
        def test_decorated():
            x = jnp.ones((10_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB*judged by body-end*"])


def test_a_failing_budgeted_test_keeps_its_locals_for_showlocals(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1GB")
        def test_fails():
            marker_local = 12345
            assert marker_local == 0
        """
    )
    result = pytester.runpytest("--tpumem", "--showlocals")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["marker_local = 12345"])


def test_text_that_mentions_resource_exhausted_is_not_an_oom(pytester):
    pytester.makepyfile(
        """
        def test_status():
            status = "RESOURCE_EXHAUSTED"
            assert status == "UNAVAILABLE"
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(failed=1)
    assert "out of device memory" not in result.stdout.str()
    result.stdout.fnmatch_lines(["E *AssertionError*"])


def test_arrays_of_an_earlier_failure_and_of_an_oom_are_not_blamed_on_the_next_test(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        def test_fails_holding_40mb():
            big = jnp.ones((10_000_000,), jnp.float32)
            assert big.sum() == 0

        def test_oom_holding_40mb():
            big = jnp.ones((10_000_000,), jnp.float32)
            huge = jnp.ones((10**12,), jnp.float32)

        @pytest.mark.max_hbm("30MB")
        def test_small_after():
            x = jnp.ones((2_500_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(["*test_small_after*"])


def test_oom_in_a_fixture_is_reported_and_freed(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.fixture
        def too_big():
            held = jnp.ones((10_000_000,), jnp.float32)
            return jnp.ones((10**12,), jnp.float32)

        def test_uses_it(too_big):
            pass

        @pytest.mark.max_hbm("30MB")
        def test_after():
            x = jnp.ones((2_500_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(["out of device memory while setting up this test (budget n/a): RESOURCE_EXHAUSTED*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_skip_and_expected_oom(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1MB")
        def test_skips_inside():
            x = jnp.ones((10_000_000,), jnp.float32)
            pytest.skip("not today")

        @pytest.mark.max_hbm("1GB")
        @pytest.mark.xfail(raises=jax.errors.JaxRuntimeError, reason="known OOM")
        def test_known_oom():
            jnp.ones((10**12,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(skipped=1, xfailed=1)
    assert "test_skips_inside" not in result.stdout.str().split("= tpumem =")[-1]


def test_a_skipped_unittest_method_gets_no_row(pytester):
    pytester.makepyfile(
        """
        import unittest

        class T(unittest.TestCase):
            def test_skipped(self):
                self.skipTest("not here")

            def test_runs(self):
                pass
        """
    )
    result = pytester.runpytest("--tpumem", "--tpumem-max-hbm=1GB")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["1 measured, 0 failed a memory check*"])
    assert "test_skipped" not in result.stdout.str().split("= tpumem =")[-1]


def test_leak_marker_on_a_doctest_says_what_to_do(pytester):
    pytester.makeconftest(
        """
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.leak_check)
        """
    )
    pytester.makepyfile(
        """
        def f():
            '''
            >>> 1 + 1
            2
            '''
        """
    )
    result = pytester.runpytest("--tpumem", "--doctest-modules")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot re-run *f: only test functions and unittest.TestCase methods*"])


def test_backend_that_does_not_start_is_not_an_internal_error(pytester, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "no_such_platform")
    pytester.makepyfile(
        """
        import pytest

        def test_plain():
            pass

        @pytest.mark.max_hbm("1GB")
        def test_measured():
            pass
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=1)  # the unmeasured test runs as it would without the plugin
    result.stdout.fnmatch_lines(
        ["tpumem cannot measure test_measured: the jax backend did not start: *no_such_platform*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_user_property_named_tpumem_does_not_break_the_summary(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1GB")
        def test_it(record_property):
            record_property("tpumem", "enabled in CI")
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["1 measured, 0 failed a memory check*"])


@pytest.mark.parametrize("value", ["inf", "nan", "1e308"])
def test_sample_interval_must_be_finite(pytester, value):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(f"--tpumem-sample-ms={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: pytest-tpumem: --tpumem-sample-ms: '{value}' is not a number from 0 to 60000"]
    )
