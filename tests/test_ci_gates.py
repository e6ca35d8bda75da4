"""CI gates as a user runs them: the JSON report, a baseline saved on one run and enforced on the
next, bad baselines, pytest-xdist, pytest-benchmark and JUnit XML."""

import json
import xml.etree.ElementTree as ET

import pytest

# Each test holds SIZE float32s (x2 for the second) at its end: its peak is exactly what it holds.
SIZED = """
import os, jax.numpy as jnp, pytest

SIZE = int(os.environ["SIZE"])

@pytest.mark.max_hbm("1GB")
def test_grows():
    x = jnp.ones((SIZE,), jnp.float32)
    x.block_until_ready()

@pytest.mark.max_hbm("1GB")
def test_steady():
    y = jnp.ones((2_500_000,), jnp.float32)
    y.block_until_ready()
"""


def _run(pytester, size, *args):
    pytester.makepyfile(test_sized=SIZED)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", str(size))
        return pytester.runpytest_subprocess("--tpumem", *args)


def _edit_baseline(pytester, edit):
    """Change the saved base.json as another run or machine would have written it."""
    report = json.loads((pytester.path / "base.json").read_text())
    edit(report)
    (pytester.path / "base.json").write_text(json.dumps(report))


def test_json_report_has_every_measured_test_with_figures_and_context(pytester):
    result = _run(pytester, 5_000_000, "--tpumem-json", "out/report.json")
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert report["schema"] == "pytest-tpumem-report" and report["version"] == 2
    tests = report["tests"]
    assert set(tests) == {"test_sized.py::test_grows", "test_sized.py::test_steady"}
    grows = tests["test_sized.py::test_grows"]
    assert grows["peak"] == 20_000_000 and grows["peaks"] == {
        "cpu:0": 20_000_000,
        "cpu:1": 0,
    }  # tests/conftest.py: 2 CPU devices
    assert grows["budget"] == 10**9 and grows["verdict"] == "ok" and grows["outcome"] == "passed"
    (check,) = grows["checks"]
    assert check["check"] == "budget" and check["devices"]["cpu:0"]["witness"] == grows["witness"]
    context = report["context"]
    assert context["platform"] == "cpu" and context["device_count"] == 2
    assert context["process_index"] == 0 and context["process_count"] == 1
    assert context["versions"]["jax"] and context["env"]["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    result.stdout.fnmatch_lines(["tpumem: report written to *report.json"])
    from pytest_tpumem.telling.report import read

    assert {
        k: e.to_json() for k, e in read(str(pytester.path / "out" / "report.json")).tests.items()
    } == tests  # read back


def test_two_run_flow_fails_a_30_percent_peak_increase_and_passes_a_2_percent_one(pytester):
    _run(pytester, 15_000_000, "--tpumem-save", "base.json").assert_outcomes(passed=2)  # test_grows: 60MB
    saved = (pytester.path / "base.json").read_bytes()

    worse = _run(pytester, 19_500_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    worse.assert_outcomes(passed=1, failed=1)
    worse.stdout.fnmatch_lines(
        ["*tpumem baseline: peak 78.0MB, was 60.0MB in base.json (+30.0%, +18.0MB), beyond peak:10%*"]
    )
    assert "test_steady FAILED" not in worse.stdout.str()

    slightly = _run(pytester, 15_300_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    slightly.assert_outcomes(passed=2)
    slightly.stdout.fnmatch_lines(["*peak*60.0MB*61.2MB*+2.0%*"])
    assert (pytester.path / "base.json").read_bytes() == saved  # compared, never overwritten


def test_without_a_tolerance_the_comparison_is_shown_not_enforced(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    result = _run(pytester, 10_000_000, "--tpumem-compare", "base.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*peak*20.0MB*40.0MB*+100.0%*", "*shown, not enforced*"])


def test_new_and_missing_tests_and_improvements_are_listed_not_failed(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    pytester.makepyfile(test_sized=SIZED.replace("def test_steady", "def test_renamed"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", "1000000")
        result = pytester.runpytest_subprocess(
            "--tpumem", "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%"
        )
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "test_renamed" in out and "test_steady" in out and "improved" in out.lower()


def test_a_corrupt_baseline_is_a_usage_error_and_left_untouched(pytester):
    (pytester.path / "base.json").write_text('{"schema": "pytest-tpumem-report", "version": 1, "tests": ')
    before = (pytester.path / "base.json").read_bytes()
    result = _run(pytester, 5_000_000, "--tpumem-compare", "base.json", "--tpumem-save", "base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tpumem-compare *base.json: not JSON*"])
    assert (pytester.path / "base.json").read_bytes() == before


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "*base.json: no such file*"),
        ('{"tests": {}}', "*base.json: not a pytest-tpumem report*"),
        (
            '{"schema": "pytest-tpumem-report", "version": 99, "context": {}, "tests": {}}',
            "*schema version 99 is newer*",
        ),
        (
            '{"schema": "pytest-tpumem-report", "version": 1, "context": {}, "tests": {"t": {"verdict": "ok", "peak": "12MB"}}}',
            "*test 't': \"peak\" is '12MB', not bytes as a whole number*",
        ),
        ("[" * 100_000 + "]" * 100_000, "*base.json: nested too deeply to be a report"),  # was an INTERNALERROR
        (
            '{"schema": "pytest-tpumem-report", "version": 2, "context": {}, "tests": {"t": {"verdict": "ok", "peak": 1'
            + "0" * 30
            + "}}}",
            "*test 't': \"peak\" is 1000000000000000000000000000000, not bytes as a whole number from 0 to 2^63-1",
        ),
    ],
)
def test_missing_and_invalid_baselines_are_usage_errors_naming_the_file(pytester, content, says):
    if content is not None:
        (pytester.path / "base.json").write_text(content)
    result = _run(pytester, 5_000_000, "--tpumem-compare", "base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])


def test_a_baseline_from_another_device_kind_warns_and_fails_nothing(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    _edit_baseline(pytester, lambda r: r["context"].update(platform="tpu", device_kind="TPU v5 lite"))
    result = _run(pytester, 10_000_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*base.json is not comparable*'tpu'*'cpu'*none fails"])


def test_a_baseline_of_schema_version_1_warns_and_fails_nothing(pytester):
    """Before version 2 a sampler could set a peak: such figures are shown, not enforced."""
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    _edit_baseline(pytester, lambda r: r.update(version=1))
    result = _run(pytester, 10_000_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "WARNING: base.json is not comparable: it was written by an older pytest-tpumem (schema version 1), whose peaks "
            "and growth were read another way (a sampler could set a peak); take a new baseline; changes are shown, none fails"
        ]
    )


def test_the_report_never_overwrites_the_baseline(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    result = _run(pytester, 5_000_000, "--tpumem-compare", "base.json", "--tpumem-json", "base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*it would be overwritten*--tpumem-save*"])


@pytest.mark.parametrize(
    "args, says",
    [
        (["--tpumem-compare", "b.json", "--tpumem-compare-fail", "peak:ten%"], "*--tpumem-compare-fail*'peak:ten%'*"),
        (["--tpumem-compare", "b.json", "--tpumem-compare-fail", "memory:10%"], "*'memory:10%' names no figure*"),
        (["--tpumem-compare-fail", "peak:10%"], "*needs a baseline*--tpumem-compare*"),
    ],
)
def test_bad_tolerances_are_usage_errors(pytester, args, says):
    (pytester.path / "b.json").write_text("{}")
    result = _run(pytester, 5_000_000, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])


def test_xdist_report_has_every_test_exactly_once(pytester):
    pytester.makepyfile(
        test_many="""
        import jax.numpy as jnp, pytest

        @pytest.mark.parametrize("i", range(8))
        @pytest.mark.max_hbm("1GB")
        def test_one(i):
            x = jnp.ones((1000 * (i + 1),), jnp.float32)
            x.block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--tpumem", "--tpumem-json", "r.json")
    result.assert_outcomes(passed=8)
    report = json.loads((pytester.path / "r.json").read_text())
    assert sorted(report["tests"]) == sorted(f"test_many.py::test_one[{i}]" for i in range(8))
    assert all(report["tests"][f"test_many.py::test_one[{i}]"]["peak"] == 4000 * (i + 1) for i in range(8))
    assert report["context"]["xdist_workers"] == 2 and report["context"]["platform"] == "cpu"
    assert not list(pytester.path.glob("r.process-*"))  # workers write nothing


def test_benchmark_extra_info_has_the_peak_in_the_benchmark_json(pytester, monkeypatch):
    pytest.importorskip("pytest_benchmark")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):  # this suite's own workers:
        monkeypatch.delenv(name, raising=False)  # pytest-benchmark turns itself off under xdist
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp

        KEPT = []

        def test_bench(benchmark):
            x = jnp.ones((1_000_000,), jnp.float32)
            f = jax.jit(lambda a: a * 2)
            benchmark.pedantic(lambda: f(x).block_until_ready(), rounds=3, iterations=1)
            KEPT.append(jnp.ones((500_000,), jnp.float32))  # 2 MB it leaves behind
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--benchmark-json", "bench.json")
    result.assert_outcomes(passed=1)
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    info = bench["extra_info"]["tpumem"]
    assert info["peak"] >= 4_000_000 and set(info["peaks"]) == {"cpu:0", "cpu:1"} and info["witness"]
    assert info["verdict"] == "ok"
    assert info["residue"] == 2_000_000  # the suite ledger's, read after the test's teardown


def test_junit_properties_are_json_text(pytester):
    pytester.makepyfile(test_sized=SIZED)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", "1000")
        pytester.runpytest_subprocess("--tpumem", "--junitxml", "j.xml").assert_outcomes(passed=2)
    props = ET.parse(pytester.path / "j.xml").findall(".//testcase/properties/property")
    assert [p.get("name") for p in props] == ["pytest_tpumem", "pytest_tpumem"]
    rows = [json.loads(p.get("value")) for p in props]
    assert {r["peaks"]["cpu:0"] for r in rows} == {4000, 10_000_000}
    assert all(r["check"] == "budget" and r["verdict"] == "ok" for r in rows)


def test_a_test_that_failed_in_the_baseline_is_shown_not_judged(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    _edit_baseline(
        pytester, lambda r: r["tests"]["test_sized.py::test_grows"].update(outcome="failed")
    )  # cut short on main
    result = _run(pytester, 10_000_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*peak*20.0MB*40.0MB*+100.0%*"])


def test_a_regression_is_in_the_report_as_its_verdict(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    _run(
        pytester,
        10_000_000,
        "--tpumem-compare",
        "base.json",
        "--tpumem-compare-fail",
        "peak:10%",
        "--tpumem-json",
        "r.json",
    )
    report = json.loads((pytester.path / "r.json").read_text())
    entry = report["tests"]["test_sized.py::test_grows"]
    assert entry["verdict"] == "regressed" and entry["outcome"] == "failed"
    assert entry["checks"][-1] == {
        "check": "baseline",
        "verdict": "regressed",
        "changes": [{"figure": "peak", "old": 20_000_000, "new": 40_000_000, "beyond": "peak:10%"}],
    }
    assert report["summary"]["failed"] == 1


def test_a_run_cut_short_does_not_replace_the_baseline(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    saved = (pytester.path / "base.json").read_bytes()
    pytester.makepyfile(test_first="def test_fails():\n    assert False\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", "1000")
        result = pytester.runpytest_subprocess(
            "--tpumem", "-x", "--tpumem-save", "base.json", "test_first.py", "test_sized.py"
        )
    result.stdout.fnmatch_lines(
        ["tpumem: the baseline *base.json was not saved, the last one is kept: the run stopped early*"]
    )
    assert (pytester.path / "base.json").read_bytes() == saved


def test_ini_paths_are_taken_from_the_ini_files_directory(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "baselines/base.json")
    pytester.makeini(
        "[pytest]\ntpumem = true\ntpumem_compare = baselines/base.json\ntpumem_compare_fail =\n    peak:10%\n"
        "tpumem_json = out/r.json\n"
    )
    sub = pytester.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", "10000000")
        mp.chdir(sub)
        result = pytester.runpytest_subprocess(str(pytester.path / "test_sized.py"))
    result.assert_outcomes(passed=1, failed=1)
    assert (pytester.path / "out" / "r.json").exists()


def test_a_gate_in_the_ini_does_nothing_while_tpumem_is_off(pytester):
    pytester.makeini("[pytest]\ntpumem_compare_fail = peak:10%\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*pytest-tpumem is off, so --tpumem-compare-fail (or its ini twin) has no effect*"])


def test_growth_takes_a_size_not_a_percentage(pytester):
    (pytester.path / "b.json").write_text("{}")
    result = _run(pytester, 1000, "--tpumem-compare", "b.json", "--tpumem-compare-fail", "growth:10%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'growth:10%': growth takes a size (growth:10MB), not a percentage*"])


def _project(pytester):
    """test_sized.py in proj/, a baselines/ folder beside it: a layout where pytest's rootdir moves."""
    proj = pytester.mkdir("proj")
    (proj / "test_sized.py").write_text(SIZED)
    pytester.mkdir("baselines")
    return proj


def _run_in(pytester, where, size, *args):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIZE", str(size))
        mp.chdir(where)
        return pytester.runpytest_subprocess("--tpumem", *args)


def test_a_baseline_named_from_another_rootdir_still_gates(pytester):
    """`--tpumem-compare ../baselines/base.json` (a space, not `=`): pytest takes the existing path
    as an argument when it picks the rootdir, so every test id gains `proj/`. The gate still
    compares each test with its baseline figure and fails the one that grew."""
    proj = _project(pytester)
    _run_in(pytester, proj, 5_000_000, "--tpumem-save=../baselines/base.json").assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "baselines" / "base.json").read_text())
    assert set(saved["tests"]) == {"test_sized.py::test_grows", "test_sized.py::test_steady"}
    assert saved["context"]["rootdir"] == str(proj)

    result = _run_in(
        pytester, proj, 10_000_000, "--tpumem-compare", "../baselines/base.json", "--tpumem-compare-fail", "peak:10%"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "tpumem baseline: peak 40.0MB, was 20.0MB in base.json (+100.0%, +20.0MB), beyond peak:10%",
            "regressed  cpu:0 40.0MB * proj/test_sized.py::test_grows",
            f"2 tests matched with base.json under another id: its tests are named from rootdir {proj}, this run's from {pytester.path}",
        ]
    )


def test_a_baseline_taken_in_another_checkout_is_matched_by_path(pytester):
    """A baseline from CI's workspace (/ci/work/repo), ids relative to the repository; this run's
    rootdir is the repository's tests/ folder: matched by the path they end with."""
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")

    def moved(report):
        report["context"]["rootdir"] = "/ci/work/repo"
        report["tests"] = {f"tests/{k}": v for k, v in report["tests"].items()}

    _edit_baseline(pytester, moved)
    result = _run(pytester, 10_000_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["2 tests matched with base.json under another id: its tests are named from rootdir /ci/work/repo, *"]
    )


def test_a_gate_that_compared_no_test_fails_the_run(pytester):
    """Both sides have tests, none is the same test: the run exits 1 with one line saying why,
    though every test passed. Without a tolerance it is said and fails nothing."""
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")

    def elsewhere(report):
        del report["context"]["rootdir"]  # as an older pytest-tpumem wrote it
        report["tests"] = {k.replace("test_sized.py", "test_other.py"): v for k, v in report["tests"].items()}

    _edit_baseline(pytester, elsewhere)
    result = _run(pytester, 5_000_000, "--tpumem-compare", "base.json", "--tpumem-compare-fail", "peak:10%")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "ERROR: no test compared with base.json: it has 2 tests, this run 2, and none is the same test (it does not say "
            "which rootdir its test ids are relative to (written by an older pytest-tpumem)); the gate fails. *"
            "(first ids: test_other.py::test_grows there, test_sized.py::test_grows here)"
        ]
    )
    shown = _run(pytester, 5_000_000, "--tpumem-compare", "base.json")
    assert shown.ret == pytest.ExitCode.OK
    shown.stdout.fnmatch_lines(["ERROR: no test compared with base.json: * nothing was judged. *"])


