"""Where CI people look on GitHub, from a planted suite: the job summary appended to
$GITHUB_STEP_SUMMARY, annotations on the failing tests' lines (only where GITHUB_ACTIONS=true), and
the figures for github-action-benchmark, checked against the format that action reads."""

import fnmatch
import json
import re

import pytest
from benchmark_format import FormatError, parse

PLANTED = """
import jax.numpy as jnp, pytest
kept = []

@pytest.mark.max_hbm("1MB")
def test_over():
    jnp.ones((1_000_000,), jnp.float32).block_until_ready()  # 4.0MB against 1.0MB

@pytest.mark.max_hbm("5MB")
def test_under():
    jnp.ones((1_000_000,), jnp.float32).block_until_ready()  # its clean twin

@pytest.mark.leak_check(iterations=3, threshold="1MB")
def test_leaks():
    kept.append(jnp.ones((1_000_000,), jnp.float32))  # 4.0MB an iteration

@pytest.mark.leak_check(iterations=3, threshold="1MB")
def test_no_leak():
    jnp.ones((1_000_000,), jnp.float32).block_until_ready()

def test_plain_failure():
    assert 0  # not a memory check: neither listed nor annotated
"""

SUMMARY = [
    "### pytest-tpumem: 4 measured tests, 2 failed a memory check",
    "",
    "leak: 1 · over budget: 1 · ok: 2",
    "",
    "**Failed a memory check**",
    "",
    "- `test_planted.py::test_leaks`: leak_check: cpu:0 live arrays grew 4.0MB/iteration over 3 iterations "
    "(threshold 1.0MB/iteration)",
    "- `test_planted.py::test_over`: max_hbm: peak 4.0MB on cpu:0 is over the budget of 1.0MB (max_hbm('1MB')), "
    "judged by *; live arrays stand in for device memory (the backend reports no allocator figures: XLA's "
    "temporaries are counted from the memory analysis of each program the test runs)",  # the witness: a name, not a figure
    "",
    "Annotated on the tests' lines.",
    "",
    "**Suite ledger: 1 test left 10.0MB or more of the arrays they made alive**",
    "",
    "- 16.0MB `test_planted.py::test_leaks`",
    "",
    "**High-water marks**",
    "",
    "- cpu:0: peak 4.0MB in `test_planted.py::test_leaks`",
    "- (live arrays stood in for device memory: the backend reports no allocator figures)",
    None,  # host RSS: the runner's, which differs from run to run (checked by pattern below)
    "",
    "The run's page (HTML, opens offline): `report.html`",
    "",
]
ANNOTATIONS = [  # at the line of the test's first decorator, its marker (pytest's item.location)
    "::error file=test_planted.py,line=12,title=pytest-tpumem%3A leak::test_planted.py::test_leaks: leak_check: "
    "cpu:0 live arrays grew 4.0MB/iteration over 3 iterations (threshold 1.0MB/iteration)",
    "::error file=test_planted.py,line=4,title=pytest-tpumem%3A over budget::test_planted.py::test_over: max_hbm: "
    "peak 4.0MB on cpu:0 is over the budget of 1.0MB (max_hbm('1MB')), judged by *; live arrays stand in "
    "for device memory (the backend reports no allocator figures: XLA's temporaries are counted from the memory "
    "analysis of each program the test runs)",
]


@pytest.fixture
def github(pytester, monkeypatch):
    """A GitHub Actions step: its summary file (another step's summary in it already) and workspace."""
    pytester.makepyfile(test_planted=PLANTED)
    summary = pytester.path / "step_summary.md"
    summary.write_text("## lint\n\nall clean\n")
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    return summary


def check_summary(text):
    lines = text.splitlines()
    assert lines[:3] == ["## lint", "", "all clean"]  # another step's summary is kept
    ours = lines[3:]
    host = ours[SUMMARY.index(None)]
    assert len(ours) == len(SUMMARY), ours
    for line, expected in zip(ours, SUMMARY, strict=True):
        assert expected is None or fnmatch.fnmatchcase(line, expected), (line, expected)
    assert re.fullmatch(r"- host RSS, the runner's process: \d+\.\dMB after `test_planted\.py::\w+`", host), host


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_the_summary_and_annotations_of_a_planted_suite_line_by_line(pytester, github, monkeypatch, xdist):
    if xdist:
        pytest.importorskip("xdist")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-html=report.html", *xdist)
    result.assert_outcomes(passed=2, failed=3)
    check_summary(github.read_text())
    said = [line for line in result.outlines if line.startswith("::")]
    assert len(said) == len(ANNOTATIONS) and all(map(fnmatch.fnmatchcase, said, ANNOTATIONS)), said
    result.stdout.fnmatch_lines([f"tpumem: the job summary (Markdown) appended to {github}"])


def test_off_github_actions_no_annotation_and_the_summary_only_where_asked(pytester, github, monkeypatch):
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-html=report.html")
    assert not [line for line in result.outlines if line.startswith("::")]
    lines = github.read_text().splitlines()
    assert "Annotated on the tests' lines." not in lines and len(lines) == 3 + len(SUMMARY) - 2  # nor its blank
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    before = github.read_text()
    pytester.runpytest_subprocess("--tpumem")
    assert github.read_text() == before


