"""The pytest-xdist controller's one account: each worker's session sent as plain data
(telling.ledger.session_record), rebuilt (account_of) and told (account_lines) as one summary:
the named tests over every worker, worst first, each with its worker; a crashed worker's tests
from its flight recorder."""

import json

from pytest_tpumem.decisions.ledger import Line, Session
from pytest_tpumem.measuring.ledger import Explanation, Holder, Made
from pytest_tpumem.readings.between import Between
from pytest_tpumem.telling.ledger import account_lines, account_of, report_record, session_record

MB = 10**6


def _sent(lines, worker, alive=None, made=()):
    """What a worker sends: its session and its tests' records, through JSON as execnet would carry them."""
    first = Between(True, {"cpu:0": 0}, True, 1, 100 * MB)
    last = Between(True, {"cpu:0": sum(alive.values()) if alive else 0}, True, 4, 200 * MB, owned=alive or {})
    session = Session(first, last, tuple(lines), 10 * MB, after_gc=dict(alive or {}))
    record = session_record(session, len(lines), list(made), {}, {})
    tests = {line.test: {**report_record(line), "worker": worker} for line in lines}
    return json.loads(json.dumps(record)), json.loads(json.dumps(tests))


def test_one_summary_names_the_worst_over_every_worker_with_its_worker_and_its_fate():
    held = Explanation(
        made=(Made("t.py:4 in test_a", 12 * MB, 1, "f32[3000000]"),),
        held=(Holder("global HOLD of t", "[0]", 12 * MB),),
        programs=(("t.py:5 in test_a", 2),),
    )
    gw0, tests0 = _sent(
        [Line("t.py::a", 1, "passed", True, {"cpu:0": 12 * MB}, True, residue=12 * MB, explanation=held)],
        "gw0",
        alive={"t.py::a": 12 * MB},
    )
    gw1, tests1 = _sent([Line("t.py::b", 1, "failed", True, {"cpu:0": 30 * MB}, True, residue=30 * MB)], "gw1")
    said = account_lines(account_of({"gw0": gw0, "gw1": gw1}, {**tests0, **tests1}, [], 10 * MB), 5, {})
    assert said[0] == (
        "2 tests read between by 2 pytest-xdist workers, each after its teardown; device memory as the bytes of "
        "live arrays (the runtime reports none on this backend):"
    )
    assert said[1:4] == [
        "  gw0: 1 test",
        "    cpu:0: 0B at the first test -> 12.0MB at the end",
        "    programs jax holds compiled: 1 at the first test -> 4 at the end",
    ]
    start = said.index(
        "2 tests left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):"
    )
    assert said[start + 1 :] == [
        "  30.0MB  t.py::b [gw1] (failed)",
        "      freed later in the run",
        "  12.0MB  t.py::a [gw0]",
        "      made at t.py:4 in test_a: 12.0MB (1 array, e.g. f32[3000000])",
        "      kept by global HOLD of t at [0]: 12.0MB",
        "      compiled 2 programs jax still holds at t.py:5 in test_a (jax.clear_caches() frees them)",
        "      12.0MB still alive at the end",
    ]


def test_a_crashed_workers_tests_come_from_its_recorder_and_have_no_end():
    gw1, tests1 = _sent([Line("t.py::b", 1, "passed", True, {"cpu:0": 0}, True)], "gw1")
    recorded = {
        "t.py::a": {
            **report_record(Line("t.py::a", 1, "passed", True, {"cpu:0": 12 * MB}, True, residue=12 * MB)),
            "worker": "gw0",
        }
    }
    crash = [
        "tpumem: gw0's flight recorder (r.gw0.jsonl): the last test it began was t.py::x",
        "  after t.py::a: cpu:0 12.0MB",
    ]
    found = account_of(
        {"gw1": gw1}, {**tests1, **recorded}, [{"worker": "gw0", "test": "t.py::x", "said": crash}], 10 * MB
    )
    said = account_lines(found, 5, {"gw0": crash})
    assert said[1:4] == [
        "  gw0: 1 test read, then it crashed",
        "    gw0's flight recorder (r.gw0.jsonl): the last test it began was t.py::x",
        "    after t.py::a: cpu:0 12.0MB",
    ]
    assert said[-2:] == ["  12.0MB  t.py::a [gw0]", "      not read at the end: gw0 crashed in t.py::x"]


def test_no_test_named_is_said_once_for_the_run():
    gw0, tests0 = _sent([Line("t.py::a", 1, "passed", True, {"cpu:0": 0}, True, residue=MB)], "gw0")
    gw1, tests1 = _sent([Line("t.py::b", 1, "passed", True, {"cpu:0": 0}, True)], "gw1")
    said = account_lines(account_of({"gw0": gw0, "gw1": gw1}, {**tests0, **tests1}, [], 10 * MB), 5, {})
    assert (
        said.count("no test left 10.0MB or more of the arrays it made alive after its teardown (--tpumem-residue)") == 1
    )
