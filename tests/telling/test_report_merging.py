"""merge_reports on reports built by hand (the ``wire`` fixture), in process: which processes are
told apart and which refused (each with its one line), and what the merged report says of the
processes, their tests and their suite ledgers."""

import pytest

from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.errors import ReportError
from pytest_tpumem.telling.report import merge_reports

MB = 10**6


def process(wire, index, count=2, tests=None, **context):
    """Process ``index`` of ``count``'s report: by default one test, its peak on that host's cpu:0."""
    context = {"process_index": index, "process_count": count, "pid": index + 1, **context}
    return wire.report(tests or {"t.py::a": [wire.peak((index + 1) * MB)]}, **context)


def refused(*reports):
    with pytest.raises(ReportError) as e:
        merge_reports(list(reports))
    return str(e.value)


def test_nothing_to_merge_is_refused():
    assert refused() == "nothing to merge: give the reports of the processes"


def test_reports_of_two_schema_versions_are_refused_naming_both(wire):
    old = Report(wire.context(process_index=1, pid=2), {}, version=1)
    assert refused(("a.json", process(wire, 0)), ("b.json", old)) == (
        "b.json: schema version 1, but a.json has 2; merge reports of one run"
    )


def test_a_report_given_twice_is_refused_naming_where_it_was_first(wire):
    a = process(wire, 0, process_index=None)
    assert refused(("a.json", a), ("b.json", process(wire, 1)), ("c.json", a)) == (
        "c.json: the same process's report as a.json; give each process's report once"
    )


@pytest.mark.parametrize(
    "differs",
    [{"hostname": "h2"}, {"started": "2025-05-01T10:00:01+00:00"}, {"pid": 7}],
    ids=["hostname", "started", "pid"],
)
def test_processes_that_differ_in_one_of_host_start_or_pid_are_two(wire, differs):
    """Without a process index (reports of several hosts), a process is its host, its start and its pid."""
    a = process(wire, 0, process_index=None)
    b = process(wire, 0, process_index=None, **differs)
    assert merge_reports([("a.json", a), ("b.json", b)]).context["merged_from"] == 2
    assert refused(("a.json", a), ("b.json", a)).startswith("b.json: the same process's report as a.json")


def test_processes_that_differ_only_in_their_index_are_two(wire):
    merged = merge_reports([("a.json", process(wire, 0, pid=9)), ("b.json", process(wire, 1, pid=9))])
    assert [c["process_index"] for c in merged.processes] == [0, 1]


def test_two_reports_of_one_process_index_are_two_runs(wire):
    """Process 0 of 2 twice (another pid, another start): two runs, refused naming the first."""
    first = process(wire, 0)
    again = process(wire, 0, pid=5, started="2025-05-02T10:00:00+00:00")
    assert refused(("a.json", first), ("b.json", process(wire, 1)), ("c.json", again)) == (
        "c.json: process 0 of 2, as a.json is: two runs, not two processes of one run "
        "(merge joins the processes of one jax.distributed run or of several hosts)"
    )


def test_reports_without_a_process_index_are_never_two_runs(wire):
    hosts = [(f"{h}.json", process(wire, 0, process_index=None, hostname=h)) for h in ("h0", "h1", "h2")]
    assert merge_reports(hosts).context["merged_from"] == 3


def test_the_processes_of_a_merged_report_are_each_checked(wire):
    """A merged report given again is the processes it was merged from: each is a process, and one
    of them given again is refused as the process it is."""
    p0, p1, p2 = (process(wire, i, count=3) for i in range(3))
    first = merge_reports([("p0.json", p0), ("p1.json", p1)])
    merged = merge_reports([("m.json", first), ("p2.json", p2)])
    assert [c["process_index"] for c in merged.processes] == [0, 1, 2] and merged.context["merged_from"] == 3
    assert refused(("m.json", first), ("p1.json", p1)).startswith("p1.json: the same process's report as m.json")
    gpu = process(wire, 2, count=3, platform="gpu")
    assert refused(("m.json", first), ("p2.json", gpu)).startswith("p2.json: platform 'gpu', but m.json has 'cpu'")


def test_the_merged_context_sums_the_devices_and_spans_the_run(wire):
    merged = merge_reports(
        [
            (
                "a.json",
                process(wire, 0, devices=["cpu:0"], device_count=1, finished="2025-05-01T11:00:00+00:00"),
            ),
            (
                "b.json",
                process(
                    wire,
                    1,
                    count=4,
                    devices=["cpu:0", "cpu:1"],
                    device_count=2,
                    started="2025-05-01T09:00:00+00:00",
                    finished="2025-05-01T12:00:00+00:00",
                    hostname="h1",
                ),
            ),
        ]
    ).context
    assert merged["devices"] == ["cpu:0", "cpu:0", "cpu:1"] and merged["device_count"] == 3
    assert merged["started"] == "2025-05-01T09:00:00+00:00" and merged["finished"] == "2025-05-01T12:00:00+00:00"
    assert merged["process_index"] is None and merged["process_count"] == 4 and merged["merged_from"] == 2
    assert merged["hostname"] == "h"  # the rest of the first process's context


