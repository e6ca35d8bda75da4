"""Bad marker arguments fail that one test with one line; bad options are usage errors."""

import pytest


@pytest.mark.parametrize(
    "marker, expected",
    [
        (
            'max_hbm("twenty")',
            "@pytest.mark.max_hbm('twenty'): limit: 'twenty' is not a size; expected an int of bytes*",
        ),
        ("max_hbm(-1)", "@pytest.mark.max_hbm(-1): limit: -1 must be more than 0 bytes*"),
        (
            "max_hbm()",
            '@pytest.mark.max_hbm(): give a limit ("16GB") or a TPU target (target="v5e", or --tpumem-target)',
        ),
        (
            'max_hbm(target="v9")',
            "@pytest.mark.max_hbm(target='v9'): target: 'v9' is not a TPU target; use one of v2, v3, v4, v5e, v5p, v6e, tpu7x*",
        ),
        ('max_hbm("1GB", target=5)', "@pytest.mark.max_hbm('1GB', target=5): target: 5 is not a TPU target*"),
        (
            'max_hbm("1GB", tagret="v5e")',
            "@pytest.mark.max_hbm('1GB', tagret='v5e'): max_hbm() got an unexpected keyword argument 'tagret'; accepted: max_hbm(limit=None, [*], target=None)",  # [*]: a literal star
        ),
        (
            'max_hbm("20 Gb")',
            "@pytest.mark.max_hbm('20 Gb'): limit: unknown unit 'Gb' in '20 Gb': write 20GB (GB is 10^9 bytes) or 20GiB (2^30); XLA's messages (\"19.54G\") count in GiB",
        ),
        (
            'max_hbm("1GB", "2GB")',
            "@pytest.mark.max_hbm('1GB', '2GB'): max_hbm() takes from 0 to 1 positional arguments but 2 were given*",
        ),
        (
            "leak_check(iterations=0)",
            "@pytest.mark.leak_check(iterations=0): iterations=0: expected an int from 1 to 1000",
        ),
        ("leak_check(3)", "@pytest.mark.leak_check(3): enabled=3: expected True or False"),
        (
            "leak_check(True, 3)",
            "@pytest.mark.leak_check(True, 3): leak_check() takes from 0 to 1 positional arguments but 2 were given*",
        ),
        (
            "leak_check(iteration=3)",
            "@pytest.mark.leak_check(iteration=3): leak_check() got an unexpected keyword argument 'iteration'; accepted: leak_check(enabled=True, [*], iterations=3, warmup=1, threshold=None, clear_caches=True, host=None)",  # [*]: a literal star
        ),
        (
            'leak_check(clear_caches="no")',
            "@pytest.mark.leak_check(clear_caches='no'): clear_caches='no': expected True or False",
        ),
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
        (
            [],
            "tpumem_leak_threshold = 20 Gb",
            "ERROR: pytest-tpumem: ini tpumem_leak_threshold: unknown unit 'Gb' in '20 Gb'*",
        ),
        ([], "tpumem = maybe", "ERROR: pytest-tpumem: ini tpumem: *'maybe'*"),
        (["--tpumem-top=-1"], "", "ERROR: pytest-tpumem: --tpumem-top: '-1' is not a whole number >= 0"),
        (
            ["--tpumem-sample-ms=fast"],
            "",
            "ERROR: pytest-tpumem: --tpumem-sample-ms: 'fast' is not a number from 0 to 60000",
        ),
        ([], "tpumem_max_hbm = 0GB", "ERROR: pytest-tpumem: ini tpumem_max_hbm: '0GB' must be more than 0 bytes*"),
        # Each answered in one line that names the value and what is accepted:
        (
            ["--tpumem-leak-threshold=10"],
            "",
            "ERROR: pytest-tpumem: --tpumem-leak-threshold: '10' has no unit: write 10MB (10^6 bytes), 10GB, or 10B for bytes;*",
        ),
        (
            ["--tpumem-max-hbm=20G"],
            "",
            "ERROR: pytest-tpumem: --tpumem-max-hbm: unknown unit 'G' in '20G': write 20GB (GB is 10^9 bytes) or 20GiB (2^30)*",
        ),
        (
            ["--tpumem-max-hbm=" + "9" * 400 + "GB"],
            "",
            "ERROR: pytest-tpumem: --tpumem-max-hbm: '99999999999999999999999999999... (404 characters) is larger than any memory (at most 9223372036854775807 bytes)",
        ),
        (
            [],
            "tpumem_max_hbm = " + "9" * 400 + "GB",
            "ERROR: pytest-tpumem: ini tpumem_max_hbm: '99999999999999999999999999999... (404 characters) is larger than any memory (at most 9223372036854775807 bytes)",
        ),
        (
            ["--tpumem-compare-fail=peak:" + "9" * 400 + "GB", "--tpumem-compare=b.json"],
            "",
            "ERROR: pytest-tpumem: --tpumem-compare-fail 'peak:999999999999999999999999... (409 characters): '99999999999999999999999999999... (404 characters) is larger than any memory (at most 9223372036854775807 bytes); accepted: peak:10%, *",
        ),
        ([], "tpumem_top = five", "ERROR: pytest-tpumem: ini tpumem_top: 'five' is not a whole number >= 0"),
        (
            [],
            "tpumem = treu",
            "ERROR: pytest-tpumem: ini tpumem: 'treu' is not a boolean; use true or false (or yes/no, on/off, 1/0)",
        ),
        ([], "tpumem_json =", "ERROR: pytest-tpumem: ini tpumem_json is empty: give a value, or remove the line"),
        (["--tpumem-json="], "", "ERROR: pytest-tpumem: --tpumem-json: give a path"),
        (
            ["--tpumem-tpu-chips=\u00b2"],
            "",
            "ERROR: pytest-tpumem: --tpumem-tpu-chips: '\u00b2' is neither auto nor a number of chips from 1 to 4096",
        ),
        (
            ["--tpumem-tpu-chips=" + "9" * 20],
            "",
            "ERROR: pytest-tpumem: --tpumem-tpu-chips: '99999999999999999999' is neither auto nor a number of chips from 1 to 4096",
        ),
        (
            [],
            "tpumem_tpu_chips = \u00b3",
            "ERROR: pytest-tpumem: ini tpumem_tpu_chips: '\u00b3' is neither auto nor a number*",
        ),
        (
            ["--tpumem-compare-missing=maybe", "--tpumem-compare=b.json"],
            "",
            "ERROR: pytest-tpumem: --tpumem-compare-missing: 'maybe' is not one of error, warn",
        ),
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
            "leak_check(...): iterations=0: expected an int from 1 to 1000",
            "*_ test_threshold _*",
            "leak_check(...): threshold: unknown unit 'Gb' in '20 Gb'*",
            "*_ test_clear_caches _*",
            "leak_check(...): clear_caches='yes': expected True or False",
        ]
    )


