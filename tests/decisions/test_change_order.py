"""The order a comparison lists its changes in (decisions.compare.change_order): regressions, then
improvements, then the changes no tolerance judged; within each, figure by figure (peak, growth,
residue), the largest change in bytes first whichever way it went, then by test id."""

import pytest

from pytest_tpumem.decisions.compare import Change, change_order, compare, parse_tolerances
from pytest_tpumem.telling.comparison import comparison_lines

MB, kB = 10**6, 10**3


def ordered(*changes):
    return [c.nodeid for c in sorted(changes, key=change_order)]


def test_a_41mb_peak_regression_is_listed_above_282_percent_of_23kb():
    """newcomer2's README: compare without --fail listed +282% of host noise above +41.2MB."""
    noise = Change("t.py::noise", "peak", 8 * kB, 31 * kB)  # +287.5%, +23kB
    big = Change("t.py::big", "peak", 100 * MB, 141_200_000)  # +41.2%, +41.2MB
    assert noise.percent > big.percent
    assert ordered(noise, big) == ["t.py::big", "t.py::noise"]


def test_a_fall_is_ordered_by_its_size_as_a_rise_is():
    assert ordered(Change("t.py::up", "peak", 0, 10 * MB), Change("t.py::down", "peak", 60 * MB, 10 * MB)) == [
        "t.py::down",
        "t.py::up",
    ]


def test_the_change_is_what_orders_not_the_figures_it_went_between():
    small_of_large = Change("t.py::a", "peak", 100 * MB, 110 * MB)  # +10MB between 100 and 110
    large_from_nothing = Change("t.py::b", "peak", 0, 50 * MB)  # +50MB
    assert ordered(small_of_large, large_from_nothing) == ["t.py::b", "t.py::a"]


@pytest.mark.parametrize("delta", [1, -1])
def test_one_byte_more_is_listed_first(delta):
    a = Change("t.py::a", "peak", 10 * MB, 15 * MB)
    b = Change("t.py::b", "peak", 10 * MB, 15 * MB + delta)
    assert ordered(a, b) == (["t.py::b", "t.py::a"] if delta > 0 else ["t.py::a", "t.py::b"])


def test_equal_changes_are_listed_by_test_id_whichever_way_they_went():
    assert ordered(Change("t.py::b", "peak", 10, 15), Change("t.py::a", "peak", 15, 10)) == ["t.py::a", "t.py::b"]


def test_figure_by_figure_peak_growth_then_residue_whatever_their_sizes():
    residue = Change("t.py::r", "residue", 0, 900 * MB)
    growth = Change("t.py::g", "growth", 0, 500 * MB)
    peak = Change("t.py::p", "peak", 10 * MB, 11 * MB)
    assert ordered(residue, growth, peak) == ["t.py::p", "t.py::g", "t.py::r"]


def test_a_regression_comes_first_then_an_improvement_then_what_no_tolerance_judged():
    unjudged = Change("t.py::unjudged", "peak", 0, 900 * MB)
    improved = Change("t.py::improved", "growth", 5 * MB, 1 * MB, improved_beyond="growth:1MB")
    regressed = Change("t.py::regressed", "residue", 0, 2 * MB, regressed_beyond="residue:1MB")
    assert ordered(unjudged, improved, regressed) == ["t.py::regressed", "t.py::improved", "t.py::unjudged"]


def test_compare_lists_its_changes_in_this_order_and_the_table_shows_it(wire):
    old = wire.report(
        {
            "t.py::host_noise": [wire.peak(8 * kB), wire.leak(8 * kB)],
            "t.py::model": [wire.peak(100 * MB), wire.leak(0)],
            "t.py::small": [wire.peak(10 * MB)],
        }
    )
    new = wire.report(
        {
            "t.py::host_noise": [wire.peak(31 * kB), wire.leak(31 * kB)],
            "t.py::model": [wire.peak(141_200_000), wire.leak(2 * MB)],
            "t.py::small": [wire.peak(30 * MB)],
        }
    )
    comparison = compare(old, new)
    assert [(c.figure, c.nodeid) for c in comparison.changes] == [
        ("peak", "t.py::model"),
        ("peak", "t.py::small"),
        ("peak", "t.py::host_noise"),
        ("growth", "t.py::model"),
        ("growth", "t.py::host_noise"),
    ]
    rows = comparison_lines(comparison, "base.json")[1:6]
    assert [(r.split()[0], r.split()[4], r.split()[-1]) for r in rows] == [
        ("peak", "+41.2MB", "t.py::model"),
        ("peak", "+20.0MB", "t.py::small"),
        ("peak", "+23.0kB", "t.py::host_noise"),
        ("growth", "+2.0MB", "t.py::model"),
        ("growth", "+23.0kB", "t.py::host_noise"),
    ]
    judged = compare(old, new, parse_tolerances(["peak:100%"]))  # only small's +200% breaks it
    assert [c.nodeid for c in judged.changes][:2] == ["t.py::small", "t.py::model"]
