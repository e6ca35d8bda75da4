"""How the suite ledger is told: the flight recorder's records (a JSON object a line), the summary
at the end of a run, and what a pytest-xdist controller adds to a crashed worker's report."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ..decisions.ledger import WORKERS_LOOKS, Line, Session, account, climb, program_cost, worker_order
from ..defaults import HOST_ARRAY_MIN
from ..measuring.ledger import BEFORE_TESTS, Explanation, Holder, HostArrays, HostExplanation, Made
from ..readings.between import Between
from ..units import format_delta, format_size
from .words import plural

RECORDER_SCHEMA = "pytest-tpumem-ledger"
RECORDER_VERSION = 1
STAND_IN = "the bytes of live arrays (the runtime reports none on this backend)"
SHOWN_SITES = 3  # the lines of code a named test's explanation lists
SHOWN_PEAKS = 5  # the highest per-test peaks the summary lists
RECORDER_MAX_BYTES = 64 << 20  # the most of a crashed worker's flight recorder that is read (its end)


def _site(site: Any) -> str:
    return str(site) if site is not None else "a line jax recorded no stack for"


def recorder_header(pid: int, worker: str, run: str | None = None) -> dict[str, Any]:
    """The flight recorder's first line; ``run``: pytest-xdist's id of the run, in a worker."""
    header = {"schema": RECORDER_SCHEMA, "version": RECORDER_VERSION, "pid": pid, "worker": worker or None}
    if run is not None:
        header["run"] = run
    return header


def recorder_replaced(path: str) -> str:
    return (
        f"tpumem: the ledger's flight recorder {path} is now another run's: a run of this project that started "
        "after this one put its own there (this run's record is gone; give each run its own --tpumem-ledger)"
    )


def picture_beside(json_path: str | None, recorder: str | None, worker: str = "") -> str | None:
    """The session's picture: beside the JSON report (``report.json`` -> ``report.ledger.svg``, a
    pytest-xdist worker's ``report.ledger.gw1.svg``), else beside the flight recorder
    (``ledger.jsonl`` -> ``ledger.svg``: a worker's recorder is named with its id already); None
    where neither is written."""
    if json_path is not None:
        root = os.path.splitext(json_path)[0] + ".ledger"
        return f"{root}.{worker}.svg" if worker else f"{root}.svg"
    if recorder is None:
        return None
    return os.path.splitext(recorder)[0] + ".svg"


def recorder_not_written(path: str, error: BaseException) -> str:
    reason = getattr(error, "strerror", None) or error
    return f"tpumem: the ledger's flight recorder could not be written to {path}: {reason}"


def picture_written(path: str, worker: str = "") -> str:
    whose = f"{worker}'s" if worker else "the session's"
    return f"{whose} picture (memory and programs after each test): {path}"


def picture_not_written(path: str, error: BaseException) -> str:
    reason = getattr(error, "strerror", None) or error
    return f"tpumem: the session's picture could not be written to {path}: {reason}"


REPORT_KEYS = (  # report_record's
    "index",
    "outcome",
    "started",
    "residue",
    "left",
    "compiled",
    "devices",
    "change",
    "stand_in",
    "executables",
    "outside",
    "peaks",
    "cleared",
    "made",
    "held",
    "traceback",
    "collected",
    "host",
)


def report_record(line: Line) -> dict[str, Any]:
    """A test's line as the JSON report keeps it (docs/report-schema.md): its figures, the device
    memory and programs after it (what the session's picture draws), and a named test's
    explanation; the keys of REPORT_KEYS (``started`` only where it is false, and those after
    ``executables`` only where they say something)."""
    record: dict[str, Any] = {
        "index": line.index,
        "outcome": line.outcome,
        **({} if line.started else {"started": False}),
        "residue": line.residue,
        "left": line.left,
        "compiled": line.compiled,
        "devices": dict(line.devices),
        "change": dict(line.change),
        "stand_in": line.stand_in,
        "executables": line.executables,
    }
    if line.outside:
        record["outside"] = line.outside
    if line.peaks:
        record["peaks"] = dict(line.peaks)
    if line.cleared is not None:
        record["cleared"] = {"programs": line.cleared[0], "bytes": line.cleared[1]}
        if line.cleared_host is not None:
            record["cleared"]["host"] = dict(zip(REMEDY_STEPS, line.cleared_host))
    if line.explanation is not None:
        record["made"] = [
            {"site": _site(m.site), "bytes": m.nbytes, "arrays": m.count, "shape": m.shape}
            for m in line.explanation.made
        ]
        record["held"] = [{"by": h.holder, "path": h.path, "bytes": h.nbytes} for h in line.explanation.held]
        record["traceback"] = line.explanation.traceback
        record["collected"] = line.explanation.collected
    if line.rss is not None:
        record["host"] = host_record(line)
    return record


def host_record(line: Line) -> dict[str, Any]:
    """A test's host figures as the JSON report keeps them: RSS after it, what it grew by, the
    change in what the C allocator keeps freed, its jax arrays on CPU devices; for a test named
    for host memory, the numpy arrays a look found and what keeps them."""
    record: dict[str, Any] = {"rss": line.rss, "grew": line.grew, "kept_free": line.kept_free}
    if line.backend_started:
        record["backend_started"] = True
    if line.fixtures_grew:
        record["fixtures_grew"] = line.fixtures_grew
    if line.host_arrays:
        record["jax_arrays"] = line.host_arrays
    if line.host is not None:
        record.update(host_record_of(line.host) or {})
    return record


def host_record_of(host: Any) -> dict[str, Any] | None:
    """A host explanation (measuring.ledger.HostExplanation) as the JSON report keeps it."""
    if host is None:
        return None
    record: dict[str, Any] = {
        "numpy": [
            {
                "bytes": a.nbytes,
                "arrays": a.count,
                "shape": a.shape,
                "kept_by": a.keeper or None,
                "site": _site_text(a.site),
            }
            for a in host.numpy
        ],
        "since": host.since or None,
        "programs": [{"site": _site_text(site), "programs": n} for site, n in host.programs],
    }
    if host.cut:
        record["cut"] = True
    return record


def line_record(line: Line) -> dict[str, Any]:
    """A test's line as the flight recorder writes it: the report's record (report_record), the
    host's RSS after it and the wider-scope fixtures it set up or ended."""
    record: dict[str, Any] = {"test": line.test, **report_record(line), "rss": line.rss}
    if line.fixtures:
        record["fixtures"] = dict(line.fixtures)
    if line.ended:
        record["ended"] = dict(line.ended)
    return record


def end_record(session: Session | None) -> dict[str, Any]:
    if session is None:
        return {"end": True, "tests": 0}
    last = session.last
    return {
        "end": True,
        "tests": len(session.lines),
        "devices": last.devices,
        "executables": last.executables,
        "rss": last.rss,
    }


def explanation_lines(line: Line) -> list[str]:
    """Why a named test's residue is what it is, a line each (indented by the caller)."""
    e = line.explanation or Explanation()
    out = _made_lines(e.made, line.residue)
    for h in e.held[:SHOWN_SITES]:
        out.append(f"kept by {h.holder}{' at ' + h.path if h.path else ''}: {format_size(h.nbytes)}")
    if e.traceback:
        out.append(
            f"{format_size(e.traceback)} of it kept by its failure's traceback (sys.last_traceback), which pytest "
            "drops when the next test starts: not counted"
        )
    if e.collected:
        out.append(f"gc.collect() freed {format_size(e.collected)} more (reference cycles): not counted")
    for site, n in e.programs[:SHOWN_SITES]:
        out.append(f"compiled {plural(n, 'program')} jax still holds at {_site(site)} (jax.clear_caches() frees them)")
    return out


def _made_lines(made: tuple[Made, ...], residue: int) -> list[str]:
    """The lines of code that made a residue's arrays: the first few that made 1% of it or more, then the rest."""
    shown = [m for m in made[:SHOWN_SITES] if m.nbytes * 100 >= residue]
    out = [
        f"made at {_site(m.site)}: {format_size(m.nbytes)} ({plural(m.count, 'array')}, e.g. {m.shape})" for m in shown
    ]
    if len(made) > len(shown):
        rest = sum(m.nbytes for m in made[len(shown) :])
        out.append(f"made at {plural(len(made) - len(shown), 'more line')}: {format_size(rest)}")
    return out


def _devices(reading: Any) -> dict[str, int]:
    return reading.devices if reading is not None and reading.started else {}


def _fate(session: Session, test: str) -> str:
    """What became of a test's residue by the end of the run."""
    end = session.alive_at_end(test)
    if not end:
        return "freed later in the run"
    kept = session.after_gc.get(test, 0)
    if kept < end:
        return (
            f"{format_size(end)} still alive at the end, {format_size(end - kept)} of it in reference cycles "
            "that gc.collect() freed"
        )
    return f"{format_size(end)} still alive at the end"


def _totals(session: Session) -> list[str]:
    """The session's memory from the first test to the end: devices, programs, host, clearing."""
    first, last = _devices(session.first), _devices(session.last)
    what = STAND_IN if session.last.stand_in else "the runtime's bytes in use"
    out = [f"{plural(len(session.lines), 'test')} read between, each after its teardown; device memory as {what}:"]
    for label, end in last.items():
        limit = session.bytes_limit.get(label)
        start = first.get(label)
        begun = format_size(start) if start is not None else "not started"
        of_limit = f" of {format_size(limit)} ({end / limit:.0%})" if limit else ""
        out.append(f"  {label}: {begun} at the first test -> {format_size(end)}{of_limit} at the end")
    start_exe = session.first.executables if session.first is not None and session.first.started else None
    if session.last.executables is not None:
        began = f"{start_exe} at the first test -> " if start_exe is not None else ""
        out.append(f"  programs jax holds compiled: {began}{session.last.executables} at the end")
    return out + _host_totals(session) + _remedy(session)


def _host_totals(session: Session) -> list[str]:
    """The host's memory from the first test to the end, where jax's backend started, its climb."""
    if session.first is None or session.first.rss is None or session.last.rss is None:
        return []
    out = [f"  host RSS: {format_size(session.first.rss)} -> {format_size(session.last.rss)}{_of_limit(session)}"]
    started = session.backend_start()
    if started is not None and started.grew is not None:
        out.append(
            f"  jax's backend started in test {started.index} of {len(session.lines)}: host memory "
            f"{format_delta(started.grew)} in it (the runtime, its compiler and plugins load once a process; "
            "no test is named for it)"
        )
    return out + _climb(session)


def _remedy(session: Session) -> list[str]:
    """What --tpumem-clear-caches freed, what its share of the host's limit comes to, and that a
    device trigger never fires where no device reports a limit."""
    remedy = f"--tpumem-clear-caches={session.remedy}" if session.remedy else "--tpumem-clear-caches"
    out = []
    times, programs, freed = session.cleared()
    if times:
        out.append(
            f"  jax.clear_caches(), gc.collect() and malloc_trim(0) ran after {plural(times, 'test')} ({remedy}): "
            f"they freed {_freed(session, programs, freed)}"
        )
    if session.host_limit is not None and session.remedy.startswith("host:") and session.remedy.endswith("%"):
        limit, source = session.host_limit
        percent = int(session.remedy[len("host:") : -1])
        out.append(
            f"  {session.remedy} is {format_size(limit * percent // 100)} here: {percent}% of {format_size(limit)} "
            f"({source})"
        )
    if session.remedy.startswith("device:") and not session.bytes_limit:
        out.append(f"  {remedy} never cleared: no device here reports a bytes_limit in memory_stats()")
    return out


def _freed(session: Session, programs: int, freed: int) -> str:
    """What the remedy freed: programs and device bytes, and host memory step by step where read."""
    host = session.cleared_host()
    if host is None:
        return f"{plural(programs, 'program')} and {format_size(freed)} on the devices"
    steps = ", ".join(f"{step} {format_size(n)}" for step, n in zip(REMEDY_STEPS, host))
    return f"{plural(programs, 'program')}, {format_size(freed)} on the devices and {format_size(sum(host))} of host memory ({steps})"


def _of_limit(session: Session) -> str:
    """How close the run came to the runner's memory limit: the most host memory after a test."""
    rss = [line.rss for line in session.lines if line.rss is not None]
    if session.host_limit is None or not rss:
        return ""
    limit, source = session.host_limit
    most = max(rss)
    return f"; the most after a test {format_size(most)}, {most / limit:.0%} of the runner's {format_size(limit)} ({source})"


def _climb(session: Session) -> list[str]:
    """Where host memory climbs towards the runner's limit: its rate and when it would reach it."""
    if session.host_limit is None:
        return []
    found = climb([line.rss for line in session.lines if line.rss is not None], session.host_limit[0])
    if found is None:
        return []
    remedy = "" if session.remedy else " (--tpumem-clear-caches=host:60% gives memory back before then)"
    return [
        f"  host memory climbs {format_size(int(found.rate))} a test over the last {plural(found.over, 'test')}: "
        f"at that rate it reaches the runner's {format_size(session.host_limit[0])} in about "
        f"{plural(found.tests_left, 'more test')}{remedy}"
    ]


REMEDY_STEPS = ("clear_caches", "gc", "malloc_trim")  # --tpumem-clear-caches' steps, as the JSON names them


def _nowhere(test: str) -> str:
    return ""


def _runtime(session: Session, top: int, where: Callable[[str], str] = _nowhere) -> list[str]:
    """What only a runtime that reports bytes in use shows (GPU, TPU): memory no array holds, peaks;
    ``where``: what follows a test's id (its pytest-xdist worker)."""
    out = []
    outside = session.grew_outside(top)
    if outside:
        out.append(
            f"{plural(len(outside), 'test')} grew the device memory that no live array holds by "
            f"{format_size(session.threshold)} or more (programs jax compiled, the runtime's own buffers):"
        )
        for line in outside:
            compiled = f"; it compiled {plural(line.compiled, 'program')} jax holds" if line.compiled else ""
            out.append(f"  {format_delta(line.outside)}  {line.test}{where(line.test)}{compiled}")
    highest = session.highest(min(top, SHOWN_PEAKS))
    if highest:
        out.append(
            "the highest peaks, of the tests that raised the runtime's high-water mark (peak_bytes_in_use: a test "
            "under an earlier test's mark has no peak of its own to read):"
        )
        for line in highest:
            marks = ", ".join(f"{label} {format_size(n)}" for label, n in line.peaks.items())
            out.append(f"  {marks}  {line.test}{where(line.test)}")
    return out


def _residues(
    session: Session, top: int, where: Callable[[str], str] = _nowhere, fate: Callable[[str], str] | None = None
) -> list[str]:
    """The tests named for what they left, why, and the failed tests whose traceback kept arrays;
    ``where``: what follows a test's id, ``fate``: what became of its residue (_fate)."""
    fate = fate or (lambda test: _fate(session, test))
    least = format_size(session.threshold)
    out = []
    worst = session.worst(top)
    count = session.named_count()
    if count:
        out.append(
            f"{plural(count, 'test')} left {least} or more of the arrays they made alive after their teardown "
            f"(--tpumem-residue){', the largest ' + str(len(worst)) if len(worst) < count else ''}:"
        )
        for line in worst:
            outcome = f" ({line.outcome})" if line.outcome and line.outcome != "passed" else ""  # failed, xfailed, ...
            out.append(f"  {format_size(line.left)}  {line.test}{where(line.test)}{outcome}")
            out += [f"      {x}" for x in explanation_lines(line)]
            out.append(f"      {fate(line.test)}")
    elif session.threshold:
        out.append(f"no test left {least} or more of the arrays it made alive after its teardown (--tpumem-residue)")
    return out + _kept_by_tracebacks(session, top, where, fate)


def _kept_by_tracebacks(
    session: Session, top: int, where: Callable[[str], str], fate: Callable[[str], str]
) -> list[str]:
    """The failed tests whose traceback kept the threshold or more of their arrays alive."""
    kept = session.kept_by_tracebacks()
    if not kept:
        return []
    least = format_size(session.threshold)
    out = [f"{plural(len(kept), 'failed test')} kept {least} or more of their arrays alive by the failure's traceback:"]
    for line in kept[:top]:
        assert line.explanation is not None  # kept_by_tracebacks() lists explained lines only
        expected = " (xfailed)" if line.outcome == "xfailed" else ""
        out.append(
            f"  {format_size(line.explanation.traceback)}  {line.test}{where(line.test)}{expected}: {fate(line.test)}"
        )
    return out


def _patterns(session: Session, top: int) -> list[str]:
    cost = program_cost(session.lines, session.threshold)
    out = []
    for p in session.patterns[:top]:
        if p.nbytes:
            out.append(f"{p.tests} tests left arrays made at {_site(p.site)} alive: {format_size(p.nbytes)} at the end")
        else:
            host = f", about {format_size(p.programs * cost[0])} of host memory ({_cost_text(cost)})" if cost else ""
            out.append(
                f"{p.tests} tests compiled programs at {_site(p.site)} that jax's caches keep: "
                f"{p.programs} at the end{host} (jax.clear_caches() frees them)"
            )
    return out


def _cost_text(cost: tuple[int, int]) -> str:
    return (
        f"{format_size(cost[0])} a program: the median over {plural(cost[1], 'test')} that compiled and kept no arrays"
    )


def host_lines(line: Line, cost: tuple[int, int] | None) -> list[str]:
    """Why a test named for host memory grew it, a line each (indented by the caller): the numpy
    arrays a look found and what keeps them, its jax arrays on CPU devices, the programs it
    compiled, what the C allocator kept; or that nothing alive explains it."""
    h = line.host or HostExplanation()
    out = _numpy_lines(h)
    if line.host_arrays:
        out.append(
            f"jax arrays it made, alive on the CPU device (host memory on this backend): {format_size(line.host_arrays)}"
        )
    if line.compiled:
        out.append(_compiled(line.compiled, h.programs, cost))
    if line.kept_free is not None and line.kept_free > 0:
        out.append(
            f"the C allocator holds {format_size(line.kept_free)} freed and not given back to the OS after it (glibc; "
            "--tpumem-clear-caches' malloc_trim(0) returns it)"
        )
    if not h.numpy and not line.host_arrays and not line.compiled:
        out.append(
            f"nothing alive that a walk of the heap reaches explains it (numpy arrays of {format_size(HOST_ARRAY_MIN)} "
            "or more, jax arrays, programs): memory the allocator or a library kept"
        )
    if h.cut:
        out.append("the walk stopped at its time limit: there may be more")
    return out


def _compiled(compiled: int, programs: tuple[tuple[Any, int], ...], cost: tuple[int, int] | None) -> str:
    """The programs a test compiled that jax holds, what they cost in host memory, and where."""
    each = f" (about {format_size(compiled * cost[0])}: {_cost_text(cost)})" if cost else ""
    where = ", ".join(f"{n} at {_site(site)}" for site, n in programs[:SHOWN_SITES])
    return f"compiled {plural(compiled, 'program')} jax holds{each}" + (f": {where}" if where else "")


def _numpy_lines(h: HostExplanation) -> list[str]:
    """The numpy arrays a look found new, the largest keepers' a line each, and since when."""
    since = ""
    if h.since == BEFORE_TESTS:
        since = " (new since the first test started: the tests before it may have made some)"
    elif h.since:
        since = f" (new since {h.since} ended: the tests between may have made some)"
    out = []
    for a in h.numpy[:SHOWN_SITES]:
        made = f" made at {_site(a.site)}," if a.site is not None else ""
        keeper = f"kept by {a.keeper}" if a.keeper else "what keeps them was not found in time"
        out.append(
            f"numpy arrays alive{since}: {format_size(a.nbytes)} ({plural(a.count, 'array')}, e.g. {a.shape}),{made} {keeper}"
        )
    if len(h.numpy) > SHOWN_SITES:
        rest = h.numpy[SHOWN_SITES:]
        out.append(
            f"numpy arrays kept by {plural(len(rest), 'more keeper')}: {format_size(sum(a.nbytes for a in rest))}"
        )
    return out


def _host_kept(session: Session, top: int) -> list[str]:
    """The keepers of numpy arrays the run made holding the host threshold or more at the end."""
    kept = session.host_kept()
    since = session.host_end.since if session.host_end is not None else ""
    if since == BEFORE_TESTS:
        made = "made during the run"
    elif since == WORKERS_LOOKS:
        made = "made since each worker's last look"
    else:
        made = f"made since {since or session.lines[-1].test} ended"
    return [
        f"numpy arrays {made} and alive at the end: {format_size(a.nbytes)} ({plural(a.count, 'array')}, e.g. "
        f"{a.shape}), kept by {a.keeper or 'what the walk did not reach in time'}"
        for a in kept[:top]
    ]


def _host(session: Session, top: int, where: Callable[[str], str] = _nowhere) -> list[str]:
    """The tests named for the host memory they grew (--tpumem-host-residue), the most first, and
    why; then the numpy arrays many tests kept in one place."""
    least = format_size(session.host_threshold)
    count = session.host_named_count()
    if not count:
        if not session.host_threshold or not any(line.grew is not None for line in session.lines):
            return []
        none = f"no test grew the process's host memory by {least} or more (--tpumem-host-residue)"
        return [none, *_host_kept(session, top)]
    worst = session.host_worst(top)
    cost = program_cost(session.lines, session.threshold)
    out = [
        f"{plural(count, 'test')} grew the process's host memory (RSS, after it less before it) by {least} or more "
        f"(--tpumem-host-residue){', the largest ' + str(len(worst)) if len(worst) < count else ''}:"
    ]
    for line in worst:
        outcome = f" ({line.outcome})" if line.outcome and line.outcome != "passed" else ""
        out.append(f"  {format_delta(line.grew or 0)}  {line.test}{where(line.test)}{outcome}")
        out += [f"      {x}" for x in host_lines(line, cost)]
    return out + _host_kept(session, top)


def _fixtures(session: Session) -> list[str]:
    """What wider-scope fixtures held, and whether it was freed when their scope ended."""
    out = []
    ended = dict(session.fixtures_ended)
    for owner, holds in session.fixture_holds:
        paths = ", ".join(f"{h.path or 'its value'} {format_size(h.nbytes)}" for h in holds[:SHOWN_SITES])
        if owner not in ended:
            fate = "its scope had not ended at the last test"
        elif ended[owner]:
            fate = f"{format_size(ended[owner])} of it still alive after its scope ended"
        else:
            fate = "freed when its scope ended"
        out.append(f"{owner} held {paths or 'arrays outside its value'} (its own, blamed on no test): {fate}")
    holding = dict(session.fixture_holds)
    for owner, alive in session.fixtures_ended:
        if alive and owner not in holding:
            out.append(f"{owner}: {format_size(alive)} of what it made still alive after its scope ended")
    return out


def session_lines(session: Session, top: int) -> list[str]:
    """The summary: the session's memory from start to end per device, what only a runtime shows,
    the tests that left the most behind and why, the tests named for host memory, patterns across
    tests, the fixtures' memory. Where no backend started: a line saying so, then the host's lines."""
    if not _devices(session.last):
        n = len(session.lines)
        return [
            f"{plural(n, 'test')} read between; no jax backend was started: nothing on a device to account for"
        ] + _host(session, top)
    return (
        _totals(session)
        + _runtime(session, top)
        + _residues(session, top)
        + _host(session, top)
        + _patterns(session, top)
        + _fixtures(session)
    )


def change_text(change: dict[str, int]) -> str:
    return ", ".join(f"{label} {format_delta(n)}" for label, n in change.items())


def read_recorder(path: str) -> list[dict[str, Any]]:
    """A flight recorder's records (its last line, cut short by a kill, skipped); OSError where it cannot be read."""
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - RECORDER_MAX_BYTES))
        tail = f.read().decode("utf-8", "replace").splitlines()
    records = []
    for text in tail:
        try:
            record = json.loads(text)
        except ValueError:
            continue  # a line the kill cut short (or the first, where the file was cut to its last bytes)
        if isinstance(record, dict):
            records.append(record)
    return records