def test_a_run_that_selects_no_test_keeps_the_baseline(pytester):
    _run(pytester, 5_000_000, "--tpumem-save", "base.json")
    saved = (pytester.path / "base.json").read_bytes()
    result = _run(pytester, 5_000_000, "-k", "no_such_test", "--tpumem-save", "base.json")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["tpumem: the baseline *base.json was not saved, the last one is kept: the run selected no test"]
    )
    assert (pytester.path / "base.json").read_bytes() == saved
    pytester.makepyfile(test_plain="def test_unmeasured():\n    pass\n")
    result = pytester.runpytest_subprocess("--tpumem", "test_plain.py", "--tpumem-save", "base.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["tpumem: the baseline *base.json was not saved, the last one is kept: it measured no test"]
    )
    assert (pytester.path / "base.json").read_bytes() == saved


def test_a_first_run_without_a_baseline_can_warn_and_save_one(pytester):
    """--tpumem-compare-missing=warn: a project's first CI run says there is no baseline yet and
    saves one; the next run compares with it. The default stays a usage error."""
    gate = ("--tpumem-compare", "base.json", "--tpumem-save", "base.json", "--tpumem-compare-fail", "peak:10%")
    assert _run(pytester, 5_000_000, *gate).ret == pytest.ExitCode.USAGE_ERROR
    first = _run(pytester, 5_000_000, *gate, "--tpumem-compare-missing", "warn")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(
        [
            f"WARNING: tpumem: no baseline at {pytester.path / 'base.json'} yet (--tpumem-compare-missing=warn): nothing "
            f"compared; this run's figures were saved to {pytester.path / 'base.json'}, the baseline of the next run"
        ]
    )
    second = _run(pytester, 10_000_000, *gate, "--tpumem-compare-missing", "warn")
    second.assert_outcomes(passed=1, failed=1)


