"""Switching the plugin on and off: flag, ini, no jax import when off, header, summary, xdist."""

import subprocess
import sys

import pytest

# Where what a run imports is the point, its runs are new interpreters (tests/fresh.py): the tests
# marked interpreter. The others' runs are forked, as elsewhere.

CHECK_JAX = """
import sys

def pytest_sessionfinish(session):
    print("\\njax imported: %s" % ("jax" in sys.modules))
"""


def test_plugin_import_does_not_import_jax():
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest, pytest_tpumem.plugin"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    modules = [line.rsplit("|", 1)[-1].strip() for line in out.splitlines() if "|" in line]
    assert "pytest_tpumem.plugin" in modules
    assert not [m for m in modules if m == "jax" or m.startswith(("jax.", "jaxlib"))]


# What a run without --tpumem loads of the plugin: the entry point and what it declares options and
# markers from. Everything else (the lower layers, the active part, jax) waits for --tpumem.
OFF_MODULES = [
    "pytest_tpumem",
    "pytest_tpumem.defaults",
    "pytest_tpumem.glue",
    "pytest_tpumem.glue.hookspecs",
    "pytest_tpumem.glue.markers",
    "pytest_tpumem.glue.off",
    "pytest_tpumem.glue.options",
    "pytest_tpumem.plugin",
    "pytest_tpumem.units",
]


@pytest.mark.interpreter
def test_a_run_without_tpumem_loads_the_entry_modules_alone(pytester):
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            ours = sorted(m for m in sys.modules if m == "pytest_tpumem" or m.startswith("pytest_tpumem."))
            heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "numpy", "ml_dtypes"))
            print("\\ntpumem modules: %s" % ours)
            print("heavy modules: %s" % heavy)
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1B")
        @pytest.mark.leak_check(iterations=1)
        def test_marked():
            pass

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-s", "--strict-markers")
    result.assert_outcomes(passed=2)
    lines = result.stdout.lines  # compared as they are: fnmatch would read the brackets as a pattern
    assert f"tpumem modules: {OFF_MODULES}" in lines, result.stdout.str()
    assert "heavy modules: []" in lines