def another_runs(records: list[dict[str, Any]], run: Any) -> bool:
    """Whether a crashed worker's flight recorder was written by a worker of another run (pytest-xdist's
    ``testrunuid``, in the header): a run of the project that started later put its own there."""
    header = next((r for r in records if r.get("schema") == RECORDER_SCHEMA), None)
    return bool(run) and header is not None and header.get("run") != run


def crash_lines(
    worker: str,
    test: str,
    path: str,
    records: list[dict[str, Any]] | None,
    another_run: bool = False,
    oom: tuple[Any, Any] = (None, None),
) -> list[str]:
    """What a crashed pytest-xdist worker's flight recorder says: the test it started last and the
    readings after the test before it and at that test's start; the tests that grew its host memory
    most; and whether the kernel's OOM killer acted (``oom``: readings.host.oom_kills at the
    start of the run and now). ``records`` None: the file could not be read; ``another_run``: it is
    another run's."""
    if another_run:
        return [
            f"tpumem: {worker}'s flight recorder {path} is another run's: a run of this project that started later "
            "put its own there, and this worker's record is gone"
        ]
    if records is None:
        return [f"tpumem: {worker}'s flight recorder {path} could not be read"]
    started = next((r["start"] for r in reversed(records) if "start" in r), None)
    last = next((r for r in reversed(records) if "test" in r and isinstance(r.get("devices"), dict)), None)
    out = [f"tpumem: {worker}'s flight recorder ({path}): the last test it began was {started or test}"]
    if last is None:
        return out + ["  no test had ended before it: no readings"]
    return out + _last_readings(records, last) + _grew_most(records) + _killed(oom)


