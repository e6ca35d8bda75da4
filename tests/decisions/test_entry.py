"""The wire format as data: a test's entry and a report, both ways through JSON, and the keys a
newer writer may add kept rather than lost."""

import json

import pytest

from pytest_tpumem.decisions import entry as entries
from pytest_tpumem.decisions.entry import Entry, Report, merged_entries
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.errors import ReportError

MB = 10**6


def test_an_entry_of_the_least_a_report_may_hold_reads_with_its_defaults():
    e = Entry.from_json({"verdict": "leak"}, "r.json", "t.py::a")
    assert e == Entry(verdict=Verdict.LEAK) and e.peak is None and e.peaks == {} and e.checks == ()


def test_a_report_goes_through_json_and_back_unchanged_with_a_key_it_does_not_know():
    entry = Entry.of([{"check": "budget", "verdict": "ok", "peaks": {"cpu:0": 3 * MB}, "budget": 4 * MB}], "passed")
    data = Report({"platform": "cpu"}, {"t.py::a": entry}).to_json()
    data["tests"]["t.py::a"]["residue"] = 7  # added by a newer pytest-tpumem within the version
    again = Report.from_json(json.loads(json.dumps(data)), "r.json")
    assert again.tests["t.py::a"].peak == 3 * MB and again.tests["t.py::a"].extra == {"residue": 7}
    assert again.to_json() == data and data["summary"] == {"measured": 1, "failed": 0}


def test_merged_entries_keep_the_worst_and_the_largest_and_name_a_shared_device_by_process():
    a = Entry(outcome="passed", peak=5, peaks={"cpu:0": 5}, growth=1)
    b = Entry(verdict=Verdict.LEAK, outcome="failed", peak=3, peaks={"cpu:0": 3}, growth=9)
    m = merged_entries([(0, a), (1, b)])
    assert (m.verdict, m.outcome, m.peak, m.growth) == (Verdict.LEAK, "failed", 5, 9)
    assert m.peaks == {"cpu:0": 5, "p1:cpu:0": 3}


@pytest.mark.parametrize(
    ("outcomes", "merged"),
    [
        (("passed", "skipped"), "passed"),
        (("skipped", "passed"), "passed"),
        (("skipped", "failed", "passed"), "failed"),
        (("", "skipped"), "skipped"),
        (("", ""), ""),
    ],
)
def test_a_test_run_in_one_process_and_skipped_in_another_merges_as_run(outcomes, merged):
    """A test's outcome over several processes: failed wherever one failed, else passed where one
    ran it, else skipped; unknown ("") last."""
    given = [(i, Entry(outcome=o, peaks={f"cpu:{i}": 1})) for i, o in enumerate(outcomes)]
    assert merged_entries(given).outcome == merged


@pytest.mark.parametrize(
    "entry, says",
    [
        ({}, '"verdict" is missing or not text'),
        ({"verdict": "fine"}, "\"verdict\" is 'fine', not one of"),
        ({"verdict": "ok", "peak": -1}, '"peak" is -1, not bytes as a whole number from 0 to 2^63-1'),
        ({"verdict": "ok", "growth": -(2**63)}, "from -2^63+1 to 2^63-1"),
        ({"verdict": "ok", "peaks": {"cpu:0": "1"}}, '"peaks" is not an object of whole numbers of bytes'),
        ({"verdict": "ok", "stand_in": 1}, '"stand_in" is 1, not true or false'),
    ],
)
def test_a_bad_entry_is_refused_naming_the_file_the_test_and_the_key(entry, says):
    with pytest.raises(ReportError) as e:
        Entry.from_json(entry, "r.json", "t.py::a")
    assert str(e.value).startswith("r.json: test 't.py::a':") and says in str(e.value)


WRONG = {"text": 5, "a whole number": "5", "true or false": "yes", "an object": [], "a list": {}}