# --- a run narrowed to part of the suite replaces only the tests it ran (issue 27) -------------------

PARTS = """
import os, jax.numpy as jnp, pytest
N = int(os.environ.get("N", 1_000_000))  # a run that sets N changes the figure of every test it runs

@pytest.mark.max_hbm("50MB")
def test_a():
    jnp.ones((N,), jnp.float32).block_until_ready()

@pytest.mark.slow
@pytest.mark.max_hbm("50MB")
def test_b():
    jnp.ones((int(os.environ.get("B", N)),), jnp.float32).block_until_ready()
    assert not os.environ.get("FAIL_B")

@pytest.mark.max_hbm("50MB")
def test_c():
    jnp.ones((N,), jnp.float32).block_until_ready()
"""
OTHER = """
import os, jax.numpy as jnp, pytest

@pytest.mark.max_hbm("50MB")
def test_d():
    jnp.ones((int(os.environ.get("N", 1_000_000)),), jnp.float32).block_until_ready()
"""
WHOLE = ["test_other.py::test_d", "test_parts.py::test_a", "test_parts.py::test_b", "test_parts.py::test_c"]


def _baseline(pytester):
    return json.loads((pytester.path / "baseline.json").read_text())


def _baseline_tests(pytester):
    return sorted(_baseline(pytester)["tests"])