def _last_readings(records: list[dict[str, Any]], last: dict[str, Any]) -> list[str]:
    """The readings after the last test that ended, and at the start of the one after it."""
    devices = ", ".join(f"{label} {format_size(n)}" for label, n in last["devices"].items()) or "no backend yet"
    out = [
        f"  after {last['test']}: {devices}; programs held {last.get('executables')}; "
        f"host RSS {format_size(last.get('rss'))}"
    ]
    begun = records[-1] if records and "start" in records[-1] else None
    if begun is not None and isinstance(begun.get("rss"), int):
        out.append(f"  at the start of {begun['start']}: host RSS {format_size(begun['rss'])}")
    return out


def _grew_most(records: list[dict[str, Any]], top: int = 3) -> list[str]:
    """The tests after which the worker's host memory had grown most since the reading before
    (the start of the test, else the test before it), as its flight recorder read them."""
    grew, started = _host_growth(records)
    most = [(t, n) for t, n in sorted(grew.items(), key=lambda kv: -kv[1]) if n > 0][:top]
    if not most:
        return []
    said = [f"{t} {format_delta(n)}" + (" (jax's backend started in it)" if t in started else "") for t, n in most]
    return ["  the tests that grew its host memory most: " + ", ".join(said)]


def _host_growth(records: list[dict[str, Any]]) -> tuple[dict[str, int], set[str]]:
    """What each test grew the host memory by: its own figure (less what its wider-scope fixtures
    grew), else its RSS less the reading before; and the tests jax's backend started in."""
    grew: dict[str, int] = {}
    started: set[str] = set()
    before = None
    for r in records:
        rss = r.get("rss") if isinstance(r.get("rss"), int) else None
        host: dict[str, Any] = r["host"] if isinstance(r.get("host"), dict) else {}
        if "test" in r:
            test = str(r["test"])
            if isinstance(host.get("grew"), int):
                grew[test] = host["grew"]
                if host.get("backend_started") is True:
                    started.add(test)
            elif rss is not None and before is not None and rss > before:
                grew[test] = grew.get(test, 0) + rss - before
        before = rss if rss is not None else before
    return grew, started


