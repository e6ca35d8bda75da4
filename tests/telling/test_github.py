"""What GitHub shows (telling.github): the job summary's Markdown, line by line, and the annotations'
workflow commands, escaped as the actions toolkit escapes them."""

import pytest

from pytest_tpumem.decisions.compare import compare, parse_tolerances
from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.telling import github

MB = 10**6


def failing(verdict, failure, peaks=None):
    return Entry(verdict=Verdict(verdict), failure=failure, peaks=peaks or {"cpu:0": MB}, peak=MB)


def test_text_is_escaped_for_markdown_and_the_terminal():
    assert github.text("leak_check: _x_ *b* <i>&") == "leak_check: \\_x\\_ \\*b\\* &lt;i&gt;&amp;"
    assert github.text("a|b [l](u) `c` \\ #h ~s~ !{}") == "a\\|b \\[l\\](u) \\`c\\` \\\\ \\#h \\~s\\~ \\!\\{\\}"
    assert github.text("\x1b[2J\n") == "\\\\x1b\\[2J\\\\n"  # pytest's escape, then Markdown's


@pytest.mark.parametrize(
    ("nodeid", "shown"),
    [("t.py::a", "`t.py::a`"), ("t.py::a[`x`]", "``t.py::a[`x`]``"), ("`", "`` ` ``"), ("a``b", "```a``b```")],
)
def test_a_test_id_is_inline_code_fenced_longer_than_any_backticks_it_holds(nodeid, shown):
    assert github.code(nodeid) == shown


def test_the_reason_is_the_first_line_the_plugin_wrote():
    text = "[the first 30 characters are cut]\n[setup]\n\n  max_hbm: peak 2.0MB is over\n  details"
    xdist = "[gw1] linux -- Python 3.11.7 /usr/bin/python3\nleak_check: grew"
    assert github.reason(failing("leak", xdist)) == "leak_check: grew"
    assert github.reason(failing("over budget", text)) == "max_hbm: peak 2.0MB is over"
    assert github.reason(failing("leak", "")) == "leak"


def run(tests, ledger=None, **context):
    return Report({"process_index": 0, "process_count": 1, **context}, tests, ledger=ledger)


def test_the_summary_line_by_line():
    tests = {
        "t.py::over": failing("over budget", "max_hbm: peak 2.0MB on cpu:0 is over the budget of 1.0MB\nmore"),
        "t.py::ok": Entry(peaks={"cpu:0": 3 * MB}, peak=3 * MB, host_peak=200 * MB),
        "t.py::leak": failing("leak", "leak_check: cpu:0 live arrays grew 4.0MB/iteration"),
    }
    ledger = LedgerTests(
        threshold=10 * MB,
        tests={"t.py::leak": {"residue": 16 * MB, "host": {"rss": 300 * MB}}, "t.py::ok": {"residue": 0}},
        host_threshold=100 * MB,
    )
    said = github.summary(run(tests, ledger, stand_in=True), page="out/r.html", annotated=2)
    assert said.splitlines() == [
        "### pytest-tpumem: 3 measured tests, 2 failed a memory check",
        "",
        "leak: 1 · over budget: 1 · ok: 1",
        "",
        "**Failed a memory check**",
        "",
        "- `t.py::leak`: leak_check: cpu:0 live arrays grew 4.0MB/iteration",  # no emphasis inside a word
        "- `t.py::over`: max_hbm: peak 2.0MB on cpu:0 is over the budget of 1.0MB",
        "",
        "Annotated on the tests' lines.",
        "",
        "**Suite ledger: 1 test left 10.0MB or more of the arrays they made alive**",
        "",
        "- 16.0MB `t.py::leak`",
        "",
        "**High-water marks**",
        "",
        "- cpu:0: peak 3.0MB in `t.py::ok`",
        "- (live arrays stood in for device memory: the backend reports no allocator figures)",
        "- host RSS, the runner's process: 300.0MB after `t.py::leak`",
        "",
        "The run's page (HTML, opens offline): `out/r.html`",
        "",  # the next step's summary starts after a blank line
    ]


