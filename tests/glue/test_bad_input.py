"""Bad marker arguments fail that one test with one line; bad options are usage errors."""

import pytest


@pytest.mark.parametrize(
    "marker, expected",
    [
        ('max_hbm("twenty")', "@pytest.mark.max_hbm('twenty'): limit: 'twenty' is not a size; expected an int of bytes*"),
        ("max_hbm(-1)", "@pytest.mark.max_hbm(-1): limit: -1 must be more than 0 bytes*"),
        ("max_hbm()", '@pytest.mark.max_hbm(): give a limit ("16GB") or a TPU target (target="v5e", or --tpumem-target)'),
        ('max_hbm(target="v9")', "@pytest.mark.max_hbm(target='v9'): target: 'v9' is not a TPU target; use one of v2, v3, v4, v5e, v5p, v6e, tpu7x*"),
        ('max_hbm("1GB", target=5)', "@pytest.mark.max_hbm('1GB', target=5): target: 5 is not a TPU target*"),
        ('max_hbm("1GB", tagret="v5e")', "@pytest.mark.max_hbm('1GB', tagret='v5e'): max_hbm() got an unexpected keyword argument 'tagret'; accepted: max_hbm(limit=None, *, target=None)"),
        ('max_hbm("20 Gb")', "@pytest.mark.max_hbm('20 Gb'): limit: unknown unit 'Gb' in '20 Gb'; units are case-sensitive: B, kB, KB, MB, GB*"),
        ('max_hbm("1GB", "2GB")', "@pytest.mark.max_hbm('1GB', '2GB'): max_hbm() takes from 0 to 1 positional arguments but 2 were given*"),
        ("leak_check(iterations=0)", "@pytest.mark.leak_check(iterations=0): iterations=0: expected an int >= 1"),
        ("leak_check(3)", "@pytest.mark.leak_check(3): enabled=3: expected True or False"),
        ("leak_check(True, 3)", "@pytest.mark.leak_check(True, 3): leak_check() takes from 0 to 1 positional arguments but 2 were given*"),
        ("leak_check(iteration=3)", "@pytest.mark.leak_check(iteration=3): leak_check() got an unexpected keyword argument 'iteration'; accepted: leak_check(*, iterations=3, warmup=1, threshold=None, clear_caches=True, host=None)"),
        ('leak_check(clear_caches="no")', "@pytest.mark.leak_check(clear_caches='no'): clear_caches='no': expected True or False"),
        ('leak_check(threshold="lots")', "@pytest.mark.leak_check(threshold='lots'): threshold: 'lots' is not a size*"),
    ],
)
def test_bad_marker_fails_that_one_test(pytester, marker, expected):
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_bad():
            pass

        def test_good():
            pass
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*_ test_bad _*", expected])
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out and "During handling" not in out


@pytest.mark.parametrize(
    "args, ini, expected",
    [
        (["--tpumem-max-hbm=twenty"], "", "ERROR: pytest-tpumem: --tpumem-max-hbm: 'twenty' is not a size*"),
        ([], "tpumem_leak_threshold = 20 Gb", "ERROR: pytest-tpumem: ini tpumem_leak_threshold: unknown unit 'Gb' in '20 Gb'*"),
        ([], "tpumem = maybe", "ERROR: pytest-tpumem: ini tpumem: *'maybe'*"),
        (["--tpumem-top=-1"], "", "ERROR: pytest-tpumem: --tpumem-top: '-1' is not a whole number >= 0"),
        (["--tpumem-sample-ms=fast"], "", "ERROR: pytest-tpumem: --tpumem-sample-ms: 'fast' is not a number from 0 to 60000"),
        ([], "tpumem_max_hbm = 0", "ERROR: pytest-tpumem: ini tpumem_max_hbm: '0' must be more than 0 bytes*"),
    ],
)
def test_bad_option_is_a_usage_error(pytester, args, ini, expected):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_bad_fixture_arguments_fail_that_one_test(pytester):
    pytester.makepyfile(
        """
        def test_zero(leak_check):
            leak_check(lambda: None, iterations=0)

        def test_threshold(leak_check):
            leak_check(lambda: None, threshold="20 Gb")

        def test_clear_caches(leak_check):
            leak_check(lambda: None, clear_caches="yes")

        def test_fine(leak_check):
            leak_check(lambda: None, iterations=1, warmup=0)
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_zero _*",
            "leak_check(...): iterations=0: expected an int >= 1",
            "*_ test_threshold _*",
            "leak_check(...): threshold: unknown unit 'Gb' in '20 Gb'*",
            "*_ test_clear_caches _*",
            "leak_check(...): clear_caches='yes': expected True or False",
        ]
    )


def test_options_that_need_the_plugin_warn_when_it_is_off(pytester):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--tpumem-max-hbm=1GB", "--tpumem-top=3")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*PytestConfigWarning: pytest-tpumem is off, so --tpumem-max-hbm, --tpumem-top (or its ini twin) has no effect*"]
    )
    quiet = pytester.runpytest("--tpumem-leak-threshold=1MB")  # used by the fixture even when off
    quiet.assert_outcomes(passed=1)


def test_leak_marker_on_an_async_test_says_what_to_do(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.leak_check
        async def test_async():
            pass
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["@pytest.mark.leak_check cannot re-run the async test test_async; call the leak_check fixture*"])


@pytest.mark.skipif(pytest.version_tuple < (9,), reason="pytest 9 reads a native [tool.pytest] TOML table")
def test_native_toml_table_takes_typed_values(pytester):
    pytester.makepyprojecttoml('[tool.pytest]\ntpumem = true\ntpumem_top = 1\ntpumem_max_hbm = "1GB"\n')
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tpumem: default budget 1.0GB*", "1 measured, 0 failed a memory check*"])
    pytester.makepyprojecttoml("[tool.pytest]\ntpumem = true\ntpumem_max_hbm = 1000\n")
    bad = pytester.runpytest()
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: pytest-tpumem: ini tpumem_max_hbm: *expects a string*(write sizes as strings, e.g. \"16GB\")"])