def _killed(oom: tuple[Any, Any]) -> list[str]:
    """Whether the kernel's OOM killer acted in the runner's memory cgroup during the run."""
    before, now = oom
    if before is None or now is None or now[0] <= before[0]:
        return []
    return [
        f"  the kernel's OOM killer acted during the run (oom_kill {before[0]} -> {now[0]} in {now[1]}): this "
        "worker was most likely killed for memory"
    ]


def recorded_tests(records: list[dict[str, Any]], worker: str) -> dict[str, dict[str, Any]]:
    """The tests a crashed pytest-xdist ``worker``'s flight recorder holds, as the JSON report
    keeps them (report_record's keys, and the worker): what it read before it died is not lost."""
    return {
        r["test"]: {**{k: r[k] for k in REPORT_KEYS if k in r}, "worker": worker}
        for r in records
        if isinstance(r.get("test"), str) and isinstance(r.get("residue"), int)
    }


# --- pytest-xdist: each worker's session travels to the controller, which tells one account -------


def _site_text(site: Any) -> str | None:
    return None if site is None else str(site)


def _reading_record(reading: Any) -> dict[str, Any] | None:
    if reading is None:
        return None
    return {
        "started": bool(reading.started),
        "devices": dict(reading.devices),
        "stand_in": bool(reading.stand_in),
        "executables": reading.executables,
        "rss": reading.rss,
    }


