"""How one test's figures are added up, on hand-built records and entries: Entry.of over its
checks' records (the verdict against unknown text, ties of growth, the peak a TPU target judged
in its place), merged_entries over processes (one process named twice, the first entry's
figures, the failures), the outcome order and Verdict.worst."""

import pytest

from pytest_tpumem.decisions.entry import Entry, merged_entries
from pytest_tpumem.decisions.verdict import Verdict

MB = 10**6


def test_a_record_s_verdict_this_version_does_not_know_ranks_after_ok():
    newer = {"check": "later", "verdict": "maybe"}
    assert Entry.of([newer]).verdict is Verdict.OK
    assert Entry.of([newer, {"verdict": "leak"}]).verdict is Verdict.LEAK


def test_the_largest_growth_keeps_its_own_threshold_and_source_and_a_tie_goes_to_the_later():
    first = {"check": "leak", "verdict": "ok", "growth": 4 * MB, "threshold": 10 * MB, "growth_source": "live arrays"}
    later = {"check": "leak", "verdict": "ok", "growth": 4 * MB, "threshold": 8 * MB, "growth_source": "bytes in use"}
    e = Entry.of([first, later])
    assert (e.growth, e.threshold, e.growth_source) == (4 * MB, 8 * MB, "bytes in use")
    smaller = {**later, "growth": 4 * MB - 1}
    e = Entry.of([first, smaller])
    assert (e.growth, e.threshold, e.growth_source) == (4 * MB, 10 * MB, "live arrays")


def test_a_peak_a_tpu_target_judged_in_its_place_is_shown_not_the_test_s_peak():
    run = {"check": "budget", "verdict": "ok", "peaks": {"cpu:0": 90 * MB}, "judged_on": "v5e:2x2"}
    target = {"check": "budget", "verdict": "ok", "peaks": {"v5e:2x2": 30 * MB}}
    e = Entry.of([run, target])
    assert e.peak == 30 * MB and e.peaks == {"cpu:0": 90 * MB, "v5e:2x2": 30 * MB}
    assert e.shown_only == {"cpu:0"}
    assert Entry.of([run]).peak == 90 * MB  # judged nowhere else: its own figure is the peak


def test_an_entry_of_records_has_no_outcome_or_failure_unless_given():
    records = [{"check": "peak", "verdict": "ok", "peaks": {"cpu:0": MB}}]
    assert (Entry.of(records).outcome, Entry.of(records).failure) == ("", "")
    given = Entry.of(records, "failed", "E   AssertionError")
    assert (given.outcome, given.failure) == ("failed", "E   AssertionError")


def test_one_process_s_entry_is_the_merged_entry():
    e = Entry(verdict=Verdict.LEAK, outcome="failed", peak=5, peaks={"cpu:0": 5}, failure="boom")
    assert merged_entries([(3, e)]) is e


def test_one_process_named_twice_keeps_one_label_with_the_larger_figure():
    a = Entry(peaks={"cpu:0": 9 * MB, "cpu:1": MB}, outcome="passed")
    b = Entry(peaks={"cpu:0": 4 * MB, "cpu:1": 2 * MB}, outcome="passed")
    assert merged_entries([(0, a), (0, b)]).peaks == {"cpu:0": 9 * MB, "cpu:1": 2 * MB}


def test_merged_entries_keep_the_first_s_budget_and_the_largest_figures():
    a = Entry(outcome="passed", peaks={"cpu:0": 5}, budget=10 * MB, witness="end", threshold=MB, stand_in=True)
    b = Entry(outcome="passed", peak=7 * MB, peaks={"cpu:1": 7 * MB}, budget=20 * MB, host_peak=3 * MB, growth=None)
    m = merged_entries([(0, a), (1, b)])
    assert (m.peak, m.host_peak, m.budget, m.witness, m.threshold, m.stand_in) == (
        7 * MB,
        3 * MB,
        10 * MB,
        "end",
        MB,
        True,
    )
    assert merged_entries([(0, b), (1, a)]).host_peak == 3 * MB and merged_entries([(0, a), (1, a)]).peak is None


def test_merged_failures_say_each_process_on_its_line():
    a, b, c = Entry(failure="E   one"), Entry(), Entry(failure="E   two")
    assert merged_entries([(0, a), (1, b), (2, c)]).failure == "process 0: E   one\nprocess 2: E   two"
    assert merged_entries([(0, b), (1, b)]).failure == ""


@pytest.mark.parametrize(
    ("outcomes", "merged"),
    [
        (("xfailed", ""), ""),
        (("", "xfailed"), ""),
        (("xfailed", "skipped"), "skipped"),
        (("xfailed", "error"), "xfailed"),
    ],
)
def test_an_outcome_this_version_does_not_know_ranks_after_unknown(outcomes, merged):
    given = [(i, Entry(outcome=o)) for i, o in enumerate(outcomes)]
    assert merged_entries(given).outcome == merged


def test_the_worst_verdict_is_by_rank_and_none_is_ok():
    assert Verdict.worst([Verdict.LEAK, Verdict.OOM, Verdict.OK]) is Verdict.OOM  # not the first by its text
    assert Verdict.worst([Verdict.REGRESSED, Verdict.NOT_JUDGED]) is Verdict.REGRESSED
    assert Verdict.worst([]) is Verdict.OK