@pytest.mark.parametrize("key", sorted(entries._ENTRY))
def test_every_key_of_an_entry_of_the_wrong_type_is_refused_by_name(key):
    kind, _ = entries._ENTRY[key]
    entry = {"verdict": "ok", key: WRONG[kind]}
    with pytest.raises(ReportError) as e:
        Entry.from_json(entry, "r.json", "t.py::a")
    assert str(e.value).startswith(f"r.json: test 't.py::a': \"{key}\" is ")


# Written out, not read from the code's table: the keys docs/report-schema.md lets be null (not known).
NULLABLE = {"peak", "budget", "growth", "threshold", "host_peak"}


@pytest.mark.parametrize(
    "key", ["outcome", "peaks", "witness", "growth_source", "stand_in", "checks", "failure", *sorted(NULLABLE)]
)
def test_null_is_read_as_not_known_only_where_a_figure_may_be_unknown(key):
    entry = {"verdict": "ok", key: None}
    if key in NULLABLE:
        assert getattr(Entry.from_json(entry, "r.json", "t.py::a"), key) is None
        return
    with pytest.raises(ReportError) as e:
        Entry.from_json(entry, "r.json", "t.py::a")
    assert str(e.value).startswith(f"r.json: test 't.py::a': \"{key}\" is None, not ")


@pytest.mark.parametrize("key", sorted(entries._CONTEXT))
def test_every_key_of_a_context_of_the_wrong_type_is_refused_by_name(key):
    kind, _ = entries._CONTEXT[key]
    data = {"schema": entries.SCHEMA, "version": entries.VERSION, "context": {key: WRONG[kind]}, "tests": {}}
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value) == f'r.json: context "{key}" is {WRONG[kind]!r}, not {kind}'


@pytest.mark.parametrize("key", sorted(entries._CONTEXT))
def test_every_key_of_a_process_s_context_of_the_wrong_type_is_refused_by_name(key):
    """A merged report keeps each process's context under "processes": each is checked as the top
    one is (merge and show read them), and the refusal names which."""
    kind, _ = entries._CONTEXT[key]
    processes = [{"process_index": 0}, {key: WRONG[kind]}]
    data = {"schema": entries.SCHEMA, "version": entries.VERSION, "context": {}, "processes": processes, "tests": {}}
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value) == f'r.json: processes[1] "{key}" is {WRONG[kind]!r}, not {kind}'


def test_a_process_s_index_out_of_range_is_refused_naming_the_process():
    data = {"schema": entries.SCHEMA, "version": entries.VERSION, "context": {}, "tests": {}}
    assert Report.from_json({**data, "processes": [{"process_index": 2**31}]}, "r.json").processes
    with pytest.raises(ReportError, match=r'^r\.json: processes\[0\] "process_index" is -1, out of range$'):
        Report.from_json({**data, "processes": [{"process_index": -1}]}, "r.json")


def test_a_report_of_this_version_is_read_and_of_the_next_refused():
    data = {"schema": entries.SCHEMA, "version": entries.VERSION, "context": {}, "tests": {}}
    assert Report.from_json(data, "r.json").version == entries.VERSION
    with pytest.raises(ReportError, match=f"schema version {entries.VERSION + 1} is newer than this pytest-tpumem"):
        Report.from_json({**data, "version": entries.VERSION + 1}, "r.json")


@pytest.mark.parametrize(
    "key, value, ok",
    [
        ("peak", 2**63 - 1, True),
        ("peak", 2**63, False),
        ("peak", 0, True),
        ("growth", -(2**63) + 1, True),  # memory given back
        ("growth", -(2**63), False),
        ("budget", -1, False),
    ],
)
def test_sizes_at_their_bounds(key, value, ok):
    entry = {"verdict": "ok", key: value}
    if ok:
        assert getattr(Entry.from_json(entry, "r.json", "t"), key) == value
    else:
        with pytest.raises(ReportError, match=f'"{key}" is '):
            Entry.from_json(entry, "r.json", "t")