def test_the_fixture_refuses_what_would_not_run_and_passes_every_keyword_on(pytester):
    """A generator or async function would pass without its body running; an iteration count past
    what can run is refused; fn= and args= are the function's own keywords."""
    pytester.makepyfile(
        """
        import pytest

        def gen():
            yield

        async def coro():
            pass

        def test_generator(leak_check):
            leak_check(gen)

        def test_async(leak_check):
            leak_check(coro)

        def test_forever(leak_check):
            leak_check(lambda: None, iterations=2**63)

        @pytest.mark.leak_check(iterations=2**63)
        def test_forever_marked():
            pass

        def test_keywords_reach_the_function(leak_check):
            seen = []
            leak_check(lambda fn, args: seen.append((fn, args)), fn="mine", args=(1,), iterations=1, warmup=0)
            assert seen[0] == ("mine", (1,))
        """
    )
    result = pytester.runpytest("--tpumem", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines(
        [
            "*_ test_generator _*",
            "leak_check(...): fn=<function gen at 0x*> is a generator function: calling it runs none of its body; pass a "
            "function that exhausts it, e.g. lambda: list(fn())",
            "*_ test_async _*",
            "leak_check(...): fn=<function coro at 0x*> is an async function: calling it only makes a coroutine, and its body "
            "would never run; pass a function that runs it, e.g. lambda: asyncio.run(fn())",
            "*_ test_forever _*",
            "leak_check(...): iterations=9223372036854775808: expected an int from 1 to 1000",
            "*_ test_forever_marked _*",
            "@pytest.mark.leak_check(iterations=9223372036854775808): iterations=9223372036854775808: expected an int from 1 to 1000",
        ]
    )


def test_options_that_need_the_plugin_warn_when_it_is_off(pytester):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--tpumem-max-hbm=1GB", "--tpumem-top=3")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*PytestConfigWarning: pytest-tpumem is off, so --tpumem-max-hbm, --tpumem-top (or its ini twin) has no effect*"
        ]
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
    result.stdout.fnmatch_lines(
        ["@pytest.mark.leak_check cannot re-run the async test test_async; call the leak_check fixture*"]
    )


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
    bad.stderr.fnmatch_lines(
        ['ERROR: pytest-tpumem: ini tpumem_max_hbm: *expects a string*(write sizes as strings, e.g. "16GB")']
    )