@pytest.fixture
def parts(pytester):
    """A suite of two files whose ini saves every run's baseline (as a project's `tpumem_save` does)."""
    pytester.makepyfile(test_parts=PARTS, test_other=OTHER)
    pytester.makeini("[pytest]\ntpumem = true\ntpumem_save = baseline.json\nmarkers = slow\n")
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=4)
    assert _baseline_tests(pytester) == WHOLE
    return pytester


@pytest.mark.parametrize(
    ("args", "kept", "because"),
    [
        (["-k", "test_b"], 3, "-k 'test_b'"),
        (["-m", "slow"], 3, "-m 'slow'"),
        (["-m", "slow", "-k", "b"], 3, "-k 'b' and -m 'slow'"),
        (["--deselect", "test_parts.py::test_a"], 1, "--deselect"),
        (["test_parts.py::test_b"], 3, "test ids given as arguments"),
        (["test_parts.py"], 1, "the paths it was given"),
        (["-n", "2", "-k", "test_b"], 3, "-k 'test_b'"),
    ],
)
def test_a_narrowed_run_keeps_the_tests_it_did_not_run_and_replaces_those_it_ran(
    parts, monkeypatch, args, kept, because
):
    if "-n" in args:
        pytest.importorskip("xdist")
    last = _baseline(parts)["tests"]
    monkeypatch.setenv("B", "2000000")  # test_b now holds 8 MB: the baseline must have the run's figure
    monkeypatch.setenv("N", "1100000")  # and every other test the run runs a figure of its own: told apart
    result = parts.runpytest_subprocess("-p", "no:randomly", *args)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            f"tpumem: the baseline {parts.path / 'baseline.json'} keeps {kept} test{'s' if kept > 1 else ''} of the "
            f"last one that this run did not run ({because}): a narrowed run replaces only the tests it ran"
        ]
    )
    now = _baseline(parts)["tests"]
    assert sorted(now) == WHOLE  # nothing lost
    ran = [t for t in WHOLE if now[t] != last[t]]
    assert "test_parts.py::test_b" in ran and now["test_parts.py::test_b"]["peak"] == 8_000_000
    assert len(WHOLE) - len(ran) == kept  # every other test is the last baseline's, as it was


