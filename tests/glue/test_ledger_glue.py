"""The suite ledger's part of the active plugin (glue.ledger.Ledger), its hooks called directly on
real readings of the CPU backend: what a wider-scope fixture makes is its own, a setup or teardown
that raised is an error, what --tpumem-clear-caches freed, and what the pytest-xdist controller
takes from each worker for the JSON report."""

import gc
from types import SimpleNamespace

import jax.numpy as jnp
import pytest

from pytest_tpumem.decisions.ledger import Line, Session, line_of
from pytest_tpumem.glue.ledger import LEDGER_SAID, LEDGER_SESSION, LEDGER_TESTS, Ledger
from pytest_tpumem.glue.options import Settings
from pytest_tpumem.readings.between import Between
from pytest_tpumem.telling.ledger import report_record, session_record

MB = 10**6
TEST = "t.py::test_a"


@pytest.fixture
def ledger(pytestconfig):
    """The ledger of a run with no flight recorder, a test running, jax's CPU backend started."""
    jnp.ones(1).block_until_ready()
    found = Ledger(pytestconfig, Settings(enabled=True, ledger_path="off"))
    found.first = found.last = found.reader.read("(before the first test)")
    found.current = TEST
    return found


def _fixture(scope, value=None):
    """A fixture's definition as pytest hands it to pytest_fixture_setup, set up with ``value``."""
    return SimpleNamespace(scope=scope, argname="big", baseid="t.py", cached_result=(value, None, None))


def _set_up(ledger, fixturedef, make):
    """Drives the ledger's pytest_fixture_setup wrapper around a setup that makes ``make()``."""
    hook = ledger.pytest_fixture_setup(fixturedef, None)
    next(hook)
    value = make()
    fixturedef.cached_result = (value, None, None)
    with pytest.raises(StopIteration) as done:
        hook.send(value)
    assert done.value.value is value  # the fixture's value goes on to pytest unchanged
    return value


@pytest.mark.parametrize("scope", ["session", "package", "module", "class"])
def test_what_a_wider_scope_fixture_makes_is_its_own_and_its_end_is_kept(ledger, scope):
    owner = f"{scope} fixture big (t.py)"
    value = _set_up(ledger, _fixture(scope), lambda: jnp.ones(250_000))  # 1 MB
    assert ledger.set_up == [owner] and ledger.fixture_bytes[owner] == MB and ledger.active[owner] is not None
    reading = ledger.reader.read(TEST)
    assert reading.owned.get(owner) == MB and reading.owned.get(TEST, 0) == 0  # not blamed on the test
    ledger.pytest_fixture_post_finalizer(_fixture(scope, value), None)
    assert ledger.ended == [owner] and owner not in ledger.active


def test_what_a_function_scope_fixture_makes_is_the_tests(ledger):
    value = _set_up(ledger, _fixture("function"), lambda: jnp.ones(250_000))
    assert ledger.set_up == [] and ledger.fixture_bytes == {}
    assert ledger.reader.read(TEST).owned.get(TEST) == MB
    ledger.pytest_fixture_post_finalizer(_fixture("function", value), None)
    assert ledger.ended == []


def _report(outcome, when, nodeid=TEST):
    return pytest.TestReport(nodeid, ("t.py", 0, "test_a"), {}, outcome, None, when)


@pytest.mark.parametrize(
    ("reports", "outcome"),
    [
        ([("failed", "setup")], "error"),
        ([("passed", "setup"), ("passed", "call"), ("failed", "teardown")], "error"),
        ([("passed", "setup"), ("failed", "call"), ("passed", "teardown")], "failed"),
        ([("passed", "setup"), ("passed", "call"), ("passed", "teardown")], "passed"),
        ([("skipped", "setup")], "skipped"),
    ],
)
def test_a_setup_or_teardown_that_raised_is_an_error_and_a_call_that_raised_a_failure(ledger, reports, outcome):
    for report in reports:
        ledger.pytest_runtest_logreport(_report(*report))
    ledger.pytest_runtest_logreport(_report("failed", "call", "t.py::test_other"))  # another test's: not this one's
    assert ledger.outcome == outcome


def test_clearing_the_caches_says_the_device_bytes_it_freed(ledger):
    """What only a reference cycle kept alive on a device is freed by the remedy's gc.collect(): the
    line says those bytes freed (before less after), and the devices' figures after it."""
    gc.collect()
    cycle = [jnp.ones(250_000)]  # 1 MB on cpu:0
    cycle.append(cycle)
    before = ledger.reader.read(TEST)
    del cycle
    line = line_of(TEST, 1, "passed", before, ledger.last)
    after, cleared = ledger._clear(TEST, before, line)
    assert cleared.cleared is not None and cleared.cleared[1] >= MB, cleared.cleared
    assert cleared.cleared[1] == sum(before.devices.values()) - sum(after.devices.values())
    assert cleared.devices == after.devices and cleared.rss == after.rss


def test_the_controller_reports_the_tests_each_worker_read(ledger):
    """Under pytest-xdist the JSON report's ledger is every worker's tests, taken from what each
    worker sent when it went down (beside its session, which is told in the account)."""
    line = Line(TEST, 1, "passed", True, {"cpu:0": 12 * MB}, True, residue=12 * MB, rss=100 * MB)
    session = Session(None, Between(True, {"cpu:0": 12 * MB}, True, owned={TEST: 12 * MB}), (line,), 10 * MB)
    output = {
        LEDGER_SESSION: session_record(session, 1, [], {}, {}),
        LEDGER_SAID: {"picture": None, "errors": []},
        LEDGER_TESTS: {TEST: {**report_record(line), "worker": "gw1"}},
    }
    ledger.from_worker("gw1", output)
    tests = ledger.report_part().tests
    assert tests == {TEST: {**report_record(line), "worker": "gw1"}} and tests[TEST]["residue"] == 12 * MB
    assert ledger.worker_sessions == {"gw1": output[LEDGER_SESSION]}
