"""The baseline gate's tolerances at their boundaries, on hand-built figures: exactly at a
tolerance passes, one byte over fails; a percentage judges only changes of at least the floor
(defaults.COMPARE_FLOOR, 1MB), from 0 too; and what is never judged."""

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.decisions.compare import ToleranceError, compare, compare_entry, parse_tolerance
from pytest_tpumem.decisions.entry import Entry, Report

MB = 10**6
FLOOR = defaults.COMPARE_FLOOR


def test_the_floor_is_a_megabyte():
    assert FLOOR == 10**6


@pytest.mark.parametrize(
    "old, new, exceeded",
    [
        (100 * MB, 110 * MB, False),  # exactly 10%
        (100 * MB, 110 * MB + 1, True),  # one byte over
        (100 * MB, 100 * MB, False),
        (100 * MB, 90 * MB, False),  # fell
        (100, 116, False),  # +16%, but 16 bytes: under the floor
        (1000, 1000 + FLOOR - 1, False),  # far over 10%, a byte under the floor
        (1000, 1000 + FLOOR, True),  # at the floor: judged
        (0, FLOOR - 1, False),  # from 0, under the floor
        (0, FLOOR, True),  # from 0: any percentage of 0 is exceeded once the floor is
        (5 * FLOOR, 5 * FLOOR + FLOOR, True),  # +20% at exactly the floor
    ],
)
def test_a_percentage_at_its_boundaries(old, new, exceeded):
    assert parse_tolerance("peak:10%").exceeded(old, new) is exceeded


@pytest.mark.parametrize(
    "old, new, exceeded",
    [
        (100 * MB, 150 * MB, False),  # exactly +50MB
        (100 * MB, 150 * MB + 1, True),  # one byte over
        (0, 50 * MB + 1, True),
        (100, 116, False),  # a size has no floor of its own: +16 bytes is under 50MB
    ],
)
def test_a_size_at_its_boundaries(old, new, exceeded):
    assert parse_tolerance("peak:50MB").exceeded(old, new) is exceeded


def test_a_size_tolerance_under_the_floor_judges_what_it_says():
    assert parse_tolerance("growth:16B").exceeded(0, 17) and not parse_tolerance("growth:16B").exceeded(0, 16)


def test_an_improvement_is_the_same_rule_the_other_way():
    changes = compare_entry("t", Entry(peak=110 * MB), Entry(peak=100 * MB - 1), (parse_tolerance("peak:10%"),))
    (change,) = changes
    assert (change.regressed_beyond, change.improved_beyond) == ("", "peak:10%")
    (even,) = compare_entry("t", Entry(peak=110 * MB), Entry(peak=100 * MB), (parse_tolerance("peak:10%"),))
    assert (even.regressed, even.improved) == (False, False)  # judged as the rise back: 100 -> 110 is exactly 10%


def test_any_tolerance_exceeded_fails_and_names_the_first():
    tolerances = (parse_tolerance("peak:50MB"), parse_tolerance("peak:10%"))
    (change,) = compare_entry("t", Entry(peak=100 * MB), Entry(peak=120 * MB), tolerances)
    assert change.regressed_beyond == "peak:10%"


def test_a_test_that_failed_in_the_baseline_is_shown_and_never_judged():
    failed = Entry(outcome="failed", peak=10 * MB)
    (change,) = compare_entry("t", failed, Entry(peak=100 * MB), (parse_tolerance("peak:10%"),))
    assert (change.old, change.new, change.regressed) == (10 * MB, 100 * MB, False)


def test_growth_takes_a_size_and_refuses_a_percentage():
    assert parse_tolerance("growth:10MB").amount == 10 * MB
    with pytest.raises(ToleranceError, match=r"growth takes a size \(growth:10MB\), not a percentage"):
        parse_tolerance("growth:10%")


def _report(context, **figures):
    return Report(context, {"t.py::a": Entry(**figures)})


CPU = {"platform": "cpu", "device_kind": "cpu"}


def test_a_baseline_from_another_platform_or_an_older_schema_fails_nothing():
    tolerances = (parse_tolerance("peak:10%"),)
    gpu = compare(_report({"platform": "gpu", "device_kind": "H100"}, peak=MB), _report(CPU, peak=9 * MB), tolerances)
    assert gpu.foreign == "it was taken on platform 'gpu', this run is on 'cpu'" and not gpu.failed
    assert [c.regressed for c in gpu.changes] == [True] and gpu.regressions == ()
    old = Report(CPU, {"t.py::a": Entry(peak=MB)}, version=1)
    v1 = compare(old, _report(CPU, peak=9 * MB), tolerances)
    assert v1.foreign.startswith("it was written by an older pytest-tpumem (schema version 1)") and not v1.failed
    same = compare(_report(CPU, peak=MB), _report(CPU, peak=9 * MB), tolerances)
    assert same.foreign == "" and same.failed


