"""Rows (what travels to the xdist controller) and the summary table, from rows built by hand."""

import json

from pytest_tpumem.decisions.budget import Budget, BudgetResult
from pytest_tpumem.decisions.entry import Entry
from pytest_tpumem.decisions.leak import LeakReport, Series
from pytest_tpumem.decisions.peak import DevicePeak, PeakReport
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.telling.results import row
from pytest_tpumem.telling.rows import summary_lines

MB = 10**6


def budget_row(peak, limit, witness="body-end"):
    d = DevicePeak("cpu:0", 0, peak, witness, {witness: peak}, None, True)
    return row(BudgetResult(PeakReport({"cpu:0": d}, None), Budget(limit, "s") if limit else None))


def leak_row(growth, threshold=10 * MB):
    s = Series("cpu:0 live arrays", "cpu:0", (0, growth, 2 * growth, 3 * growth))
    return row(LeakReport(3, 1, threshold, (s,)))


def test_rows_are_plain_json_with_the_verdict_as_text():
    rows = [budget_row(40 * MB, 30 * MB), leak_row(16 * MB)]
    assert json.loads(json.dumps(rows)) == rows and [r["verdict"] for r in rows] == ["over budget", "leak"]
    entry = Entry.of(rows)
    assert entry.verdict == "leak"  # the worst of over budget and leak
    assert entry.peaks == {"cpu:0": 40 * MB} and entry.budget == 30 * MB and entry.growth == 16 * MB
    assert Entry.from_json(json.loads(json.dumps(entry.to_json())), "r.json", "t") == entry  # both ways


def test_merge_keeps_the_largest_growth_and_every_peak():
    row = Entry.of(
        [
            leak_row(16 * MB),
            leak_row(2 * MB),
            {"verdict": "ok", "peaks": {"v5e:2x2": 5}, "witness": "compiled for v5e:2x2"},
        ]
    )
    assert row.growth == 16 * MB
    assert row.peaks == {"v5e:2x2": 5}
    both = Entry.of([budget_row(1, 10), {"verdict": "ok", "peaks": {"v5e:2x2": 5}, "witness": "compiled for v5e:2x2"}])
    assert both.peaks == {"cpu:0": 1, "v5e:2x2": 5} and both.witness == "body-end; compiled for v5e:2x2"


def test_verdict_order_is_worst_first():
    assert [v.value for v in sorted(Verdict, key=lambda v: v.rank)] == [
        "oom",
        "leak",
        "over budget",
        "regressed",
        "not judged",
        "ok",
    ]
    assert Verdict.worst([Verdict.OK, Verdict.LEAK, Verdict.OVER_BUDGET]) is Verdict.LEAK
    assert not Verdict.OK.failed and Verdict.NOT_JUDGED.failed


def test_summary_worst_first_then_closest_to_its_budget():
    rows = {
        "t.py::test_ok_far": Entry.of([budget_row(10 * MB, 100 * MB)]),
        "t.py::test_ok_close": Entry.of([budget_row(90 * MB, 100 * MB)]),
        "t.py::test_over": Entry.of([budget_row(40 * MB, 30 * MB)]),
        "t.py::test_leak": Entry.of([budget_row(1, None), leak_row(16 * MB)]),
    }
    lines = summary_lines(rows, top=20, quiet=False)
    assert lines[0].split() == ["verdict", "peak", "per", "device", "budget", "growth/iter", "source", "test"]
    assert [line.split()[-1] for line in lines[1:5]] == [
        "t.py::test_leak",
        "t.py::test_over",
        "t.py::test_ok_close",
        "t.py::test_ok_far",
    ]
    assert lines[-1].startswith("4 measured, 2 failed a memory check; live arrays stand in")


def test_summary_quiet_top_and_tests_skipped_without_libtpu():
    rows = {f"t.py::test_{i}": Entry.of([budget_row(i * MB, 5 * MB)]) for i in range(1, 9)}
    quiet = summary_lines(rows, top=20, quiet=True, skipped_without_libtpu=2)
    assert len(quiet) == 1 + 3 + 1  # the header row, the three over budget, the totals
    assert (
        "8 measured, 3 failed a memory check; 2 budgeted tests skipped, not judged on the TPU target: no libtpu"
        in quiet[-1]
    )
    top = summary_lines(rows, top=2, quiet=False)
    assert len(top) == 1 + 2 + 1 and "(showing 2, see --tpumem-top)" in top[-1]


def test_a_summary_without_a_measured_test_says_why_instead_of_counting_zeros():
    """A run compared with a baseline (the ledger's residues) but measuring no test printed
    "0 measured, 0 failed a memory check" above the comparison: true, and no help."""
    assert summary_lines({}, top=20, quiet=False) == [
        "no test was measured: none has a max_hbm or leak_check marker, and neither --tpumem-max-hbm nor "
        "--tpumem-leak-check=all applies"
    ]
    assert summary_lines({}, top=20, quiet=False, skipped_without_libtpu=1)[-1].startswith("0 measured, 0 failed")
