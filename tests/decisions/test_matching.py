"""Which baseline test each of a run's tests is (decisions.compare.match_tests), whatever
rootdir pytest chose for either run; and a comparison that matched nothing."""

from pytest_tpumem.decisions.compare import compare, match_tests, parse_tolerances
from pytest_tpumem.decisions.entry import Entry, Report


def test_the_same_ids_match_as_they_are():
    assert match_tests(["a.py::t", "b.py::t"], ["b.py::t", "c.py::t"]) == {"b.py::t": "b.py::t"}


def test_ids_from_two_rootdirs_of_one_checkout_match_as_the_same_files():
    old = ["test_x.py::t", "sub/test_y.py::t[1/2]"]
    new = ["proj/test_x.py::t", "proj/sub/test_y.py::t[1/2]"]
    assert match_tests(old, new, "/w/proj", "/w") == dict(zip(new, old))
    # the other way round, and a file outside the rootdir (pytest names it with ..)
    assert match_tests(new, old, "/w", "/w/proj") == dict(zip(old, new))
    assert match_tests(["../lib/test_z.py::t"], ["lib/test_z.py::t"], "/w/proj", "/w") == {
        "lib/test_z.py::t": "../lib/test_z.py::t"
    }


def test_ids_from_another_checkout_match_by_the_path_they_end_with():
    old = ["tests/unit/test_x.py::T::t", "tests/unit/test_y.py::t"]
    new = ["unit/test_x.py::T::t", "test_y.py::t"]
    assert match_tests(old, new, "/ci/repo", "/home/me/repo") == dict(zip(new, old))
    assert match_tests(old, new) == dict(zip(new, old))  # no rootdir recorded: by suffix alone


def test_a_suffix_two_tests_fit_is_left_unmatched():
    """tests/a/test_x.py and tests/b/test_x.py both end with test_x.py: neither is guessed."""
    old = ["a/test_x.py::t", "b/test_x.py::t"]
    assert match_tests(old, ["test_x.py::t"]) == {}
    assert match_tests(["test_x.py::t"], old) == {}
    # the test part must be the same, and a file name is matched whole, not by its last letters
    assert match_tests(["x/test_x.py::t"], ["test_x.py::u"]) == {}
    assert match_tests(["a/my_test_x.py::t"], ["test_x.py::t"]) == {}


def _report(tests, rootdir=None):
    context = {"platform": "cpu", "device_kind": "cpu"}
    if rootdir:
        context["rootdir"] = rootdir
    return Report(context, {k: Entry(peak=v) for k, v in tests.items()})


def test_a_gate_that_compared_nothing_fails_and_a_comparison_without_one_does_not():
    old, new = _report({"x.py::a": 100}), _report({"y.py::a": 100})
    gated = compare(old, new, parse_tolerances(["peak:10%"]))
    assert gated.compared == 0 and gated.compared_nothing and gated.failed and gated.regressions == ()
    assert not compare(old, new).failed
    # one side empty is not "nothing compared": a first run, or a suite whose tests all went
    assert not compare(_report({}), new, parse_tolerances(["peak:10%"])).compared_nothing
    assert not compare(old, _report({}), parse_tolerances(["peak:10%"])).compared_nothing


def test_a_renamed_test_is_compared_and_counted():
    old = _report({"test_x.py::a": 100 * 10**6}, "/w/proj")
    new = _report({"proj/test_x.py::a": 150 * 10**6}, "/w")
    c = compare(old, new, parse_tolerances(["peak:10%"]))
    assert (c.compared, c.renamed, c.roots) == (1, 1, ("/w/proj", "/w"))
    assert [(ch.nodeid, ch.old, ch.new, ch.regressed_beyond) for ch in c.changes] == [
        ("proj/test_x.py::a", 100 * 10**6, 150 * 10**6, "peak:10%")
    ]