def test_a_tests_verdict_is_the_worst_of_its_checks_in_any_order():
    leak, ok, over = (
        {"check": "leak", "verdict": "leak"},
        {"check": "peak", "verdict": "ok"},
        {"verdict": "over budget"},
    )
    assert Entry.of([leak, ok]).verdict is Entry.of([ok, leak]).verdict is Verdict.LEAK
    assert Entry.of([over, ok, leak]).verdict is Verdict.LEAK and Entry.of([ok, over]).verdict is Verdict.OVER_BUDGET
    assert Entry.of([]).verdict is Verdict.OK


def test_a_tests_budget_is_the_first_its_checks_gave():
    """A test's records (its budget's check first, then a target's, a marker's, a fixture's calls)
    keep the first budget given; a record with none (a peak's) gives none."""
    peak = {"check": "peak", "verdict": "ok", "budget": None, "peaks": {"cpu:0": MB}}
    first = {"check": "budget", "verdict": "ok", "budget": 10 * MB, "peaks": {"cpu:0": MB}}
    later = {"check": "budget", "verdict": "ok", "budget": 20 * MB, "peaks": {"v5e:2x2": MB}}
    assert Entry.of([peak, first, later]).budget == 10 * MB
    assert Entry.of([later, first]).budget == 20 * MB and Entry.of([peak]).budget is None


def _ledger(tests, threshold=10 * MB, crashed=()):
    return entries.LedgerTests(threshold, tests, tuple(crashed))


def test_a_reports_ledger_goes_through_json_and_back():
    ledger = _ledger(
        {"t.py::a": {"outcome": "passed", "residue": 64 * MB, "left": 64 * MB, "compiled": 1}},
        crashed=[{"worker": "gw0", "test": "t.py::b", "said": ["tpumem: gw0's flight recorder ..."]}],
    )
    data = Report({"platform": "cpu"}, {}, ledger=ledger).to_json()
    again = Report.from_json(json.loads(json.dumps(data)), "r.json")
    assert again.ledger == ledger and again.ledger.residue("t.py::a") == 64 * MB and again.ledger.residue("x") is None
    assert "ledger" not in Report({"platform": "cpu"}, {}).to_json()  # a run without the ledger says nothing of it


@pytest.mark.parametrize(
    ("ledger", "says"),
    [
        ([], '"ledger" is not an object'),
        ({"threshold": -1}, '"ledger" "threshold" is -1, not bytes'),
        ({"tests": []}, '"ledger" "tests" is not an object'),
        ({"tests": {"t.py::a": {"residue": -5}}}, '"ledger" test \'t.py::a\': "residue" is -5, not bytes'),
        ({"tests": {"t.py::a": {"residue": "64MB"}}}, "\"ledger\" test 't.py::a': \"residue\" is '64MB', not bytes"),
        ({"tests": {"t.py::a": 7}}, '"ledger" test \'t.py::a\': "residue" is None, not bytes'),
        ({"crashed": {}}, '"ledger" "crashed" is not a list of objects'),
    ],
)
def test_a_bad_ledger_is_refused_naming_the_file_and_the_key(ledger, says):
    data = Report({"platform": "cpu"}, {}).to_json() | {"ledger": ledger}
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value).startswith(f"r.json: {says}")


def test_merged_ledgers_keep_every_test_the_larger_residue_and_every_crash():
    from pytest_tpumem.telling.report import merged_ledgers

    one = _ledger({"a": {"residue": 5}, "b": {"residue": 9}}, crashed=[{"worker": "gw0", "test": "c", "said": []}])
    two = _ledger({"b": {"residue": 11}, "d": {"residue": 0}}, threshold=20 * MB)
    merged = merged_ledgers([one, two])
    assert merged == _ledger(
        {"a": {"residue": 5}, "b": {"residue": 11}, "d": {"residue": 0}},
        threshold=20 * MB,
        crashed=[{"worker": "gw0", "test": "c", "said": []}],
    )
    assert merged_ledgers([]) is None


