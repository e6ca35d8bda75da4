"""Planted leaks must fail, naming device and growth; their clean twins must pass, 10 runs of 10."""

import pytest

LEAKS = {
    "test_module_list_keeps_arrays": "cpu:0 live arrays grew 16.0MB/iteration",
    "test_lru_cache_keeps_every_result": "cpu:0 live arrays grew 16.0MB/iteration",
    "test_host_list_of_numpy_copies": "host RSS grew 1?.?MB/iteration",
    "test_jit_recreated_with_new_closure": "cpu:0 live arrays grew *MB/iteration",
    "test_fixture_metrics_dict_keeps_arrays": "cpu:0 live arrays grew 16.0MB/iteration",
}


@pytest.fixture
def planted(pytester):
    pytester.copy_example("planted")
    return pytester


def test_every_planted_leak_fails_with_device_and_growth(planted):
    result = planted.runpytest("--tpumem", "test_leaky.py")
    result.assert_outcomes(failed=len(LEAKS))
    for name, growth in LEAKS.items():
        result.stdout.fnmatch_lines([f"*_ {name} _*", f"leak_check: {growth} over 3 iterations (threshold 10.0MB/iteration)"])
    result.stdout.fnmatch_lines(["*= tpumem =*", "verdict*growth/iter*", "leak *test_leaky.py::*"])


def test_planted_leaks_fail_without_the_flag_only_where_the_fixture_asks(planted):
    """Without --tpumem the markers are inert; the fixture is an explicit request and still checks."""
    result = planted.runpytest("test_leaky.py")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*_ test_fixture_metrics_dict_keeps_arrays _*", "leak_check: cpu:0 live arrays grew 16.0MB*"])
    assert "= tpumem =" not in result.stdout.str()


def test_clean_twins_pass_ten_runs_out_of_ten(planted):
    """Ten copies of the clean suite (each its own module: its own arrays, fixtures and programs) in
    one run over two pytest-xdist workers: a false leak in any copy fails this test."""
    pytest.importorskip("xdist")
    source = (planted.path / "test_clean.py").read_text()
    planted.makepyfile(**{f"test_clean_run{run}": source for run in range(10)})
    result = planted.runpytest_subprocess("--tpumem", "-q", "-p", "xdist", "-n", "2", *[f"test_clean_run{run}.py" for run in range(10)])
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=60)


def test_fixture_returns_the_report_and_uses_the_session_threshold(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp

        def test_it(leak_check):
            report = leak_check(lambda x: (x * 2).sum(), jnp.ones(1000), iterations=2, warmup=0)
            assert report.iterations == 2 and report.warmup == 0
            assert report.threshold == 123_000_000
            assert report.verdict == "ok" and not report.leaked
            assert all(len(s.values) == 3 for s in report.series)
            assert {s.device for s in report.series} >= {"cpu:0", "cpu:1"}
        """
    )
    pytester.makeini("[pytest]\ntpumem_leak_threshold = 123MB\n")
    pytester.runpytest().assert_outcomes(passed=1)


def test_marker_reruns_the_body_with_fixtures_set_up_once(pytester):
    pytester.makepyfile(
        """
        import pytest
        calls = {"fixture": 0, "body": 0}

        @pytest.fixture
        def thing():
            calls["fixture"] += 1
            return 1

        @pytest.mark.leak_check(iterations=4, warmup=2)
        def test_counted(thing):
            calls["body"] += 1

        def test_after():
            assert calls == {"fixture": 1, "body": 6}
        """
    )
    pytester.runpytest("--tpumem").assert_outcomes(passed=2)


def test_cli_threshold_is_used_by_the_marker(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest
        kept = []

        @pytest.mark.leak_check
        def test_small_leak():
            kept.append(jnp.ones((500_000,), jnp.float32))  # 2 MB an iteration
        """
    )
    pytester.runpytest("--tpumem").assert_outcomes(passed=1)  # under the default 100MB
    result = pytester.runpytest("--tpumem", "--tpumem-leak-threshold=1MB")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["leak_check: cpu:0 live arrays grew 2.0MB/iteration*(threshold 1.0MB/iteration)"])


def test_fixtures_and_arguments_named_like_options_reach_the_test(pytester):
    pytester.makepyfile(
        """
        import jax, pytest

        @pytest.fixture
        def devices():
            return jax.local_devices()

        @pytest.fixture
        def clear_caches():
            return "the test's own"

        @pytest.mark.leak_check(iterations=2)
        def test_marker(devices, clear_caches):
            assert clear_caches == "the test's own" and len(devices) == 2

        def test_fixture(leak_check):
            def fn(raise_on_leak, devices):
                assert raise_on_leak == "mine" and devices == 3

            leak_check(fn, "mine", devices=3, iterations=1)
        """
    )
    pytester.runpytest("--tpumem").assert_outcomes(passed=2)
