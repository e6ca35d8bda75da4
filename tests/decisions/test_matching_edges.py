"""match_tests at its edges: ids that name one file twice, a rootdir only one report recorded, ids
written from the filesystem's root, ids whose path leads nowhere, and parameters that hold '/'
and '::'."""

import os

from pytest_tpumem.decisions.compare import match_tests


def test_two_baseline_ids_of_one_file_give_this_runs_test_to_the_first_only():
    old = ["t.py::x", "./t.py::x"]
    assert match_tests(old, ["../t.py::x"], "/r", "/r/sub") == {"../t.py::x": "./t.py::x"}


def test_a_rootdir_only_one_report_recorded_is_not_used(tmp_path, monkeypatch):
    """Without the other rootdir an id cannot be moved: the working directory says nothing of where
    pytest ran, so the suffix alone decides (here: it cannot, two files end alike)."""
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    old = ["a/t.py::x", "b/t.py::x"]
    assert match_tests(old, ["t.py::x"], str(tmp_path), None) == {}
    assert match_tests(old, ["t.py::x"], None, os.getcwd()) == {}
    assert match_tests(old, ["t.py::x"], str(tmp_path), os.getcwd()) == {"t.py::x": "a/t.py::x"}


def test_an_id_written_from_the_filesystems_root_is_matched_by_its_suffix():
    assert match_tests(["/t.py::x"], ["a/t.py::x"]) == {"a/t.py::x": "/t.py::x"}
    assert match_tests(["/w/a/t.py::x"], ["a/t.py::x"]) == {"a/t.py::x": "/w/a/t.py::x"}


def test_ids_whose_path_leads_nowhere_are_matched_only_as_they_are():
    assert match_tests(["a/..::t"], ["b/..::t"]) == {}
    nowhere = ["a/..::t", "::t"]
    assert match_tests(nowhere, ["b/..::t"]) == {}
    assert match_tests(["b/..::t"], nowhere) == {}
    assert match_tests(nowhere, ["t.py::t"]) == {} and match_tests(["t.py::t"], nowhere) == {}
    assert match_tests(nowhere, ["::t"]) == {"::t": "::t"}


def test_files_that_end_alike_under_other_folders_are_other_files():
    assert match_tests(["x/sub/t.py::t"], ["y/sub/t.py::t"]) == {}
    assert match_tests(["x/sub/t.py::t"], ["sub/t.py::t"]) == {"sub/t.py::t": "x/sub/t.py::t"}


def test_an_id_is_split_at_its_first_double_colon_whatever_its_parameters_hold():
    """A parameter may hold '/', '..' and '::' (``test[a/../b::c]``): only what comes before the
    first '::' is the file, so two files' tests with that parameter stay apart."""
    param = "::test[a/../b::c]"
    old = ["x/t.py" + param, "y/u.py" + param]
    assert match_tests(old, ["t.py" + param]) == {"t.py" + param: "x/t.py" + param}
    assert match_tests(["t.py::test[a/../b]"], ["u.py::test[c/../b]"]) == {}
    moved = match_tests(["x/t.py" + param, "y/t.py" + param], ["t.py" + param], "/r", "/r/x")
    assert moved == {"t.py" + param: "x/t.py" + param}