def _with_line(**keys):
    """A report whose ledger has one line: a residue and ``keys``."""
    line = {"index": 1, "outcome": "passed", "residue": 0, **keys}
    return Report({"platform": "cpu"}, {}).to_json() | {"ledger": {"threshold": MB, "tests": {"t.py::a": line}}}


LINE = "\"ledger\" test 't.py::a': "


@pytest.mark.parametrize(
    "keys, says",
    [
        ({"left": 2**63 - 1}, None),
        ({"left": 2**63}, '"left" is 9223372036854775808, not a whole number from 0 to 2^63-1'),
        ({"left": 10**400}, '"left" is 100000000000000000000000000000... (401 characters), not a whole number'),
        ({"left": -1}, '"left" is -1, not a whole number from 0'),
        ({"left": True}, '"left" is True, not a whole number'),  # a bool where an int is meant
        ({"index": 0, "executables": None, "compiled": 0}, None),
        ({"executables": 2**63}, '"executables" is 9223372036854775808, not a whole number'),
        ({"executables": False}, '"executables" is False, not a whole number'),
        ({"compiled": "3"}, "\"compiled\" is '3', not a whole number"),
        ({"outside": -(2**63) + 1}, None),  # memory no array holds, given back
        ({"outside": -(2**63)}, '"outside" is -9223372036854775808, not a whole number from -2^63+1 to 2^63-1'),
        ({"devices": {"cpu:0": 2**63 - 1}}, None),
        ({"devices": {"cpu:0": 2**63}}, "\"devices\" 'cpu:0' is 9223372036854775808, not a whole number from 0"),
        ({"devices": {"cpu:0": True}}, "\"devices\" 'cpu:0' is True, not a whole number"),
        ({"devices": [1]}, '"devices" is [1], not an object'),
        ({"change": {"cpu:0": -(2**63) + 1}}, None),
        (
            {"change": {"cpu:0": -(2**63)}},
            "\"change\" 'cpu:0' is -9223372036854775808, not a whole number from -2^63+1",
        ),
        ({"peaks": {"gpu:0": -1}}, "\"peaks\" 'gpu:0' is -1, not a whole number from 0"),
        ({"made": [{"site": "t.py:3", "bytes": 2**63 - 1, "arrays": 1, "shape": "f32[3]"}]}, None),
        ({"made": [{"bytes": 2**63}]}, '"made"[0] "bytes" is 9223372036854775808, not a whole number'),
        ({"made": [{"arrays": True}]}, '"made"[0] "arrays" is True, not a whole number'),
        ({"made": [{"site": 3}]}, '"made"[0] "site" is 3, not text'),
        ({"made": [7]}, '"made"[0] is 7, not an object'),
        ({"held": [{"by": "global HOLD", "path": "[0]", "bytes": -1}]}, '"held"[0] "bytes" is -1, not a whole number'),
        ({"cleared": {"programs": 3, "bytes": -5}}, None),
        ({"cleared": {"programs": -1, "bytes": 0}}, '"cleared" "programs" is -1, not a whole number from 0'),
        ({"traceback": 10**19}, '"traceback" is 10000000000000000000, not a whole number'),
        ({"collected": 1.5}, '"collected" is 1.5, not a whole number'),
        ({"stand_in": 1}, '"stand_in" is 1, not true or false'),
        ({"worker": 0}, '"worker" is 0, not text'),
        ({"started": False, "host": {"rss": 2**63 - 1, "grew": -(2**63) + 1, "kept_free": 5}}, None),
        ({"host": {"kept_free": -1}}, '"host" "kept_free" is -1, not a whole number from 0'),
        ({"started": 0}, '"started" is 0, not true or false'),
        ({"host": [1]}, '"host" is [1], not an object'),
        ({"host": {"rss": -1}}, '"host" "rss" is -1, not a whole number from 0'),
        ({"host": {"grew": "3"}}, '"host" "grew" is \'3\', not a whole number from -2^63+1'),
        ({"host": {"jax_arrays": 2**63}}, '"host" "jax_arrays" is 9223372036854775808, not a whole number'),
        ({"host": {"fixtures_grew": True}}, '"host" "fixtures_grew" is True, not a whole number'),
    ],
)
def test_a_ledger_line_s_figures_are_whole_numbers_any_memory_may_hold(keys, says):
    data = _with_line(**keys)
    if says is None:
        assert Report.from_json(data, "r.json").ledger.tests["t.py::a"] == data["ledger"]["tests"]["t.py::a"]
        return
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value).startswith(f"r.json: {LINE}{says}")


