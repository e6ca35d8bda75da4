"""How one test's figures are added up, on hand-built records: the largest growth of its checks is
given with that check's threshold and source."""

from pytest_tpumem.decisions.entry import Entry

MB = 10**6


def test_the_largest_growth_keeps_its_own_threshold_and_source_and_a_tie_goes_to_the_later():
    first = {"check": "leak", "verdict": "ok", "growth": 4 * MB, "threshold": 10 * MB, "growth_source": "live arrays"}
    later = {"check": "leak", "verdict": "ok", "growth": 4 * MB, "threshold": 8 * MB, "growth_source": "bytes in use"}
    e = Entry.of([first, later])
    assert (e.growth, e.threshold, e.growth_source) == (4 * MB, 8 * MB, "bytes in use")
    smaller = {**later, "growth": 4 * MB - 1}
    e = Entry.of([first, smaller])
    assert (e.growth, e.threshold, e.growth_source) == (4 * MB, 10 * MB, "live arrays")
