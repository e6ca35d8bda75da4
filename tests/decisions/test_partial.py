"""What a baseline saved from a narrowed run keeps of the last one (decisions.partial.kept): the
tests the run did not run but that are still in the suite. The rule at its boundaries: a wrong key
(the run's own tests kept twice, a removed test kept forever) or an inverted condition fails here."""

from pytest_tpumem.decisions.partial import Selection, kept, kept_because

LAST = ("a.py::t1", "a.py::t2", "a.py::gone", "b.py::t1", "removed.py::t1")


def _exists(file):
    return file != "removed.py"


def test_a_whole_run_keeps_nothing_of_the_last_baseline():
    whole = Selection(frozenset({"a.py::t1", "a.py::t2", "b.py::t1"}))
    assert kept(LAST, {"a.py::t1", "a.py::t2", "b.py::t1"}, whole, _exists) == ()


def test_a_deselected_test_is_kept_and_a_test_the_run_measured_is_its_own():
    run = Selection(frozenset({"a.py::t1", "a.py::t2", "b.py::t1"}), frozenset({"a.py::t2", "b.py::t1"}), ("-k 't1'",))
    assert kept(LAST, {"a.py::t1"}, run, _exists) == ("a.py::t2", "b.py::t1")
    # a.py::gone: its file was collected without it (removed or renamed); removed.py: the file is gone


def test_a_test_the_run_ran_but_did_not_measure_is_dropped():
    run = Selection(frozenset({"a.py::t1", "a.py::t2"}))
    assert "a.py::t2" not in kept(LAST, {"a.py::t1"}, run, _exists)  # skipped, or its marker removed


def test_a_test_whose_file_the_run_did_not_collect_is_kept_unless_the_file_is_gone():
    paths = Selection(frozenset({"a.py::t1", "a.py::t2"}))  # `pytest a.py`
    assert kept(LAST, {"a.py::t1", "a.py::t2"}, paths, _exists) == ("b.py::t1",)
    assert kept(LAST, {"a.py::t1", "a.py::t2"}, paths, lambda file: True) == ("b.py::t1", "removed.py::t1")


def test_test_ids_or_lf_keep_a_collected_files_other_tests():
    ids = Selection(frozenset({"a.py::t1"}), partial_files="test ids given as arguments")  # `pytest a.py::t1`
    assert kept(LAST, {"a.py::t1"}, ids, _exists) == ("a.py::gone", "a.py::t2", "b.py::t1")
    whole_file = Selection(frozenset({"a.py::t1"}))  # the same collection from `pytest a.py`: t2 and gone were removed
    assert kept(LAST, {"a.py::t1"}, whole_file, _exists) == ("b.py::t1",)


def test_what_narrowed_the_run_is_said():
    assert kept_because(Selection(narrowing=("-k 'a'", "-m 'slow'"))) == "-k 'a' and -m 'slow'"
    assert kept_because(Selection(narrowing=("--lf",), partial_files="--lf")) == "--lf"
    assert kept_because(Selection(partial_files="test ids given as arguments")) == "test ids given as arguments"
    assert kept_because(Selection()) == "the paths it was given"


def test_a_tests_file_is_what_its_id_names_before_the_first_double_colon():
    """exists() is asked about the file itself, whatever the id holds after it: a class, a
    parameter with spaces or colons in it."""
    asked = []

    def exists(file):
        asked.append(file)
        return file in ("a.py", "b.py")

    last = ("gone.py::TestY::t", "b.py::TestX::t", "b.py::t[a b]", "b.py::t[x::y]")
    paths = Selection(frozenset({"a.py::t1"}))  # `pytest a.py`: b.py's tests are kept, gone.py's dropped
    assert kept(last, {"a.py::t1"}, paths, exists) == ("b.py::TestX::t", "b.py::t[a b]", "b.py::t[x::y]")
    assert set(asked) == {"b.py", "gone.py"}
    collected = Selection(frozenset({"a.py::t1", "b.py::TestX::other"}))  # b.py collected without them
    assert kept(last, {"a.py::t1"}, collected, exists) == ()


def test_a_test_dropped_does_not_end_the_look_at_the_ones_after_it():
    run = Selection(frozenset({"a.py::t1", "a.py::t2"}), frozenset({"a.py::t2"}))
    last = ("a.py::t1", "removed.py::t1", "a.py::t2", "b.py::t1")
    assert kept(last, set(), run, _exists) == ("a.py::t2", "b.py::t1")  # a.py::t1 ran unmeasured: dropped