def session_record(
    session: Session,
    count: int,
    made_at_end: list[tuple[Any, str, int]],
    programs_by_test: dict[Any, set[str]],
    held_programs: dict[Any, int],
) -> dict[str, Any]:
    """A worker's session as it travels to the pytest-xdist controller (plain data: execnet
    carries no objects), beside its tests' lines (report_record): the readings at its first test
    and at its end, what of each test was alive at the end, the ingredients of its patterns (sites
    as text), its fixtures' memory, and the programs each named test compiled."""
    return {
        "tests": count,
        "first": _reading_record(session.first),
        "last": _reading_record(session.last),
        "alive": {owner: n for owner, n in session.last.owned.items() if n},
        "after_gc": dict(session.after_gc),
        "bytes_limit": dict(session.bytes_limit),
        "remedy": session.remedy,
        "host_limit": list(session.host_limit) if session.host_limit is not None else None,
        "host_end": host_record_of(session.host_end),
        **_ingredients_record(made_at_end, programs_by_test, held_programs),
        "fixtures_ended": [[owner, n] for owner, n in session.fixtures_ended],
        "fixture_holds": [
            [owner, [[h.holder, h.path, h.nbytes] for h in holds]] for owner, holds in session.fixture_holds
        ],
        "programs": {
            line.test: [[_site_text(site), n] for site, n in line.explanation.programs]
            for line in session.lines
            if line.explanation is not None and line.explanation.programs
        },
    }


