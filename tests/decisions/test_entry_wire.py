"""The wire format's smaller promises, on hand-built data: an entry's failure written only where
there is one, what each refusal says in full, the ledger's thresholds and a merged report's
processes through JSON and back, and what a ledger line's host growth reads as."""

import json

import pytest

from pytest_tpumem.decisions import entry as entries
from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.errors import ReportError

MB = 10**6


def report(**more):
    return {"schema": entries.SCHEMA, "version": entries.VERSION, "context": {}, "tests": {}, **more}


def again(data):
    return Report.from_json(json.loads(json.dumps(data)), "r.json")


def test_an_entry_says_where_it_failed_only_where_it_did():
    failed = Entry(outcome="failed", failure="E   assert 1 == 2").to_json()
    assert failed["failure"] == "E   assert 1 == 2"
    assert Entry.from_json(failed, "r.json", "t.py::a").failure == "E   assert 1 == 2"
    assert "failure" not in Entry(outcome="passed").to_json()


def test_every_figure_of_an_entry_goes_through_json_and_back():
    e = Entry(
        verdict=Verdict.LEAK,
        outcome="failed",
        peak=30 * MB,
        peaks={"cpu:0": 30 * MB},
        budget=40 * MB,
        witness="body-end",
        growth=12 * MB,
        threshold=10 * MB,
        growth_source="cpu:0 live arrays",
        stand_in=True,
        host_peak=2 * MB,
        checks=({"check": "leak", "verdict": "leak"},),
        failure="E   leak",
    )
    assert Entry.from_json(json.loads(json.dumps(e.to_json())), "r.json", "t.py::a") == e


def test_an_entry_that_is_not_an_object_is_refused_naming_the_test():
    with pytest.raises(ReportError) as e:
        Entry.from_json(["ok"], "r.json", "t.py::a")
    assert str(e.value) == "r.json: test 't.py::a': not an object"


def test_an_unknown_verdict_is_refused_naming_every_verdict():
    with pytest.raises(ReportError) as e:
        Entry.from_json({"verdict": "fine"}, "r.json", "t.py::a")
    assert str(e.value) == (
        "r.json: test 't.py::a': \"verdict\" is 'fine', not one of leak, not judged, ok, oom, over budget, regressed"
    )


def test_a_merged_report_s_processes_go_through_json_and_back():
    processes = ({"process_index": 0, "hostname": "a"}, {"process_index": 1, "hostname": "b"})
    data = Report({"platform": "cpu", "merged_from": 2}, {}, processes).to_json()
    assert again(data).processes == processes
    assert "processes" not in Report({"platform": "cpu"}, {}).to_json()


def test_a_ledger_s_thresholds_go_through_json_and_back_and_default_to_zero():
    ledger = LedgerTests(10 * MB, {}, (), host_threshold=50 * MB)
    data = Report({"platform": "cpu"}, {}, ledger=ledger).to_json()
    assert again(data).ledger == ledger and (again(data).ledger.host_threshold, again(data).ledger.threshold) == (
        50 * MB,
        10 * MB,
    )
    bare = again(report(ledger={"tests": {}})).ledger
    assert (bare.threshold, bare.host_threshold) == (0, 0)


def test_a_ledger_s_host_threshold_is_bytes_from_zero():
    with pytest.raises(ReportError) as e:
        Report.from_json(report(ledger={"host_threshold": -1}), "r.json")
    assert str(e.value) == 'r.json: "ledger" "host_threshold" is -1, not bytes as a whole number from 0 to 2^63-1'


@pytest.mark.parametrize(
    ("host", "grew"),
    [
        ({"grew": 5 * MB}, 5 * MB),
        ({"grew": -MB}, -MB),  # given back
        ({"grew": "5MB"}, None),
        ({"grew": True}, None),
        ({"grew": 5 * MB, "backend_started": True}, None),  # the runtime's own, once a process
        ({"grew": 5 * MB, "backend_started": False}, 5 * MB),
        ({}, None),
        ([5], None),
    ],
)
def test_what_a_test_grew_host_memory_by_is_a_whole_number_or_not_said(host, grew):
    ledger = LedgerTests(tests={"t.py::a": {"residue": 0, "host": host}})
    assert ledger.host_grew("t.py::a") == grew and ledger.host_grew("t.py::b") is None


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"bytes": -1}, '"made"[0] "bytes" is -1, not a whole number from 0 to 2^63-1'),
        ({"arrays": 2**63}, '"made"[0] "arrays" is 9223372036854775808, not a whole number from 0 to 2^63-1'),
        ({"shape": 3}, '"made"[0] "shape" is 3, not text'),
    ],
)
def test_a_ledger_line_s_made_arrays_are_refused_with_the_range_they_miss(part, says):
    line = {"index": 1, "outcome": "passed", "residue": 0, "made": [part]}
    with pytest.raises(ReportError) as e:
        Report.from_json(report(ledger={"tests": {"t.py::a": line}}), "r.json")
    assert str(e.value) == f"r.json: \"ledger\" test 't.py::a': {says}"


def test_the_first_number_past_any_figure_is_named_after_one_just_within():
    data = report(added_later=[-(2**63) + 1, 2**63])
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value).startswith("r.json: added_later[1] is 9223372036854775808: past any figure")


def test_where_no_number_is_past_any_figure_the_place_is_a_question_mark():
    # Report.from_json asks only where _out_of_bounds found one; the place is the function's own answer
    assert entries._where_out_of_bounds({"a": [1, {"b": 2.5}]}) == ("?", None)