def test_each_can_be_turned_off(pytester, github, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    before = github.read_text()
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-summary=off", "--tpumem-annotations=off")
    result.assert_outcomes(passed=2, failed=3)
    assert github.read_text() == before
    assert not [line for line in result.outlines if line.startswith("::")]


def test_a_summary_path_given_is_appended_to_and_a_test_source_is_refused(pytester, github):
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-summary=out.md", "--tpumem-summary=out.md")
    assert (pytester.path / "out.md").read_text().startswith("### pytest-tpumem: 4 measured tests")
    source = (pytester.path / "test_planted.py").read_text()
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-summary", "test_planted.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-tpumem: --tpumem-summary */test_planted.py: holds what is not a Markdown summary (it seems "
            "to be Python source), and is left as it is: give another path, or move that file away"
        ]
    )
    assert (pytester.path / "test_planted.py").read_text() == source
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-summary=.")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-tpumem: --tpumem-summary *: is a directory"])


def test_a_summary_that_cannot_be_appended_is_said_and_the_run_goes_on(pytester, github, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "no" / "such" / "dir" / "summary.md"))
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(["tpumem: the job summary could not be appended to */summary.md: No such file*"])


# --- memory over commits: github-action-benchmark's customSmallerIsBetter ------------------------


def test_the_benchmark_figures_are_what_the_action_reads(pytester, github):
    from pytest_tpumem.cli import main

    pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-json=report.json")
    out = pytester.path / "bench.json"
    assert main(["benchmark", str(pytester.path / "report.json"), "-o", str(out)]) == 0
    charted = {e["name"]: (e["unit"], e["value"]) for e in parse(out.read_text())}
    host = charted.pop("run: host RSS high-water mark")
    assert host[0] == "MB" and host[1] > 50
    assert charted == {
        "test_planted.py::test_leaks peak": ("MB", 4),
        "test_planted.py::test_leaks growth/iteration": ("MB", 4),
        "test_planted.py::test_no_leak peak": ("MB", 4),
        "test_planted.py::test_no_leak growth/iteration": ("MB", 0),
        "test_planted.py::test_over peak": ("MB", 4),
        "test_planted.py::test_under peak": ("MB", 4),
        "run: cpu:0 high-water mark": ("MB", 4),
    }
    assert all(e["extra"].startswith("pytest-tpumem: ") for e in json.loads(out.read_text()))
    assert main(["benchmark", str(pytester.path / "report.json"), "-o", str(out)]) == 0  # its own: replaced


def test_the_benchmark_command_refuses_what_is_not_its_own_and_an_empty_report(pytester, wire, capsys):
    from pytest_tpumem.cli import main
    from pytest_tpumem.telling import report as reports

    empty = pytester.path / "empty.json"
    reports.write(wire.report({}), str(empty))
    assert main(["benchmark", str(empty), "-o", str(pytester.path / "b.json")]) == 2
    assert "no measured test and no high-water mark to chart; nothing written" in capsys.readouterr().err
    assert not (pytester.path / "b.json").exists()
    theirs = pytester.path / "theirs.json"
    theirs.write_text('[{"name": "cpu", "unit": "%", "value": 5}]')
    full = pytester.path / "full.json"
    reports.write(wire.report({"t.py::a": [wire.peak(10**6)]}), str(full))
    assert main(["benchmark", str(full), "-o", str(theirs)]) == 2
    assert "a file pytest-tpumem did not write is there" in capsys.readouterr().err
    assert theirs.read_text() == '[{"name": "cpu", "unit": "%", "value": 5}]'


# The action's own examples and what its tests say it makes of them (test/data/extract/
# customSmallerIsBetter_output.json and _output2.json, and test/__snapshots__/extract.spec.ts.snap,
# github-action-benchmark v1.22.0): the format written down above reads them the same way.
ACTION_EXAMPLES = [
    (
        '[{"name": "My Custom Smaller Is Better Benchmark - CPU Load", "unit": "Percent", "value": 50, "range": "5%", '
        '"extra": "My Optional Information for the tooltip"}, {"name": "My Custom Smaller Is Better Benchmark - Memory '
        'Used", "unit": "Megabytes", "value": 100}]',
        [
            {
                "extra": "My Optional Information for the tooltip",
                "name": "My Custom Smaller Is Better Benchmark - CPU Load",
                "range": "5%",
                "unit": "Percent",
                "value": 50,
            },
            {"name": "My Custom Smaller Is Better Benchmark - Memory Used", "unit": "Megabytes", "value": 100},
        ],
    ),
    (
        '[{"name": "No instrumentation", "unit": "ns", "value": 90.9439, "range": 0.519165}, {"name": "Deactivated '
        'probe", "unit": "ns", "value": 445.661, "range": 8.21371}]',
        [
            {"name": "No instrumentation", "range": "0.519165", "unit": "ns", "value": 90.9439},
            {"name": "Deactivated probe", "range": "8.21371", "unit": "ns", "value": 445.661},
        ],
    ),
]


@pytest.mark.parametrize(("text", "charted"), ACTION_EXAMPLES)
def test_the_actions_own_examples_read_as_its_tests_say(text, charted):
    assert parse(text) == charted


@pytest.mark.parametrize(
    "text", ["[]", "{}", '[{"name": "a", "unit": "MB"}]', '[{"name": "a", "unit": "MB", "value": "x"}]', "[1]"]
)
def test_what_the_action_refuses_is_refused(text):
    with pytest.raises(FormatError):
        parse(text)
