"""The suite ledger's rules its pytest hooks apply (glue.ledger calls them): a test's outcome from
its reports, who owns what a fixture makes by its scope, what --tpumem-clear-caches freed, and a
pytest-xdist worker's share of the runner's memory limit."""

import pytest

from pytest_tpumem.decisions.ledger import host_share, outcome_after, owner_of_fixture, remedy_freed
from pytest_tpumem.readings.between import Between

MB = 10**6


def _outcome(*reports):
    """The outcome after ``reports`` ((when, failed, skipped, xfail) each), from none said."""
    outcome = ""
    for report in reports:
        outcome = outcome_after(outcome, *report)
    return outcome


SETUP_OK, CALL_OK, TEARDOWN_OK = (
    ("setup", False, False, False),
    ("call", False, False, False),
    ("teardown",) + (False,) * 3,
)


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        ([SETUP_OK, CALL_OK, TEARDOWN_OK], "passed"),
        ([SETUP_OK, ("call", True, False, False), TEARDOWN_OK], "failed"),
        ([("setup", True, False, False)], "error"),
        ([SETUP_OK, CALL_OK, ("teardown", True, False, False)], "error"),  # its call passed, its teardown not
        ([SETUP_OK, ("call", True, False, False), ("teardown", True, False, False)], "error"),
        ([("setup", False, True, False)], "skipped"),
        ([("setup", False, True, True)], "skipped"),  # xfail(run=False): never called, nothing raised
        ([SETUP_OK, ("call", False, True, False), TEARDOWN_OK], "skipped"),  # pytest.skip() in the call
        ([SETUP_OK, ("call", False, True, True), TEARDOWN_OK], "xfailed"),  # it raised, as expected
        ([SETUP_OK, ("call", False, False, True), TEARDOWN_OK], "passed"),  # xfail that passed (XPASS)
        ([SETUP_OK, ("call", False, True, True), ("teardown", True, False, False)], "error"),
        ([SETUP_OK, TEARDOWN_OK], ""),  # no call reported: nothing to say
    ],
)
def test_a_tests_outcome_from_its_reports(reports, expected):
    assert _outcome(*reports) == expected


def test_a_later_report_that_says_nothing_new_keeps_the_outcome():
    assert outcome_after("skipped", "call", False, False, False) == "skipped"
    assert outcome_after("passed", "teardown", False, True, False) == "passed"
    assert outcome_after("xfailed", "teardown", False, False, False) == "xfailed"


@pytest.mark.parametrize("scope", ["session", "package", "module", "class"])
def test_what_a_wider_scope_fixture_makes_is_its_own(scope):
    assert owner_of_fixture(scope, "params", "tests/t.py") == f"{scope} fixture params (tests/t.py)"
    assert owner_of_fixture(scope, "params", "") == f"{scope} fixture params"  # a conftest at the rootdir


def test_what_a_function_scoped_fixture_makes_is_the_tests():
    assert owner_of_fixture("function", "params", "tests/t.py") is None


def test_clearing_the_caches_frees_the_programs_and_device_bytes_read_before_less_after():
    before = Between(True, {"gpu:0": 900 * MB, "gpu:1": 100 * MB}, executables=40)
    after = Between(True, {"gpu:0": 300 * MB, "gpu:1": 150 * MB}, executables=5)
    freed, host = remedy_freed(before, after, [1000 * MB, 700 * MB, 650 * MB, 640 * MB])
    assert freed == (35, 550 * MB)  # one device grew meanwhile: the sum of both is what was freed
    assert host == (300 * MB, 50 * MB, 10 * MB)  # clear_caches, gc.collect, malloc_trim, each its own


def test_a_step_that_gave_memory_back_to_none_or_took_more_says_so_with_its_sign():
    freed, host = remedy_freed(Between(True, {}), Between(True, {}), [500 * MB, 500 * MB, 520 * MB, 400 * MB])
    assert freed == (0, 0) and host == (0, -20 * MB, 120 * MB)


def test_programs_jax_does_not_list_count_as_none_held():
    listed = Between(True, {"cpu:0": 0}, executables=12)
    assert remedy_freed(listed, Between(True, {"cpu:0": 0}), [1, 1, 1, 1])[0] == (12, 0)
    assert remedy_freed(Between(True, {"cpu:0": 0}), listed, [1, 1, 1, 1])[0] == (-12, 0)


@pytest.mark.parametrize("unread", [0, 1, 2, 3])
def test_host_memory_a_step_freed_is_said_only_where_every_reading_was_read(unread):
    rss = [4 * MB, 3 * MB, 2 * MB, MB]
    rss[unread] = None
    assert remedy_freed(Between(True, {}), Between(True, {}), rss)[1] is None


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        ("4", (250 * MB, "memory.max, shared by 4 pytest-xdist workers")),
        ("3", (333_333_333, "memory.max, shared by 3 pytest-xdist workers")),  # rounded down to a byte
        ("2", (500 * MB, "memory.max, shared by 2 pytest-xdist workers")),
        ("1", (1000 * MB, "memory.max")),  # one worker: the whole limit
        ("", (1000 * MB, "memory.max")),  # not a worker
        ("auto", (1000 * MB, "memory.max")),  # not a count
        ("0", (1000 * MB, "memory.max")),
    ],
)
def test_each_pytest_xdist_worker_gets_its_share_of_the_runners_limit(workers, expected):
    assert host_share(1000 * MB, "memory.max", workers) == expected