def test_importing_every_module_of_the_package_imports_no_jax():
    """jax, numpy and what imports them are imported inside the functions that use them: an xdist
    controller, the CLI and a run without --tpumem import the plugin's modules without them."""
    script = (
        "import importlib, pkgutil, sys\n"
        "import pytest_tpumem\n"
        "names = [m.name for m in pkgutil.walk_packages(pytest_tpumem.__path__, 'pytest_tpumem.')]\n"
        "for name in names:\n"
        "    if not name.endswith('.__main__'):\n"
        "        importlib.import_module(name)\n"
        "print(len(names))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'numpy', 'ml_dtypes')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    count, heavy = done.stdout.splitlines()[-2:]
    assert int(count) > 50  # the whole package was walked, its layers' modules included
    assert heavy == "[]"


@pytest.mark.interpreter
@pytest.mark.parametrize("args, imported", [((), False), (("--tpumem",), True)])
def test_jax_is_imported_only_when_switched_on(pytester, args, imported):
    pytester.makeconftest(CHECK_JAX)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1B")
        @pytest.mark.leak_check(iterations=1)
        def test_plain():
            assert 1 + 1 == 2
        """
    )
    result = pytester.runpytest_subprocess("-s", "--strict-markers", *args)
    result.stdout.fnmatch_lines([f"jax imported: {imported}"])
    # Off: the markers are inert (the 1-byte budget is not judged) but registered (--strict-markers).
    result.assert_outcomes(passed=1)


@pytest.mark.interpreter
@pytest.mark.parametrize("args", [(), ("-n", "2"), ("-q",)])
def test_markers_while_the_plugin_is_off_are_said_once(pytester, args):
    """A CI job that lost --tpumem: its marked tests run unmeasured, and the run says so in one
    line (under xdist too, counted from the tests' reports); a suite without markers hears nothing."""
    pytester.makeconftest(CHECK_JAX)
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.max_hbm("1B")
        def test_budgeted():
            pass

        @pytest.mark.leak_check
        @pytest.mark.parametrize("n", [1, 2])
        def test_checked(n):
            pass

        def test_plain():
            pass
        """,
        test_unmarked="def test_other():\n    pass\n",
    )
    line = (
        "pytest-tpumem is off: 3 tests have a max_hbm or leak_check marker and nothing was measured; "
        "pass --tpumem or set tpumem = true in the ini"
    )
    result = pytester.runpytest_subprocess("-s", *args)
    result.assert_outcomes(passed=5)
    assert result.stdout.lines.count(line) == 1 and "jax imported: False" in result.stdout.str()
    quiet = pytester.runpytest_subprocess("test_unmarked.py", *args)
    assert "pytest-tpumem" not in quiet.stdout.str()


@pytest.mark.parametrize(
    "ini, args, active",
    [
        ("tpumem = true", (), True),
        ("tpumem = false", (), False),
        ("tpumem = false", ("--tpumem",), True),
        ("", (), False),
    ],
)
def test_flag_and_ini(pytester, ini, args, active):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1MB")
        def test_over():
            x = jnp.ones((1_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1) if active else result.assert_outcomes(passed=1)
    assert ("tpumem: jax" in result.stdout.str()) is active


SUITE = """
import jax.numpy as jnp, pytest

@pytest.mark.max_hbm("100MB")
def test_small():
    x = jnp.ones((1_000_000,), jnp.float32)

@pytest.mark.max_hbm("100MB")
def test_big():
    x = jnp.ones((20_000_000,), jnp.float32)

@pytest.mark.max_hbm("100MB")
def test_medium():
    x = jnp.ones((10_000_000,), jnp.float32)

def test_unmeasured():
    pass
"""


def test_summary_worst_first_top_and_quiet(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--tpumem")
    result.stdout.fnmatch_lines(
        [
            "*= tpumem =*",
            "verdict*peak per device*budget*growth/iter*source*test",
            "ok *cpu:0 80.0MB *100.0MB *- *body-end *test_suite.py::test_big",
            "ok *cpu:0 40.0MB *test_suite.py::test_medium",
            "ok *cpu:0 4.0MB *test_suite.py::test_small",
            "3 measured, 0 failed a memory check; live arrays stand in for device memory*",
        ]
    )
    assert "test_unmeasured" not in result.stdout.str().split("= tpumem =")[1]
    top = pytester.runpytest_subprocess("--tpumem", "--tpumem-top=1")
    top.stdout.fnmatch_lines(
        ["*test_suite.py::test_big", "3 measured, 0 failed a memory check (showing 1, see --tpumem-top)*"]
    )
    assert "test_medium" not in top.stdout.str().split("= tpumem =")[1]
    quiet = pytester.runpytest_subprocess("--tpumem", "-q")
    quiet.stdout.fnmatch_lines(["*= tpumem =*", "3 measured, 0 failed a memory check*"])
    assert "verdict" not in quiet.stdout.str()
    hidden = pytester.runpytest_subprocess("--tpumem", "--tpumem-top=0")
    assert "= tpumem =" not in hidden.stdout.str()


@pytest.mark.interpreter
def test_xdist_rows_reach_the_controller(pytester):
    pytest.importorskip("xdist")
    over = SUITE.replace('"100MB")\ndef test_big', '"50MB")\ndef test_big')
    pytester.makepyfile(test_suite=over)
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            if not hasattr(session.config, "workerinput"):
                print("\\ncontroller imported jax: %s" % ("jax" in sys.modules))
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-n", "2", "--tpumem-max-hbm=1GB", "-s")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "tpumem: devices are read in the pytest-xdist workers and listed in the summary",
            "tpumem: default budget 1.0GB, leak threshold 100.0MB/iteration",
            "controller imported jax: False",
            "*= tpumem =*",
            "tpumem: jax *, backend cpu (cpu), 2 local devices: cpu:0, cpu:1",
            "over budget *cpu:0 80.0MB*50.0MB*test_suite.py::test_big",
            "ok *cpu:0 40.0MB*100.0MB*test_suite.py::test_medium",
            "4 measured, 1 failed a memory check*",
        ]
    )


def test_a_feature_this_jax_lacks_is_said_even_under_quiet(pytester):
    """Simulated through the compat layer's own check: the summary names what cannot be measured."""
    pytester.makeconftest(
        """
        from pytest_tpumem.readings import jaxcompat

        real = jaxcompat._missing

        def pytest_configure(config):
            jaxcompat._missing = lambda f: "jax 9.9 has no Client.live_executables()" if f == jaxcompat.COMPILED_PROGRAMS else real(f)
        """
    )
    pytester.makepyfile("import pytest\n\n@pytest.mark.max_hbm('1GB')\ndef test_it():\n    pass\n")
    for args in ((), ("-q",)):
        result = pytester.runpytest_subprocess("--tpumem", *args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(
            ["tpumem: compiled programs unavailable on this jax: jax 9.9 has no Client.live_executables()"]
        )
