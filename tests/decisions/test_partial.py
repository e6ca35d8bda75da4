"""When a run took only part of the suite (decisions.partial): its report does not replace the
baseline, and the refusal names what narrowed it. The rule at its boundaries."""

import pytest

from pytest_tpumem.decisions.partial import Selection, left_out, partial


def test_a_whole_run_is_not_partial():
    assert partial(Selection(collected=3)) == ""
    assert partial(Selection()) == ""  # (no test at all is refused as a baseline elsewhere: "measured no test")


@pytest.mark.parametrize(("deselected", "is_partial"), [(0, False), (1, True), (2, True)])
def test_one_deselected_test_is_enough(deselected, is_partial):
    said = partial(Selection(collected=3, deselected=deselected, narrowing=("-k 'test_b'",)))
    assert bool(said) is is_partial
    if is_partial:
        assert said == f"-k 'test_b' deselected {deselected} of the 3 tests collected"


def test_the_refusal_names_every_narrowing_option_or_a_plugin():
    both = Selection(collected=9, deselected=4, narrowing=("-k 'a'", "-m 'slow'"))
    assert partial(both) == "-k 'a' and -m 'slow' deselected 4 of the 9 tests collected"
    assert partial(Selection(collected=9, deselected=1)) == "a plugin deselected 1 of the 9 tests collected"


def test_lf_that_reran_last_failures_is_partial_and_one_with_none_to_rerun_is_not():
    assert partial(Selection(collected=2, narrowing=("--lf",), reran_failures=0)) == ""
    assert partial(Selection(collected=2, narrowing=("--lf",), reran_failures=1)) == (
        "--lf ran only the 1 test that failed last time"
    )
    assert partial(Selection(collected=5, reran_failures=2)) == "--lf ran only the 2 tests that failed last time"


def test_test_ids_given_as_arguments_are_partial():
    ids = ("t.py::a", "t.py::b", "t.py::c", "t.py::d")
    assert (
        partial(Selection(collected=1, given_ids=ids[:1]))
        == "the run was given test ids (t.py::a), not the whole suite"
    )
    assert "(t.py::a, t.py::b, t.py::c and 1 more)" in partial(Selection(collected=4, given_ids=ids))


def test_a_baseline_test_whose_file_is_there_but_was_not_collected_was_left_out():
    baseline = ["a.py::t1", "a.py::t2", "b.py::t1", "gone.py::t1", "a.py::renamed"]
    found = left_out(baseline, {"a.py"}, lambda file: file != "gone.py")
    assert found == ("b.py::t1",)  # not a.py's (its file was collected: renamed or removed), not gone.py's
    assert partial(Selection(collected=2, left_out=found)) == (
        "the paths the run was given leave out 1 test of the baseline (b.py::t1)"
    )
    assert left_out(baseline, {"a.py", "b.py"}, lambda file: file != "gone.py") == ()