def test_lf_keeps_the_tests_it_did_not_rerun(parts, monkeypatch):
    monkeypatch.setenv("FAIL_B", "1")
    parts.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=3, failed=1)
    result = parts.runpytest_subprocess("-p", "no:randomly", "--lf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["tpumem: the baseline * keeps 3 tests of the last one that this run did not run (--lf)*"]
    )
    assert _baseline_tests(parts) == WHOLE


def test_a_whole_run_replaces_the_baseline_and_a_removed_test_leaves_it(parts):
    result = parts.runpytest_subprocess("-p", "no:randomly", ".")  # a path, but the whole suite
    result.stdout.fnmatch_lines([f"tpumem: report written to {parts.path / 'baseline.json'}"])
    assert "keeps" not in result.stdout.str()
    (parts.path / "test_other.py").unlink()  # removed from the suite: not kept, though this run was given a path
    result = parts.runpytest_subprocess("-p", "no:randomly", "test_parts.py")
    result.assert_outcomes(passed=3)
    assert _baseline_tests(parts) == WHOLE[1:] and "keeps" not in result.stdout.str()
    parts.makepyfile(test_parts=PARTS.replace("def test_c", "def test_renamed"))  # renamed in a file the run collected
    parts.runpytest_subprocess("-p", "no:randomly", "test_parts.py").assert_outcomes(passed=3)
    assert _baseline_tests(parts) == ["test_parts.py::test_a", "test_parts.py::test_b", "test_parts.py::test_renamed"]
    parts.makepyfile(test_parts=PARTS.replace('@pytest.mark.max_hbm("50MB")\ndef test_a', "def test_a"))
    parts.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=3)  # test_a no longer measured
    assert _baseline_tests(parts) == ["test_parts.py::test_b", "test_parts.py::test_c"]