@pytest.mark.parametrize(
    "crashed, says",
    [
        ([{"worker": "gw0", "test": "t.py::b", "said": ["a line"]}], None),
        ([{"worker": 0}], '"ledger" "crashed"[0] "worker" is 0, not text'),
        ([{"test": ["t.py::b"]}], '"ledger" "crashed"[0] "test" is [\'t.py::b\'], not text'),
        ([{"said": [1]}], '"ledger" "crashed"[0] "said" is not a list of text'),
    ],
)
def test_a_crashed_worker_s_words_are_text(crashed, says):
    data = Report({"platform": "cpu"}, {}).to_json() | {"ledger": {"threshold": MB, "tests": {}, "crashed": crashed}}
    if says is None:
        assert Report.from_json(data, "r.json").ledger.crashed == tuple(crashed)
        return
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    assert str(e.value) == f"r.json: {says}"


PAST = "past any figure of memory (a report's numbers are whole numbers from -2^63+1 to 2^63-1, or finite)"


@pytest.mark.parametrize(
    "value, ok",
    [(2**63 - 1, True), (2**63, False), (-(2**63) + 1, True), (-(2**63), False), (1.5, True), (float("inf"), False)],
)
def test_any_number_of_a_report_past_any_figure_is_refused_naming_its_place(value, ok):
    """A check's record is for a person (the page draws its series as floats): any number in it,
    or in a key a newer writer added, is within what any memory holds, or the report is refused."""
    leak = {"check": "leak", "verdict": "leak", "series": {"cpu:0 live arrays": {"values": [0, 1, value]}}}
    data = Report({"platform": "cpu"}, {"t.py::a": Entry.of([leak], "failed")}).to_json()
    if ok:
        assert Report.from_json(data, "r.json").tests["t.py::a"].checks[0]["series"] == leak["series"]
        return
    with pytest.raises(ReportError) as e:
        Report.from_json(data, "r.json")
    place = "tests['t.py::a'].checks[0].series['cpu:0 live arrays'].values[2]"
    assert str(e.value) == f"r.json: {place} is {value!r}: {PAST}"


def test_a_newer_writer_s_key_is_kept_within_the_bounds_and_refused_past_them():
    data = Report({"platform": "cpu"}, {}).to_json() | {"added_later": {"n": [2**63 - 1]}}
    Report.from_json(data, "r.json")
    data["added_later"]["n"].append(-(2**70))
    with pytest.raises(ReportError, match=r"^r\.json: added_later\.n\[1\] is -1180591620717411303424: past any"):
        Report.from_json(data, "r.json")


@pytest.mark.parametrize("key", sorted(entries._LINE))
def test_every_key_of_a_ledger_line_of_the_wrong_type_is_refused_by_name(key):
    kind = entries._LINE[key]
    with pytest.raises(ReportError) as e:
        Report.from_json(_with_line(**{key: WRONG[kind]}), "r.json")
    assert str(e.value).startswith(f'r.json: {LINE}"{key}" is {WRONG[kind]!r}, not {kind}')


def test_every_whole_number_of_a_ledger_line_has_its_range():
    assert set(entries._LINE_NUMBERS) == {k for k, kind in entries._LINE.items() if kind == entries._INT}
