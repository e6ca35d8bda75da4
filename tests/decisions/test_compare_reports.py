"""compare() over two whole reports: which baseline test each of the run's tests is compared with
when pytest chose another rootdir for either run (the reports' context.rootdir), and what the
comparison counts."""

from pytest_tpumem.decisions.compare import compare, parse_tolerances
from pytest_tpumem.decisions.entry import Entry, Report

MB = 10**6


def report(tests, rootdir=""):
    context = {"platform": "cpu", "device_kind": "cpu", **({"rootdir": rootdir} if rootdir else {})}
    return Report(context, {nodeid: Entry(peak=peak) for nodeid, peak in tests.items()})


def test_a_test_two_baseline_files_end_like_is_told_apart_by_the_rootdirs():
    """Run from /r/a, ``t.py::x`` is the baseline's ``a/t.py::x``: the path's suffix alone fits
    ``b/t.py::x`` as well, so only the two rootdirs can tell."""
    old = report({"a/t.py::x": 10 * MB, "b/t.py::x": 90 * MB}, "/r")
    new = report({"t.py::x": 30 * MB}, "/r/a")
    c = compare(old, new, parse_tolerances(["peak:10%"]))
    assert [(ch.nodeid, ch.old, ch.new, ch.regressed_beyond) for ch in c.changes] == [
        ("t.py::x", 10 * MB, 30 * MB, "peak:10%")
    ]
    assert (c.compared, c.renamed, c.new_tests, c.missing) == (1, 1, (), ("b/t.py::x",))
    assert c.roots == ("/r", "/r/a") and c.failed


def test_without_either_rootdir_such_a_test_is_new_and_both_of_the_baselines_missing():
    old = report({"a/t.py::x": 10 * MB, "b/t.py::x": 90 * MB})
    new = report({"t.py::x": 30 * MB}, "/r/a")
    c = compare(old, new, parse_tolerances(["peak:10%"]))
    assert (c.compared, c.renamed, c.changes) == (0, 0, ())
    assert (c.new_tests, c.missing) == (("t.py::x",), ("a/t.py::x", "b/t.py::x"))
    assert c.roots == ("", "/r/a") and c.compared_nothing and c.failed


def test_the_schema_version_of_either_report_decides_whether_its_figures_compare():
    old, new = report({"t.py::x": 10 * MB}), report({"t.py::x": 30 * MB})
    tolerances = parse_tolerances(["peak:10%"])
    v1_new = Report(new.context, new.tests, version=1)
    v1_old = Report(old.context, old.tests, version=1)
    assert compare(old, v1_new, tolerances).foreign.startswith("it was written by an older pytest-tpumem (schema")
    assert not compare(old, v1_new, tolerances).failed
    assert compare(v1_old, v1_new, tolerances).foreign == "" and compare(v1_old, v1_new, tolerances).failed


def test_a_figure_one_side_lacks_is_no_change():
    from pytest_tpumem.decisions.compare import compare_figure

    assert compare_figure("t.py::a", "peak", None, 5 * MB, ()) is None
    assert compare_figure("t.py::a", "peak", 5 * MB, None, ()) is None
    assert compare_figure("t.py::a", "peak", None, None, ()) is None
    assert compare_figure("t.py::a", "peak", 5 * MB, 5 * MB, ()) is None
    assert compare_figure("t.py::a", "peak", 5 * MB, 6 * MB, ()).new == 6 * MB