def _ingredients_record(
    made_at_end: list[tuple[Any, str, int]], programs_by_test: dict[Any, set[str]], held_programs: dict[Any, int]
) -> dict[str, Any]:
    """The ingredients of a worker's patterns as they travel, sites as text (_ingredients_of reads them)."""
    made: dict[tuple[str | None, str], int] = {}
    for site, test, nbytes in made_at_end:
        key = (_site_text(site), test)
        made[key] = made.get(key, 0) + nbytes
    return {
        "made_at_end": [[site, test, n] for (site, test), n in made.items()],
        "programs_by_test": [[_site_text(site), sorted(tests)] for site, tests in programs_by_test.items()],
        "held_programs": [[_site_text(site), n] for site, n in held_programs.items()],
    }


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _sizes(value: Any) -> dict[str, int]:
    return {str(k): v for k, v in value.items() if isinstance(v, int)} if isinstance(value, dict) else {}


def line_of_record(test: str, record: dict[str, Any], programs: Any = ()) -> Line:
    """A test's line again, from its record (report_record's keys, or a flight recorder's line)."""
    cleared = record.get("cleared")
    host = cleared.get("host") if isinstance(cleared, dict) else None
    figures: dict[str, Any] = record["host"] if isinstance(record.get("host"), dict) else {}
    return Line(
        test=test,
        index=_int(record.get("index")),
        outcome=str(record.get("outcome") or ""),
        started=record.get("started") is not False,
        devices=_sizes(record.get("devices")),
        stand_in=bool(record.get("stand_in")),
        change=_sizes(record.get("change")),
        residue=_int(record.get("residue")),
        executables=record.get("executables") if isinstance(record.get("executables"), int) else None,
        compiled=_int(record.get("compiled")),
        rss=_optional(record.get("rss", figures.get("rss"))),
        explanation=_explanation_of(record, programs),
        cleared=(_int(cleared.get("programs")), _int(cleared.get("bytes"))) if isinstance(cleared, dict) else None,
        cleared_host=(
            (_int(host.get(REMEDY_STEPS[0])), _int(host.get(REMEDY_STEPS[1])), _int(host.get(REMEDY_STEPS[2])))
            if isinstance(host, dict)
            else None
        ),
        peaks=_sizes(record.get("peaks")),
        outside=_int(record.get("outside")),
        grew=_optional(figures.get("grew")),
        kept_free=_optional(figures.get("kept_free")),
        host_arrays=_int(figures.get("jax_arrays")),
        host=_host_of(figures),
        backend_started=figures.get("backend_started") is True,
        fixtures_grew=_int(figures.get("fixtures_grew")),
    )


