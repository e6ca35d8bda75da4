"""The runner's memory, told in the ledger's summary (telling.ledger.session_lines): how close the
run came to the runner's limit, a climb towards it with when it would reach it, and what the
remedy (--tpumem-clear-caches) freed, step by step."""

from pytest_tpumem.decisions.ledger import Line, Session
from pytest_tpumem.readings.between import Between
from pytest_tpumem.telling.ledger import crash_lines, session_lines

MB = 10**6
LIMIT = (1000 * MB, "/sys/fs/cgroup/ci/memory.max")


def _session(rss, **kw):
    lines = tuple(Line(f"t.py::t{i}", i + 1, "passed", True, {"cpu:0": 0}, True, rss=r) for i, r in enumerate(rss))
    first = Between(True, {"cpu:0": 0}, True, 0, rss[0])
    last = Between(True, {"cpu:0": 0}, True, 0, rss[-1])
    return Session(first, last, lines, 10 * MB, **kw)


def _said(session):
    return "\n".join(session_lines(session, 5))


def test_how_close_the_run_came_and_a_climb_with_when_it_reaches_the_limit():
    said = _said(_session([100 * MB + i * 10 * MB for i in range(6)], host_limit=LIMIT))
    assert (
        "  host RSS: 100.0MB -> 150.0MB; the most after a test 150.0MB, 15% of the runner's 1.0GB "
        "(/sys/fs/cgroup/ci/memory.max)" in said
    ), said
    assert (
        "  host memory climbs 10.0MB a test over the last 6 tests: at that rate it reaches the runner's 1.0GB in "
        "about 85 more tests (--tpumem-clear-caches=host:60% gives memory back before then)" in said
    ), said


def test_with_a_remedy_set_the_climb_does_not_point_at_one():
    said = _said(_session([100 * MB + i * 10 * MB for i in range(6)], host_limit=LIMIT, remedy="module"))
    assert "in about 85 more tests\n" in said + "\n" and "gives memory back" not in said, said


def test_a_flat_run_is_no_climb_and_without_a_limit_nothing_is_said_of_one():
    flat = _said(_session([100 * MB] * 6, host_limit=LIMIT))
    assert "climbs" not in flat and "0% of the runner's 1.0GB" in flat
    unknown = _said(_session([100 * MB + i * 10 * MB for i in range(6)]))
    assert "host RSS: 100.0MB -> 150.0MB\n" in unknown + "\n" and "runner's" not in unknown


def test_the_remedy_says_what_each_step_freed():
    lines = (
        Line("t.py::a", 1, "passed", True, {"cpu:0": 0}, True, rss=300 * MB, cleared=(38, 0), cleared_host=(0, 0, 0)),
        Line(
            "t.py::b",
            2,
            "passed",
            True,
            {"cpu:0": 0},
            True,
            rss=250 * MB,
            cleared=(2, 0),
            cleared_host=(278_500, -1000, 56 * MB),
        ),
    )
    s = Session(
        Between(True, {"cpu:0": 0}, True, 0, 200 * MB),
        Between(True, {"cpu:0": 0}, True, 0, 250 * MB),
        lines,
        10 * MB,
        remedy="host:200MB",
    )
    assert (
        "  jax.clear_caches(), gc.collect() and malloc_trim(0) ran after 2 tests (--tpumem-clear-caches=host:200MB): "
        "they freed 40 programs, 0B on the devices and 56.3MB of host memory (clear_caches 278.5kB, gc -1.0kB, "
        "malloc_trim 56.0MB)" in _said(s)
    ), _said(s)


RECORDS = [
    {"start": "t.py::a", "rss": 100 * MB},
    {"test": "t.py::a", "devices": {"cpu:0": 0}, "executables": 1, "rss": 400 * MB},  # +300MB
    {"start": "t.py::b", "rss": 400 * MB},
    {"test": "t.py::b", "devices": {"cpu:0": 0}, "executables": 2, "rss": 390 * MB},  # shrank: never named
    {"start": "t.py::c", "rss": 395 * MB},
    {"test": "t.py::c", "devices": {"cpu:0": 0}, "executables": 9, "rss": 420 * MB},  # +25MB
    {"start": "t.py::d", "rss": 421 * MB},
]


def test_a_killed_worker_is_told_with_its_last_readings_its_culprits_and_the_oom_killer():
    killed = crash_lines("gw0", "t.py::d", "ledger.gw0.jsonl", RECORDS, oom=((0, "x"), (1, "/cg/memory.oom_control")))
    assert killed[1:] == [
        "  after t.py::c: cpu:0 0B; programs held 9; host RSS 420.0MB",
        "  at the start of t.py::d: host RSS 421.0MB",
        "  the tests that grew its host memory most: t.py::a +300.0MB, t.py::c +25.0MB",
        "  the kernel's OOM killer acted during the run (oom_kill 0 -> 1 in /cg/memory.oom_control): this worker was "
        "most likely killed for memory",
    ]
    other = crash_lines("gw0", "t.py::d", "ledger.gw0.jsonl", RECORDS, oom=((1, "x"), (1, "x")))
    assert not any("OOM killer" in line for line in other)  # no kill counted during the run: not said
    assert not any("OOM killer" in line for line in crash_lines("gw0", "t.py::d", "p", RECORDS))  # none read
