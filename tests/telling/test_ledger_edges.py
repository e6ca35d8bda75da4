"""The suite ledger's rarer sentences, pinned word for word (telling.ledger, telling.svg): a device
remedy on a backend with no bytes_limit, a host remedy's share, a flight recorder that cannot be
read or holds no reading, more numpy keepers than are listed, a crashed worker that sent nothing."""

import json

from pytest_tpumem.decisions.ledger import Line, Pattern, Session
from pytest_tpumem.measuring.ledger import HostArrays, HostExplanation
from pytest_tpumem.readings.between import Between
from pytest_tpumem.telling.ledger import account_of, crash_lines, host_lines, session_lines, session_record
from pytest_tpumem.telling.svg import session_picture

MB = 10**6
LINES = (Line("t.py::a", 1, "passed", True, {"cpu:0": 5 * MB}, True),)
FIRST = Between(True, {"cpu:0": 0}, True, None, None)
LAST = Between(True, {"cpu:0": 5 * MB, "cpu:1": 0}, True, None, None)


def test_a_device_remedy_without_a_bytes_limit_and_no_programs_read():
    assert session_lines(Session(FIRST, LAST, LINES, 10 * MB, remedy="device:80%"), 5)[:4] == [
        "1 test read between, each after its teardown; device memory as the bytes of live arrays (the runtime "
        "reports none on this backend):",
        "  cpu:0: 0B at the first test -> 5.0MB at the end",
        "  cpu:1: not started at the first test -> 0B at the end",
        "  --tpumem-clear-caches=device:80% never cleared: no device here reports a bytes_limit in memory_stats()",
    ]


def test_a_host_remedy_is_said_as_its_share_of_the_limit():
    first, last = Between(True, {}, False, None, 1), Between(True, {"tpu:0": 2 * MB}, False, 3, 2)
    session = Session(
        first, last, LINES, 10 * MB, {"tpu:0": 8 * MB}, remedy="host:60%", host_limit=(1000 * MB, "/cg/memory.max")
    )
    assert session_lines(session, 5)[:5] == [
        "1 test read between, each after its teardown; device memory as the runtime's bytes in use:",
        "  tpu:0: not started at the first test -> 2.0MB of 8.0MB (25%) at the end",
        "  programs jax holds compiled: 3 at the end",
        "  host RSS: 1B -> 2B",
        "  host:60% is 600.0MB here: 60% of 1.0GB (/cg/memory.max)",
    ]


def test_a_recorder_unread_another_runs_or_without_a_reading():
    assert crash_lines("gw0", "t.py::c", "p.jsonl", None) == ["tpumem: gw0's flight recorder p.jsonl could not be read"]
    assert crash_lines("gw0", "t.py::c", "p.jsonl", [], another_run=True) == [
        "tpumem: gw0's flight recorder p.jsonl is another run's: a run of this project that started later put its "
        "own there, and this worker's record is gone"
    ]
    assert crash_lines("gw0", "t.py::c", "p.jsonl", [{"start": "t.py::a"}]) == [
        "tpumem: gw0's flight recorder (p.jsonl): the last test it began was t.py::a",
        "  no test had ended before it: no readings",
    ]


def test_without_host_figures_a_tests_growth_is_its_rss_less_the_reading_before():
    records = [
        {"test": "t.py::a", "devices": {}, "rss": 100 * MB},
        {"start": "t.py::b"},
        {"test": "t.py::b", "devices": {}, "rss": 150 * MB},
        {"test": "t.py::c", "devices": {}, "rss": 120 * MB},
    ]
    assert crash_lines("gw0", "t.py::c", "p.jsonl", records) == [
        "tpumem: gw0's flight recorder (p.jsonl): the last test it began was t.py::b",
        "  after t.py::c: no backend yet; programs held None; host RSS 120.0MB",
        "  the tests that grew its host memory most: t.py::b +50.0MB",
    ]


def test_more_keepers_than_are_listed_programs_with_their_cost_what_malloc_keeps_and_a_cut_walk():
    arrays = tuple(HostArrays(f"global X{i} of m", (50 - i) * MB, 1, "f64[1]", None) for i in range(5))
    line = Line("t.py::a", 1, "passed", True, compiled=2, kept_free=3 * MB, host=HostExplanation(arrays, cut=True))
    assert host_lines(line, (MB, 4)) == [
        "numpy arrays alive: 50.0MB (1 array, e.g. f64[1]), kept by global X0 of m",
        "numpy arrays alive: 49.0MB (1 array, e.g. f64[1]), kept by global X1 of m",
        "numpy arrays alive: 48.0MB (1 array, e.g. f64[1]), kept by global X2 of m",
        "numpy arrays kept by 2 more keepers: 93.0MB",
        "compiled 2 programs jax holds (about 2.0MB: 1.0MB a program: the median over 4 tests that compiled and kept "
        "no arrays)",
        "the C allocator holds 3.0MB freed and not given back to the OS after it (glibc; --tpumem-clear-caches' "
        "malloc_trim(0) returns it)",
        "the walk stopped at its time limit: there may be more",
    ]


def test_a_workers_ingredients_add_up_and_a_crashed_worker_that_sent_nothing_has_an_empty_session():
    made = [("t.py:4", "t.py::a", 3 * MB), ("t.py:4", "t.py::a", 2 * MB), (None, "t.py::b", MB)]
    sent = session_record(
        Session(FIRST, LAST, LINES, 10 * MB), 1, made, {"t.py:9": {"t.py::b", "t.py::a"}}, {"t.py:9": 2}
    )
    assert sent["made_at_end"] == [["t.py:4", "t.py::a", 5 * MB], [None, "t.py::b", MB]]
    assert sent["programs_by_test"] == [["t.py:9", ["t.py::a", "t.py::b"]]]
    sent = json.loads(json.dumps(sent))
    other = {**sent, "held_programs": [["t.py:9", 3]]}
    found = account_of({"gw1": sent, "gw2": other}, {}, [{"worker": "gw0", "test": "t.py::x"}], 10 * MB)
    assert found.workers["gw0"] == Session(None, None, (), 10 * MB)
    assert (found.counts["gw0"], found.crashed) == (0, {"gw0": "t.py::x"})
    assert found.merged.patterns == (Pattern("t.py:9", 2, programs=5),)


def test_a_test_named_with_no_device_read_is_not_marked():
    record = {"test": "t.py::a", "index": 1, "devices": {}, "change": {}, "left": 20 * MB}
    assert 'class="named"' not in session_picture([record], 1, 10 * MB, "ledger", True)
