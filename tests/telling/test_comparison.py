"""The text of a comparison and of a report, from reports built by hand (the ``wire`` fixture)."""

from pytest_tpumem.decisions.compare import compare, parse_tolerances
from pytest_tpumem.telling.comparison import comparison_lines, report_lines
from pytest_tpumem.telling.report import build

MB = 10**6


def lines_of(old, new, *tolerances, top=None):
    return comparison_lines(compare(old, new, parse_tolerances(tolerances)), "base.json", top=top)


def test_a_regression_is_a_row_with_both_figures_the_change_and_the_tolerance_broken(wire):
    old = wire.report({"t.py::a": [wire.peak(100 * MB)], "t.py::b": [wire.peak(50 * MB)]})
    new = wire.report({"t.py::a": [wire.peak(130 * MB)], "t.py::b": [wire.peak(51 * MB)]})
    lines = lines_of(old, new, "peak:10%")
    header, first, second = lines[:3]
    assert header.split() == ["figure", "old", "new", "change", "bytes", "judged", "test"]
    assert first.split() == [
        "peak",
        "100.0MB",
        "130.0MB",
        "+30.0%",
        "+30.0MB",
        "REGRESSED",
        "beyond",
        "peak:10%",
        "t.py::a",
    ]
    assert second.split() == ["peak", "50.0MB", "51.0MB", "+2.0%", "+1.0MB", "-", "t.py::b"]
    assert first.index("t.py::a") == second.index("t.py::b") == header.index("test")  # aligned
    assert lines[-1] == "2 figures changed against base.json, 1 regressed beyond a tolerance"


def test_changes_without_a_tolerance_are_shown_and_not_judged(wire):
    lines = lines_of(wire.report({"t.py::a": [wire.leak(0)]}), wire.report({"t.py::a": [wire.leak(3 * MB)]}))
    assert lines[1].split() == ["growth", "0B", "3.0MB", "-", "+3.0MB", "-", "t.py::a"]
    assert lines[-1] == "1 figure changed against base.json"


def test_improvements_are_said(wire):
    lines = lines_of(
        wire.report({"t.py::a": [wire.peak(100 * MB)]}), wire.report({"t.py::a": [wire.peak(60 * MB)]}), "peak:10%"
    )
    assert lines[1].split()[3:] == ["-40.0%", "-40.0MB", "improved", "t.py::a"]
    assert lines[-1].endswith("1 improved")


def test_new_and_missing_tests_are_listed(wire):
    old = wire.report({"t.py::kept": [wire.peak(1)], "t.py::gone": [wire.peak(1)]})
    new = wire.report({"t.py::kept": [wire.peak(1)], "t.py::added": [wire.peak(1)]})
    assert lines_of(old, new) == [
        "new, not in base.json:",
        "  t.py::added",
        "missing, in base.json but not measured:",
        "  t.py::gone",
        "0 figures changed against base.json, 1 new, 1 missing",
    ]


def test_a_foreign_baseline_is_said_in_one_line_and_its_regressions_are_not_judged(wire):
    old = wire.report({"t.py::a": [wire.peak(100 * MB)]}, platform="tpu", device_kind="TPU v5 lite")
    lines = lines_of(old, wire.report({"t.py::a": [wire.peak(200 * MB)]}), "peak:10%")
    assert (
        lines[0]
        == "WARNING: base.json is not comparable: it was taken on platform 'tpu', this run is on 'cpu'; changes are shown, none fails"
    )
    assert "REGRESSED" not in "\n".join(lines) and "beyond peak:10%, not judged" in lines[2]
    assert "regressed" not in lines[-1]


def test_top_caps_the_changes_and_the_lists(wire):
    old = wire.report({f"t.py::{i}": [wire.peak(100 * MB)] for i in range(5)})
    new = wire.report(
        {
            **{f"t.py::{i}": [wire.peak(200 * MB)] for i in range(5)},
            **{f"t.py::new{i}": [wire.peak(1)] for i in range(3)},
        }
    )
    lines = lines_of(old, new, "peak:10%", top=2)
    assert "... and 3 more changes" in lines and "  ... and 1 more" in lines
    assert sum("REGRESSED" in line for line in lines) == 2
    assert lines[-1].startswith("5 figures changed against base.json, 5 regressed")


def test_report_lines_give_the_context_and_the_tests_worst_first(wire):
    r = wire.report(
        {
            "t.py::fine": [wire.peak(10 * MB, budget=100 * MB)],
            "t.py::leaks": [wire.peak(5 * MB), wire.leak(200 * MB, verdict="leak")],
            "t.py::near": [wire.peak(90 * MB, budget=100 * MB)],
            "t.py::over": [wire.peak(2_000 * MB, budget=1_000 * MB, verdict="over budget")],
        },
        device_count=2,
        versions={"python": "3.12.1", "jax": "0.6.0"},
        git={"commit": "abc123", "dirty": True},
    )
    lines = report_lines(r)
    assert lines[:4] == [
        "platform cpu, device kind cpu, 2 devices",
        "versions: python 3.12.1, jax 0.6.0",
        "git commit abc123 (work tree modified)",
        "process 0 of 1 on h, started 2025-05-01T10:00:00+00:00",
    ]
    table = lines[5:-1]
    assert table[0].split() == ["verdict", "peak", "budget", "growth/iter", "test"]
    assert [row.split()[-1] for row in table[1:]] == ["t.py::leaks", "t.py::over", "t.py::near", "t.py::fine"]
    assert table[2].split() == ["over", "budget", "2.0GB", "1.0GB", "-", "t.py::over"]
    assert table[1].split() == ["leak", "5.0MB", "-", "200.0MB", "t.py::leaks"]
    assert lines[-1] == "4 measured, 2 failed a memory check"


def test_report_lines_of_an_empty_report_of_unknown_context():
    assert report_lines(build({}, {})) == [
        "platform ?, device kind ?",
        "process ? of ?, started ?",
        "",
        "no test measured",
        "0 measured, 0 failed a memory check",
    ]


def test_the_summary_lists_changes_of_a_megabyte_or_more_and_counts_the_rest(wire):
    old = wire.report({"t.py::tiny": [wire.peak(200)], "t.py::big": [wire.peak(100 * MB)]})
    new = wire.report({"t.py::tiny": [wire.peak(204)], "t.py::big": [wire.peak(103 * MB)]})
    lines = comparison_lines(compare(old, new), "base.json", floor=MB)
    text = "\n".join(lines)
    assert "t.py::big" in text and "t.py::tiny" not in text
    assert "1 smaller change (under 1.0MB) not listed: python -m pytest_tpumem compare lists every one" in lines
    assert "t.py::tiny" in "\n".join(comparison_lines(compare(old, new), "base.json"))  # the CLI lists all