def test_a_gate_that_compared_nothing_fails_only_where_it_gates():
    old, new = Report(CPU, {"a.py::t": Entry(peak=1)}), Report(CPU, {"b.py::t": Entry(peak=1)})
    assert compare(old, new, (parse_tolerance("peak:10%"),)).failed
    assert not compare(old, new).failed


def test_residue_takes_a_size_and_refuses_a_percentage():
    assert parse_tolerance("residue:10MB").amount == 10 * MB
    with pytest.raises(
        ToleranceError, match=r"residue takes a size \(residue:10MB\), not a percentage: clean code leaves"
    ):
        parse_tolerance("residue:10%")


def _ledger_report(grew, threshold=100 * MB, outcome="passed"):
    from pytest_tpumem.decisions.entry import LedgerTests

    line = {"residue": 0, "outcome": outcome, "host": {"rss": 10**9, "grew": grew}}
    return Report(CPU, {}, ledger=LedgerTests(10 * MB, {"t.py::a": line}, host_threshold=threshold))


@pytest.mark.parametrize(
    ("before", "now", "regressed"),
    [
        (120 * MB, 170 * MB, False),  # exactly the tolerance: within
        (120 * MB, 170 * MB + 1, True),
        (-(10**9), 50 * MB + 1, False),  # not named in this run: RSS noise is never judged
        (0, 100 * MB, True),  # named from its threshold itself, growth from 0 counted from 0
        (0, 100 * MB - 1, False),
    ],
)
def test_a_host_residue_regression_is_judged_on_the_tests_named_for_host_memory(before, now, regressed):
    tolerances = (parse_tolerance("host_residue:50MB"),)
    comparison = compare(_ledger_report(before), _ledger_report(now), tolerances)
    assert bool(comparison.regressions) is regressed and comparison.failed is regressed
    if regressed:
        (change,) = comparison.regressions
        assert (change.figure, change.old, change.new) == ("host_residue", max(0, before), now)


def test_host_figures_under_the_threshold_in_both_runs_are_not_told_and_a_zero_threshold_judges_none():
    quiet = compare(_ledger_report(30 * MB), _ledger_report(90 * MB), (parse_tolerance("host_residue:1MB"),))
    assert quiet.changes == () or all(c.figure != "host_residue" for c in quiet.changes)
    off = compare(_ledger_report(0, 0), _ledger_report(10**9, 0), (parse_tolerance("host_residue:1MB"),))
    assert not off.failed
    failed_before = compare(
        _ledger_report(0, outcome="failed"), _ledger_report(500 * MB), (parse_tolerance("host_residue:1MB"),)
    )
    assert not failed_before.failed  # a test that failed in the baseline judges nothing
    told = compare(_ledger_report(150 * MB), _ledger_report(30 * MB), (parse_tolerance("host_residue:10MB"),))
    assert [c.figure for c in told.improvements] == ["host_residue"]  # named before, gone now: an improvement


def test_host_residue_takes_a_size_and_refuses_a_percentage():
    assert parse_tolerance("host_residue:50MB").amount == 50 * MB
    with pytest.raises(ToleranceError, match=r"host_residue takes a size \(host_residue:10MB\), not a percentage"):
        parse_tolerance("host_residue:10%")


def test_the_test_in_which_jaxs_backend_started_is_not_compared_for_host_memory():
    from pytest_tpumem.decisions.entry import LedgerTests

    def report(grew):
        line = {"residue": 0, "outcome": "passed", "host": {"rss": 10**9, "grew": grew, "backend_started": True}}
        return Report(CPU, {}, ledger=LedgerTests(10 * MB, {"t.py::a": line}, host_threshold=100 * MB))

    assert compare(report(150 * MB), report(900 * MB), (parse_tolerance("host_residue:1MB"),)).changes == ()


def test_a_host_growth_read_in_one_run_only_is_not_compared():
    from pytest_tpumem.decisions.entry import LedgerTests

    unread = Report(CPU, {}, ledger=LedgerTests(10 * MB, {"t.py::a": {"residue": 0}}, host_threshold=100 * MB))
    host = (parse_tolerance("host_residue:1MB"),)
    assert compare(unread, _ledger_report(900 * MB), host).changes == ()
    assert compare(_ledger_report(900 * MB), unread, host).changes == ()


