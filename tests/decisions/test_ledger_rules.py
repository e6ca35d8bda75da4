"""The suite ledger's rules at their boundaries: when a residue is named, when jax's caches are
cleared, what a pattern is, and what a failed test's traceback takes off its residue."""

import pytest

from pytest_tpumem.decisions.ledger import Line, Pattern, clear_now, named, over, patterns
from pytest_tpumem.measuring.ledger import Explanation

MB = 10**6


@pytest.mark.parametrize(
    ("residue", "threshold", "expected"),
    [(10 * MB, 10 * MB, True), (10 * MB - 1, 10 * MB, False), (10 * MB + 1, 10 * MB, True), (5 * MB, 0, False)],
)
def test_a_residue_is_over_from_the_threshold_itself_and_a_zero_threshold_names_nothing(residue, threshold, expected):
    assert over(residue, threshold) is expected


def test_what_only_a_failed_tests_traceback_keeps_is_not_named():
    explained = Explanation(traceback=40 * MB)
    failed = Line("t.py::a", 1, "failed", True, residue=50 * MB, explanation=explained)
    assert failed.left == 10 * MB and named(failed, 10 * MB) and not named(failed, 10 * MB + 1)
    passed = Line("t.py::b", 2, "passed", True, residue=50 * MB, explanation=explained)
    assert passed.left == 50 * MB  # a passed test has no failure's traceback to keep them


@pytest.mark.parametrize(
    ("setting", "module_ends", "programs", "expected"),
    [
        ("off", True, 10**6, False),
        ("test", False, 0, True),
        ("module", False, 10**6, False),
        ("module", True, 0, True),
        (500, False, 500, True),
        (500, True, 499, False),
        (500, False, None, False),  # a jax that cannot list its programs: never
    ],
)
def test_when_jaxs_caches_are_cleared(setting, module_ends, programs, expected):
    assert clear_now(setting, module_ends, programs) is expected


def test_a_pattern_is_a_line_two_tests_or_more_left_and_one_test_alone_is_its_own_line():
    left = [("a.py:3", "t::1", 4 * MB), ("a.py:3", "t::2", 4 * MB), ("b.py:9", "t::3", 64 * MB), (None, "t::4", MB)]
    found = patterns(left, {"c.py:5": {"t::1", "t::2"}, "d.py:1": {"t::1"}}, {"c.py:5": 7, "d.py:1": 3}, 8 * MB)
    assert found == (Pattern("a.py:3", 2, nbytes=8 * MB), Pattern("c.py:5", 2, programs=7))


def test_a_patterns_arrays_reach_the_threshold_and_its_programs_a_quarter_of_what_jax_holds():
    left = [("a.py:3", "t::1", 4 * MB), ("a.py:3", "t::2", 4 * MB - 1)]
    assert patterns(left, {}, {}, 8 * MB) == ()  # one byte under
    compiled = {"c.py:5": {"t::1", "t::2"}, "d.py:1": {"t::3", "t::4"}}
    assert patterns([], compiled, {"c.py:5": 25, "d.py:1": 75}, 8 * MB) == (
        Pattern("d.py:1", 2, programs=75),
        Pattern("c.py:5", 2, programs=25),  # a quarter exactly
    )
    assert patterns([], compiled, {"c.py:5": 24, "d.py:1": 76}, 8 * MB) == (Pattern("d.py:1", 2, programs=76),)
