"""What a report is written as (telling.report: build, dumps, write, process_path), what it keeps
of a failed test's text, and the line a narrowed run's baseline says, in process."""

import json
import math
from types import SimpleNamespace

import pytest

from pytest_tpumem.decisions.entry import Entry, LedgerTests
from pytest_tpumem.telling import report as reports

MB = 10**6


def test_build_keeps_the_tests_the_processes_and_the_ledger(wire):
    tests = {"t.py::b": Entry.of([wire.peak(MB)], "passed"), "t.py::a": Entry.of([wire.peak(2 * MB)], "passed")}
    ledger = LedgerTests(MB, {"t.py::a": {"residue": 0}})
    processes = iter([wire.context(), wire.context(process_index=1, pid=2)])
    built = reports.build(tests, wire.context(), processes, ledger)
    assert list(built.tests) == ["t.py::b", "t.py::a"]  # the order they ran
    assert built.processes == (wire.context(), wire.context(process_index=1, pid=2)) and built.ledger is ledger
    tests.clear()
    assert len(built.tests) == 2  # its own copy
    assert reports.build({}, {}).ledger is None and reports.build({}, {}).processes == ()


def test_dumps_writes_the_schema_first_one_space_deep_and_ends_the_line(wire):
    text = reports.dumps(reports.build({"t.py::a": Entry.of([wire.peak(MB)], "passed")}, wire.context()))
    assert isinstance(text, bytes) and text.endswith(b"}\n") and not text.endswith(b"\n\n")
    lines = text.decode().splitlines()
    assert lines[:3] == ["{", f' "schema": "{reports.SCHEMA}",', f' "version": {reports.VERSION},']
    assert lines[3] == ' "context": {' and lines[4].startswith('  "platform"')  # as built, not sorted


def test_dumps_refuses_a_figure_json_does_not_allow(wire):
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        reports.dumps(reports.build({}, wire.context(bytes_limit=math.nan)))


def test_write_puts_the_whole_report_in_the_file(tmp_path, wire):
    built = reports.build({"t.py::a": Entry.of([wire.peak(MB)], "passed")}, wire.context())
    path = tmp_path / "r.json"
    reports.write(built, str(path))
    assert path.read_bytes() == reports.dumps(built)
    assert json.loads(path.read_text())["summary"] == {"measured": 1, "failed": 0}


@pytest.mark.parametrize(
    ("path", "index", "count", "named"),
    [
        ("out/report.json", 0, 1, "out/report.json"),
        ("report.json", 0, 0, "report.json"),
        ("report.json", 1, 2, "report.process-1-of-2.json"),
        ("out/report", 0, 2, "out/report.process-0-of-2.json"),
        ("report.txt", 2, 3, "report.process-2-of-3.txt"),
    ],
)
def test_each_process_of_several_writes_its_own_file(path, index, count, named):
    assert reports.process_path(path, index, count) == named


def test_a_narrowed_baseline_says_how_many_tests_it_kept():
    assert reports.baseline_kept("b.json", 1, "-k fast") == (
        "tpumem: the baseline b.json keeps 1 test of the last one that this run did not run "
        "(-k fast): a narrowed run replaces only the tests it ran"
    )
    assert reports.baseline_kept("b.json", 2, "-k fast").startswith("tpumem: the baseline b.json keeps 2 tests of ")
    assert " keeps 0 tests of " in reports.baseline_kept("b.json", 0, "x")


def phase(when, text=""):
    """What failure_text reads of pytest's report of one phase."""
    return SimpleNamespace(when=when, longreprtext=text)


def test_a_failed_call_is_its_text_and_another_phase_is_named():
    assert reports.failure_text("", phase("call", "E  boom")) == "E  boom"
    assert reports.failure_text("", phase("setup", "E  boom")) == "[setup]\nE  boom"
    assert reports.failure_text("", phase("teardown")) == "[teardown]\nteardown: failed"
    assert reports.failure_text("", phase("call")) == "call: failed"


def test_a_later_phase_follows_what_earlier_phases_said():
    assert reports.failure_text("E  boom", phase("teardown", "E  again")) == "E  boom\n\n[teardown]\nE  again"


def test_a_long_text_keeps_its_end_and_says_what_was_cut():
    limit = reports.FAILURE_CHARS
    assert limit == 20_000
    whole = "a" * (limit - 1) + "E"
    assert reports.failure_text("", phase("call", whole)) == whole
    longer = "b" + whole
    assert reports.failure_text("", phase("call", longer)) == "[the first 1 characters are cut]\n" + whole
    kept = reports.failure_text("x" * 30_000, phase("call", "E  boom"))
    assert kept.startswith("[the first 10009 characters are cut]\n") and kept.endswith("x\n\nE  boom")
    assert len(kept) == limit + len("[the first 10009 characters are cut]\n")


def test_merged_ledgers_keep_the_first_line_of_a_test_where_residues_are_equal():
    """A test two processes both ran keeps the larger residue's line; of equal residues, the first's."""
    one = LedgerTests(MB, {"t.py::a": {"residue": 5, "outcome": "passed"}}, host_threshold=3 * MB)
    two = LedgerTests(2 * MB, {"t.py::a": {"residue": 5, "outcome": "failed"}}, host_threshold=MB)
    merged = reports.merged_ledgers([one, two])
    assert merged.tests == {"t.py::a": {"residue": 5, "outcome": "passed"}}
    assert (merged.threshold, merged.host_threshold) == (2 * MB, 3 * MB)