def test_what_a_process_does_not_say_counts_as_one_process_no_device_and_no_end(wire):
    """A context without a process count is one process's; without a device count, no devices;
    the run's end is the latest said, none where none says one; a start not said is the earliest."""
    said = process(wire, 0, process_index=None, process_count=None, device_count=None, finished=None)
    other = process(wire, 0, process_index=None, process_count=None, device_count=2, hostname="h1")
    merged = merge_reports([("a.json", said), ("b.json", other)]).context
    assert merged["process_count"] == 1 and merged["device_count"] == 2 and merged["finished"] is None
    later = process(wire, 0, process_index=None, hostname="h2", finished="2025-05-01T11:00:00+00:00")
    assert merge_reports([("a.json", said), ("c.json", later)]).context["finished"] == "2025-05-01T11:00:00+00:00"
    unstarted = Report({k: v for k, v in wire.context(hostname="h3").items() if k != "started"}, {})
    assert merge_reports([("a.json", said), ("d.json", unstarted)]).context["started"] == ""


def test_a_test_in_two_reports_has_the_worst_of_both_and_the_first_budget(wire):
    a = Report(
        wire.context(process_count=2),
        {"t.py::a": Entry.of([wire.peak(2 * MB, budget=5 * MB)], "passed")},
    )
    b = Report(
        wire.context(process_index=1, process_count=2, pid=2),
        {
            "t.py::a": Entry.of([wire.peak(7 * MB, budget=9 * MB, verdict="over budget")], "failed", "boom"),
            "t.py::b": Entry.of([wire.peak(MB)], "skipped"),
        },
    )
    merged = merge_reports([("a.json", a), ("b.json", b)])
    both = merged.tests["t.py::a"]
    assert (both.outcome, both.verdict, both.peak, both.budget) == ("failed", "over budget", 7 * MB, 5 * MB)
    assert both.peaks == {"cpu:0": 2 * MB, "p1:cpu:0": 7 * MB} and both.failure == "process 1: boom"
    assert [(c["process_index"], c["budget"]) for c in both.checks] == [(0, 5 * MB), (1, 9 * MB)]
    assert merged.tests["t.py::b"].outcome == "skipped" and merged.tests["t.py::b"].checks[0]["budget"] is None
    assert (merged.measured, merged.failed) == (2, 1)


def test_a_context_that_says_no_platform_is_still_held_to_its_device_kind(wire):
    a = process(wire, 0, platform=None, device_kind="cpu")
    b = process(wire, 1, device_kind="TPU v4")
    assert (
        refused(("a.json", a), ("b.json", b))
        == "b.json: device kind 'TPU v4', but a.json has 'cpu'; merge reports of one run"
    )


def test_the_tests_of_a_report_are_told_under_its_own_process_index_whatever_the_order(wire):
    """Process 1's report given first: its checks say process 1, and the label both use is process 0's ``p0:``."""
    shared = merge_reports([("p1.json", process(wire, 1)), ("p0.json", process(wire, 0))]).tests["t.py::a"]
    assert [c["process_index"] for c in shared.checks] == [1, 0]
    assert shared.peaks == {"cpu:0": 2 * MB, "p0:cpu:0": MB}


def test_the_tests_of_a_report_without_an_index_are_numbered_by_their_place(wire):
    """The third report given, with no process index, is process 2: its device label is ``p2:``."""
    hosts = [(f"h{i}.json", process(wire, i, process_index=None, hostname=f"h{i}")) for i in range(3)]
    shared = merge_reports(hosts).tests["t.py::a"]
    assert shared.peaks == {"cpu:0": MB, "p1:cpu:0": 2 * MB, "p2:cpu:0": 3 * MB}


def test_the_suite_ledgers_of_the_processes_are_merged(wire):
    a = Report(wire.context(process_count=2), {}, ledger=LedgerTests(MB, {"t.py::a": {"residue": 5}}, (), 2 * MB))
    b = Report(wire.context(process_index=1, process_count=2, pid=2), {})
    c = Report(
        wire.context(process_index=None, hostname="h1"), {}, ledger=LedgerTests(3 * MB, {"t.py::a": {"residue": 9}})
    )
    merged = merge_reports([("a.json", a), ("b.json", b), ("c.json", c)]).ledger
    assert merged == LedgerTests(3 * MB, {"t.py::a": {"residue": 9}}, (), 2 * MB)
    assert merge_reports([("b.json", b)]).ledger is None


def test_a_merged_report_is_checked_as_any_report_read(wire):
    """Device counts each in range can add up past one: the merged report is refused by its name."""
    big = [process(wire, i, device_count=2**31) for i in range(2)]
    assert refused(("a.json", big[0]), ("b.json", big[1])) == (
        f'the merged report: context "device_count" is {2**32}, out of range'
    )
