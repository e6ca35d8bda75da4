"""The run's page (telling.html.page) built in process from hand-made reports, no browser: what it
takes from a report is escaped, the ledger's table lists the largest residues first (and its cut
keeps those), and its counts name what tests left, not what they made."""

import os
import sys

from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.telling.html import LEDGER_ROWS, page

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import pagedata  # noqa: E402

MB = 10**6
MARKUP = "<script>alert(1)</script><b>&"
SHOWN = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;&amp;"


def _ledger_page(tests, crashed=(), threshold=10 * MB):
    return page(Report({"devices": "cpu"}, {}, ledger=LedgerTests(threshold, tests, tuple(crashed))))


def _ledger_rows(html):
    """The test ids of the ledger's table, in the order it lists them."""
    return [r[0] for r in pagedata.ledger_rows(html)]


def test_a_crashed_workers_test_id_and_last_words_are_shown_escaped():
    crash = {"worker": "gw0", "test": f"t.py::test_x[{MARKUP}]", "said": [f"said {MARKUP}"]}
    html = _ledger_page({}, [crash])
    assert f'<h3 class="v-bad">worker gw0 crashed in t.py::test_x[{SHOWN}]</h3><pre>said {SHOWN}</pre>' in html
    assert "<script>alert" not in html and "<b>" not in html


def test_an_out_of_memory_errors_text_is_shown_escaped():
    error = f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.0GB {MARKUP}"
    entry = Entry(
        verdict=Verdict.OOM,
        outcome="failed",
        checks=({"check": "oom", "verdict": "oom", "budget": None, "error": error},),
    )
    html = page(Report({"devices": "cpu"}, {"t.py::test_oom": entry}))
    assert (
        f"<h3>out of memory</h3><pre>RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.0GB {SHOWN}</pre>"
        in pagedata.section(html, "t.py::test_oom")
    )
    assert "<script>alert" not in html and "<b>" not in html


def test_the_ledgers_table_lists_the_largest_residues_first_and_its_cut_keeps_them():
    """One test more than the table holds: the one with the smallest residue is the one left out;
    equal residues in the order of their ids."""
    tests = {f"t.py::test_{i:05d}": {"residue": i * 1000, "left": 0, "outcome": "passed"} for i in range(LEDGER_ROWS)}
    tests["t.py::test_tie"] = {"residue": (LEDGER_ROWS - 1) * 1000, "left": 0, "outcome": "passed"}
    html = _ledger_page(tests)
    rows = _ledger_rows(html)
    top = f"t.py::test_{LEDGER_ROWS - 1:05d}"
    assert rows[:3] == [top, "t.py::test_tie", f"t.py::test_{LEDGER_ROWS - 2:05d}"]
    assert len(rows) == LEDGER_ROWS and "t.py::test_00000" not in rows and rows[-1] == "t.py::test_00001"
    assert f"the {LEDGER_ROWS} largest residues of {LEDGER_ROWS + 1} tests are listed" in html


def test_the_count_of_tests_named_counts_what_they_left_not_their_residue():
    """A failed test's traceback keeping most of its residue leaves less than the threshold: not
    counted; one that left exactly the threshold is."""
    tests = {
        "t.py::test_kept_by_its_traceback": {"residue": 20 * MB, "left": 5 * MB, "traceback": 15 * MB},
        "t.py::test_at_the_threshold": {"residue": 10 * MB, "left": 10 * MB},
        "t.py::test_small": {"residue": 9 * MB, "left": 9 * MB},
    }
    html = _ledger_page(tests)
    assert '<span>3 tests in the suite ledger</span><span class="v-bad">1 left 10.0MB or more</span>' in html
    html = _ledger_page({"t.py::test_kept_by_its_traceback": tests["t.py::test_kept_by_its_traceback"]})
    assert '<span class="v-ok">0 left 10.0MB or more</span>' in html