def _ledger(tests, root="", host_threshold=100 * MB):
    from pytest_tpumem.decisions.entry import LedgerTests

    return Report({**CPU, "rootdir": root}, {}, ledger=LedgerTests(10 * MB, tests, host_threshold=host_threshold))


def test_a_residue_is_compared_test_by_test_with_its_figure_named():
    from pytest_tpumem.decisions.compare import compare_residues

    old = _ledger({"t.py::a": {"residue": 3 * MB, "outcome": "passed"}})
    new = _ledger({"t.py::a": {"residue": 20 * MB, "outcome": "passed"}})
    (change,) = compare_residues(old, new, (parse_tolerance("residue:10MB"),))
    assert (change.nodeid, change.figure, change.old, change.new, change.regressed_beyond) == (
        "t.py::a",
        "residue",
        3 * MB,
        20 * MB,
        "residue:10MB",
    )
    assert compare_residues(Report(CPU, {}), new, ()) == [] and compare_residues(old, Report(CPU, {}), ()) == []


def test_residues_are_matched_across_rootdirs_where_a_path_suffix_alone_cannot_tell():
    from pytest_tpumem.decisions.compare import compare_residues

    line = {"residue": 0, "outcome": "passed"}
    old = _ledger({"a/t.py::x": {**line, "residue": 5 * MB}, "b/t.py::x": line}, root="/r")
    new = _ledger({"t.py::x": {**line, "residue": 9 * MB}}, root="/r/a")  # pytest run from /r/a
    (change,) = compare_residues(old, new, ())
    assert (change.nodeid, change.old, change.new) == ("t.py::x", 5 * MB, 9 * MB)


def test_a_host_growth_is_compared_from_a_one_byte_threshold_and_one_given_back_counts_as_none():
    from pytest_tpumem.decisions.compare import compare_residues

    def ledger(grew, threshold):
        return _ledger({"t.py::a": {"residue": 0, "host": {"rss": 1, "grew": grew}}}, host_threshold=threshold)

    (change,) = compare_residues(ledger(0, 1), ledger(1, 1), ())
    assert (change.nodeid, change.figure, change.old, change.new) == ("t.py::a", "host_residue", 0, 1)
    (gave_back,) = compare_residues(ledger(150 * MB, 100 * MB), ledger(-5 * MB, 100 * MB), ())
    assert (gave_back.old, gave_back.new) == (150 * MB, 0)


def test_a_residue_of_a_test_that_failed_in_the_baseline_is_shown_and_never_judged():
    """The baseline's residue of a failed test is cut short (its figures stopped where it failed):
    the change is told, no tolerance judges it; the same change after a pass regresses."""
    from pytest_tpumem.decisions.compare import compare_residues

    tolerances = (parse_tolerance("residue:10MB"),)
    new = _ledger({"t.py::a": {"residue": 50 * MB, "outcome": "passed"}})
    failed = _ledger({"t.py::a": {"residue": 0, "outcome": "failed"}})
    (change,) = compare_residues(failed, new, tolerances)
    assert (change.figure, change.old, change.new, change.regressed) == ("residue", 0, 50 * MB, False)
    assert not compare(failed, new, tolerances).failed
    passed = _ledger({"t.py::a": {"residue": 0, "outcome": "passed"}})
    (judged,) = compare_residues(passed, new, tolerances)
    assert judged.regressed_beyond == "residue:10MB"


@pytest.mark.parametrize(
    ("outcome_a", "outcome_b", "regressed"), [("passed", "failed", True), ("failed", "passed", False)]
)
def test_the_residue_gate_judges_a_test_moved_with_its_rootdir_by_its_own_baseline_outcome(
    outcome_a, outcome_b, regressed
):
    """Run from /r/a, ``t.py::x`` is the baseline's ``a/t.py::x`` (not ``b/t.py::x``, which a path
    suffix alone cannot tell apart): its residue is gated, unless that test failed in the baseline."""
    tolerances = (parse_tolerance("residue:10MB"),)
    old = _ledger(
        {"a/t.py::x": {"residue": 0, "outcome": outcome_a}, "b/t.py::x": {"residue": 0, "outcome": outcome_b}}, "/r"
    )
    new = _ledger({"t.py::x": {"residue": 50 * MB, "outcome": "passed"}}, root="/r/a")
    comparison = compare(old, new, tolerances)
    (change,) = comparison.changes
    assert (change.nodeid, change.figure, change.old, change.new) == ("t.py::x", "residue", 0, 50 * MB)
    assert change.regressed is regressed and comparison.failed is regressed