def _explanation_of(record: dict[str, Any], programs: Any) -> Explanation | None:
    """A named test's explanation again, from its record (report_record); None where it has none."""
    if not isinstance(record.get("made"), list):
        return None
    return Explanation(
        made=tuple(
            Made(m.get("site"), _int(m.get("bytes")), _int(m.get("arrays")), str(m.get("shape", "")))
            for m in record["made"]
            if isinstance(m, dict)
        ),
        held=tuple(
            Holder(str(h.get("by", "")), str(h.get("path", "")), _int(h.get("bytes")))
            for h in record.get("held") or []
            if isinstance(h, dict)
        ),
        traceback=_int(record.get("traceback")),
        collected=_int(record.get("collected")),
        programs=tuple((site, _int(n)) for site, n in programs or ()),
    )


def _optional(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _host_of(figures: Any) -> Any:
    """A named test's host explanation again, from its record (host_record); None where it has none."""
    if not isinstance(figures, dict) or not isinstance(figures.get("numpy"), list):
        return None
    return HostExplanation(
        numpy=tuple(
            HostArrays(
                str(a.get("kept_by") or ""),
                _int(a.get("bytes")),
                _int(a.get("arrays")),
                str(a.get("shape", "")),
                a.get("site"),
            )
            for a in figures["numpy"]
            if isinstance(a, dict)
        ),
        since=str(figures.get("since") or ""),
        cut=bool(figures.get("cut")),
        programs=tuple(
            (p.get("site"), _int(p.get("programs"))) for p in figures.get("programs") or () if isinstance(p, dict)
        ),
    )


def _reading_of(record: Any, owned: dict[str, int] | None = None) -> Any:
    if not isinstance(record, dict):
        return None
    return Between(
        started=bool(record.get("started")),
        devices=_sizes(record.get("devices")),
        stand_in=bool(record.get("stand_in")),
        executables=record.get("executables") if isinstance(record.get("executables"), int) else None,
        rss=record.get("rss") if isinstance(record.get("rss"), int) else None,
        owned=owned or {},
    )


def account_of(
    sessions: dict[str, dict[str, Any]],
    tests: dict[str, dict[str, Any]],
    crashed: list[dict[str, Any]],
    threshold: int,
    host_threshold: int = 0,
) -> Any:
    """The controller's account (decisions.ledger.Account) from what its workers sent: each
    worker's session_record, every test's line (report_record with its ``worker``), and the
    crashed workers (their lines, from their flight recorders, among ``tests``; their session
    ends at their last line)."""
    by_worker: dict[str, list[Line]] = {}
    for test, record in tests.items():
        worker = str(record.get("worker") or "")
        programs = (sessions.get(worker) or {}).get("programs", {}).get(test, ())
        by_worker.setdefault(worker, []).append(line_of_record(test, record, programs))
    died = {str(c.get("worker")): str(c.get("test")) for c in crashed}
    workers: dict[str, Session] = {}
    counts: dict[str, int] = {}
    for worker in sorted(set(sessions) | set(by_worker) | set(died), key=worker_order):  # the same order every run
        lines = tuple(sorted(by_worker.get(worker, []), key=lambda line: line.index))
        sent = sessions.get(worker)
        workers[worker] = _session_of(sent, lines, threshold, host_threshold)
        counts[worker] = len(lines) if sent is None else _int(sent.get("tests"), len(lines))
    made, programs_by_test, held = _ingredients_of([sessions[worker] for worker in workers if worker in sessions])
    return account(workers, counts, died, made, programs_by_test, held, threshold, host_threshold)


def _session_of(sent: dict[str, Any] | None, lines: tuple[Line, ...], threshold: int, host_threshold: int) -> Session:
    """A worker's session again, from its session_record; a crashed worker's (``sent`` None) from
    what its flight recorder held, its last line its end."""
    if sent is None:
        last = lines[-1] if lines else None
        end = Between(True, dict(last.devices), last.stand_in, last.executables, last.rss) if last else None
        return Session(None, end, lines, threshold, host_threshold=host_threshold)
    return Session(
        _reading_of(sent.get("first")),
        _reading_of(sent.get("last"), _sizes(sent.get("alive"))),
        lines,
        threshold,
        _sizes(sent.get("bytes_limit")),
        fixtures_ended=tuple((str(o), _int(n)) for o, n in sent.get("fixtures_ended") or ()),
        fixture_holds=tuple(
            (str(o), tuple(Holder(str(h), str(p), _int(n)) for h, p, n in holds))
            for o, holds in sent.get("fixture_holds") or ()
        ),
        after_gc=_sizes(sent.get("after_gc")),
        remedy=str(sent.get("remedy") or ""),
        host_limit=_host_limit(sent.get("host_limit")),
        host_threshold=host_threshold,
        host_end=_host_of(sent.get("host_end")),
    )


def _ingredients_of(
    sent: list[dict[str, Any]],
) -> tuple[list[tuple[Any, str, int]], dict[Any, set[str]], dict[Any, int]]:
    """The ingredients of the patterns over every worker, as _ingredients_record wrote each one's."""
    made = [(site, str(test), _int(n)) for one in sent for site, test, n in one.get("made_at_end") or ()]
    programs_by_test: dict[Any, set[str]] = {}
    held: dict[Any, int] = {}
    for one in sent:
        for site, names in one.get("programs_by_test") or ():
            programs_by_test.setdefault(site, set()).update(names)
        for site, n in one.get("held_programs") or ():
            held[site] = held.get(site, 0) + _int(n)
    return made, programs_by_test, held


def _host_limit(sent: Any) -> tuple[int, str] | None:
    if isinstance(sent, list) and len(sent) == 2 and isinstance(sent[0], int) and sent[0] > 0:
        return sent[0], str(sent[1])
    return None


def _worker_totals(worker: str, session: Session, count: int, crash: list[str] | None) -> list[str]:
    """A worker's memory from its first test to its end; a crashed worker's, what its flight
    recorder says (``crash``: crash_lines)."""
    if crash is not None:
        return [
            f"  {worker}: {plural(count, 'test')} read, then it crashed",
            *("    " + line.removeprefix("tpumem: ").strip() for line in crash),
        ]
    if not _devices(session.last):
        return [f"  {worker}: {plural(count, 'test')}; no jax backend was started"]
    return [f"  {worker}: {plural(count, 'test')}"] + ["  " + line for line in _totals(session)[1:]]


def workers_together(account: Any, limit: tuple[int, str] | None) -> list[str]:
    """The workers' host memory against the runner's whole limit (the kernel's OOM killer counts a
    cgroup's processes together): each worker's most after a test, added, an upper bound of what
    they held at once."""
    most = [
        max(rss) for s in account.workers.values() if (rss := [line.rss for line in s.lines if line.rss is not None])
    ]
    if len(most) < 2 or limit is None:
        return []
    total = sum(most)
    return [
        f"  the workers together: at most {format_size(total)} (each worker's most after a test, added), "
        f"{total / limit[0]:.0%} of the runner's {format_size(limit[0])} ({limit[1]})"
    ]


def account_lines(
    account: Any, top: int, crashes: dict[str, list[str]], limit: tuple[int, str] | None = None
) -> list[str]:
    """The pytest-xdist controller's summary, one over every worker (decisions.ledger.Account):
    each worker's memory from start to end (each process's is its own; a crashed worker's from its
    flight recorder, ``crashes``: its crash_lines), the workers together against the runner's
    ``limit``, then the tests named over all workers worst first, each with its worker, the
    peaks, the host memory, the patterns, the fixtures."""
    total = sum(account.counts.values())
    n = plural(len(account.counts), "pytest-xdist worker")
    sessions = account.workers
    if not any(_devices(s.last) for s in sessions.values()):
        return [
            f"{plural(total, 'test')} read between by {n}; no jax backend was started: nothing on a device to account for"
        ]
    stand_in = any(s.last is not None and s.last.stand_in for s in sessions.values() if _devices(s.last))
    what = STAND_IN if stand_in else "the runtime's bytes in use"
    out = [f"{plural(total, 'test')} read between by {n}, each after its teardown; device memory as {what}:"]

    for worker in sorted(sessions, key=worker_order):
        crash = crashes.get(worker, []) if worker in account.crashed else None
        out += _worker_totals(worker, sessions[worker], account.counts.get(worker, 0), crash)
    out += workers_together(account, limit)
    merged = account.merged

    def where(test: str) -> str:
        return f" [{account.worker_of[test]}]" if test in account.worker_of else ""

    def fate(test: str) -> str:
        worker = account.fate(test)
        if worker is not None:
            return f"not read at the end: {worker} crashed in {account.crashed[worker]}"
        return _fate(merged, test)

    return (
        out
        + _runtime(merged, top, where)
        + _residues(merged, top, where, fate)
        + _host(merged, top, where)
        + _patterns(merged, top)
        + _fixtures(merged)
    )