def test_a_wire_field_is_a_plain_value_unless_told_and_keeps_its_default():
    plain = entries._wire("a kind", default=3)
    assert plain.default == 3
    assert dict(plain.metadata) == {
        "kind": "a kind",
        "null": False,
        "size": False,
        "signed": False,
        "read": None,
        "write": None,
        "omit_empty": False,
    }
    told = entries._wire("k", null=True, size=True, signed=True, read=int, write=str, omit_empty=True, default=None)
    assert told.default is None
    assert dict(told.metadata) == {
        "kind": "k",
        "null": True,
        "size": True,
        "signed": True,
        "read": int,
        "write": str,
        "omit_empty": True,
    }


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], 'not a pytest-tpumem report (no "schema": "pytest-tpumem-report")'),
        ({**report(), "schema": "other-report"}, 'not a pytest-tpumem report (no "schema": "pytest-tpumem-report")'),
        (report(version=True), "version True is not a whole number"),
        (report(version="2"), "version '2' is not a whole number"),
        (report(context=None), '"context" is missing or not an object'),
        (report(processes={}), '"processes" is not a list of objects'),
        (report(processes=[{}, 1]), '"processes" is not a list of objects'),
        (report(tests=[]), '"tests" is missing or not an object'),
        (report(tests={"t.py::a": {"verdict": "ok", "peak": "1"}}), "test 't.py::a': \"peak\" is '1', not bytes"),
        (report(context={"devices": ["cpu:0", 0]}), 'context "devices" is not a list of text'),
        (report(context={"versions": {"jax": 10}}), 'context "versions" is not an object of text'),
        (report(context={"env": {"XLA_FLAGS": ["--x"]}}), 'context "env" is not an object of text'),
        (report(processes=[{"env": {"A": 1}}]), 'processes[0] "env" is not an object of text'),
    ],
)
def test_a_report_that_is_not_one_is_refused_saying_what_is_wrong(data, says):
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value).startswith(f"r.json: {says}")


def test_a_context_s_versions_and_env_may_say_nothing_of_a_key():
    data = report(context={"versions": {"jax": "0.10.2", "libtpu": None}, "env": {"XLA_FLAGS": None}})
    assert Report.from_json(data, "r.json").context["versions"] == {"jax": "0.10.2", "libtpu": None}


def test_a_crashed_worker_s_words_are_a_list_not_one_text():
    with pytest.raises(ReportError) as e:
        Report.from_json(report(ledger={"crashed": [{"worker": "gw0", "said": "tpumem: gone"}]}), "r.json")
    assert str(e.value) == 'r.json: "ledger" "crashed"[0] "said" is \'tpumem: gone\', not a list'


def test_a_context_s_git_is_a_commit_and_whether_it_was_dirty():
    assert Report.from_json(report(context={"git": {"commit": "abc123", "dirty": None}}), "r.json")
    with pytest.raises(ReportError) as e:
        Report.from_json(report(context={"git": {"commit": "abc123", "dirty": "no"}}), "r.json")
    assert str(e.value) == 'r.json: context "git" is not {"commit": text, "dirty": true, false or null}'


def test_a_context_s_bytes_limit_is_bytes_from_zero():
    assert Report.from_json(report(context={"bytes_limit": 0}), "r.json").context["bytes_limit"] == 0
    assert Report.from_json(report(context={"bytes_limit": 2**63 - 1}), "r.json").context["bytes_limit"] == 2**63 - 1
    with pytest.raises(ReportError) as e:
        Report.from_json(report(context={"bytes_limit": -1}), "r.json")
    assert str(e.value) == 'r.json: context "bytes_limit" is -1, not bytes from 0 to 2^63-1'


@pytest.mark.parametrize(
    "key", ["process_index", "process_count", "device_count", "merged_from", "xdist_workers", "pid"]
)
def test_a_context_s_counts_are_from_zero_to_two_to_the_31(key):
    assert Report.from_json(report(context={key: 2**31}), "r.json").context[key] == 2**31
    assert Report.from_json(report(context={key: 0}), "r.json").context[key] == 0
    for value in (-1, 2**31 + 1):
        with pytest.raises(ReportError) as e:
            Report.from_json(report(context={key: value}), "r.json")
        assert str(e.value) == f'r.json: context "{key}" is {value}, out of range'


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        (Entry(peaks={"cpu:0": 30 * MB, "cpu:1": 10 * MB}, budget=40 * MB), (5, -0.75, -30 * MB)),
        (Entry(peaks={"cpu:0": 30 * MB}), (5, 0.0, -30 * MB)),  # no budget: no ratio
        (Entry(peaks={"cpu:0": 30 * MB}, budget=40 * MB, growth=9 * MB, threshold=10 * MB), (5, -0.9, -30 * MB)),
        (Entry(growth=5 * MB), (5, 0.0, 0)),  # no threshold: no ratio
        (Entry(threshold=10 * MB), (5, 0.0, 0)),  # no growth: none
        (Entry(), (5, 0.0, 0)),
        (Entry(verdict=Verdict.OOM, peaks={"cpu:0": MB}, budget=MB), (0, -1.0, -MB)),
    ],
)
def test_the_order_of_the_summary_is_the_verdict_then_the_nearest_to_its_limit_then_the_peak(entry, key):
    assert entry.worst_first() == key