def test_the_ledgers_tests_are_named_by_the_ledgers_own_rules():
    """What only a failed test's traceback holds is not named (decisions.ledger.named, as the terminal
    and the page say), nor the host growth of the test jax's backend started in (host_named)."""
    made = [{"site": "t.py:3 in test_x", "bytes": 16 * MB, "arrays": 1, "shape": "f32[4000000]"}]
    ledger = LedgerTests(
        threshold=10 * MB,
        host_threshold=100 * MB,
        tests={
            "t.py::traceback_only": {"outcome": "failed", "residue": 16 * MB, "made": made, "traceback": 16 * MB},
            "t.py::kept": {"outcome": "failed", "residue": 16 * MB, "made": made, "traceback": 4 * MB},
            "t.py::started": {"residue": 0, "host": {"grew": 300 * MB, "backend_started": True}},
            "t.py::grew": {"residue": 0, "host": {"grew": 200 * MB}},
        },
    )
    lines = github.summary(run({}, ledger)).splitlines()
    i = lines.index("**Suite ledger: 1 test left 10.0MB or more of the arrays they made alive**")
    assert lines[i + 2 : i + 4] == ["- 12.0MB `t.py::kept`", ""]
    j = lines.index("**Suite ledger: 1 test grew the process's host memory by 100.0MB or more**")
    assert lines[j + 2 :] == ["- 200.0MB `t.py::grew`", ""]


def test_lists_are_capped_and_the_cap_is_said():
    tests = {f"t.py::t{i:02}": failing("leak", f"grew {i}") for i in range(13)}
    lines = github.summary(run(tests), annotated=10).splitlines()
    named = [line for line in lines if line.startswith("- `t.py::")]
    assert len(named) == github.LISTED and named[0] == "- `t.py::t00`: grew 0"
    assert "- ... and 3 more (the JSON report and the page list them all)" in lines
    assert "Annotated on the tests' lines (the first 10 of 13)." in lines


def test_regressions_against_the_baseline_are_listed_and_a_clean_gate_says_so():
    old = run({"t.py::a": Entry(peak=100 * MB, peaks={"cpu:0": 100 * MB})})
    new = run({"t.py::a": Entry(peak=130 * MB, peaks={"cpu:0": 130 * MB})})
    regressed = github.summary(new, compare(old, new, parse_tolerances(["peak:10%"])), "base.json").splitlines()
    i = regressed.index("**Regressed against base.json**")
    assert regressed[i + 2] == (
        "- `t.py::a`: peak 130.0MB, was 100.0MB in base.json (+30.0%, +30.0MB), beyond peak:10%"
    )
    clean = github.summary(old, compare(old, old, parse_tolerances(["peak:10%"])), "base.json")
    assert "Against `base.json`: no regression (1 test compared)" in clean.splitlines()


def test_several_processes_each_name_theirs():
    said = github.summary(run({}, process_index=1, process_count=2))
    assert said.splitlines()[:3] == [
        "### pytest-tpumem (process 1 of 2): 0 measured tests, 0 failed a memory check",
        "",
        "no test was measured",
    ]


def test_annotations_are_workflow_commands_escaped_as_the_toolkit_does(tmp_path):
    failed = [
        ("t.py::a[1,2: 50%]", failing("over budget", "max_hbm: 100% over\nsecond line")),
        ("t.py::b", failing("leak", "grew \x1b[31m")),
        ("t.py::c", failing("oom", "out of device memory")),
    ]
    workspace = str(tmp_path)
    locations = {
        "t.py::a[1,2: 50%]": (str(tmp_path / "tests" / "t,1.py"), 12),
        "t.py::b": ("/elsewhere/t.py", None),
    }
    assert github.annotation_lines(failed, locations, workspace) == [
        "::error file=tests/t%2C1.py,line=12,title=pytest-tpumem%3A over budget::t.py::a[1,2: 50%25]: max_hbm: 100%25 over",
        "::error file=/elsewhere/t.py,title=pytest-tpumem%3A leak::t.py::b: grew \\x1b[31m",
        "::error title=pytest-tpumem%3A oom::t.py::c: out of device memory",
    ]


def test_at_most_ten_annotations():
    failed = [(f"t.py::t{i}", failing("leak", "grew")) for i in range(12)]
    assert len(github.annotation_lines(failed, {}, None)) == github.ANNOTATIONS == 10


def test_a_workspace_that_cannot_hold_the_file_leaves_its_path_as_it_is():
    """A relative $GITHUB_WORKSPACE beside an absolute path (os.path.commonpath raises there) or
    another folder: the file's path as it is, never an error."""
    failed = [("t.py::a", failing("leak", "grew"))]
    for workspace in ("relative/ws", "/elsewhere"):
        assert github.annotation_lines(failed, {"t.py::a": ("/src/t.py", 3)}, workspace) == [
            "::error file=/src/t.py,line=3,title=pytest-tpumem%3A leak::t.py::a: grew"
        ]
    assert github.within("/src/tests/t.py", "/src") == "tests/t.py"
