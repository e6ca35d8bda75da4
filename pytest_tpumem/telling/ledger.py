"""How the suite ledger is told: the flight recorder's records (a JSON object a line), the summary
at the end of a run, and what a pytest-xdist controller adds to a crashed worker's report."""

from __future__ import annotations

import json
import os
from typing import Any

from ..decisions.ledger import Line, Session
from ..measuring.ledger import Explanation
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


def recorder_header(pid: int, worker: str) -> dict[str, Any]:
    return {"schema": RECORDER_SCHEMA, "version": RECORDER_VERSION, "pid": pid, "worker": worker or None}


def recorder_not_written(path: str, error: BaseException) -> str:
    reason = getattr(error, "strerror", None) or error
    return f"tpumem: the ledger's flight recorder could not be written to {path}: {reason}"


def picture_written(path: str) -> str:
    return f"the session's picture (memory and programs after each test): {path}"


def picture_not_written(path: str, error: BaseException) -> str:
    reason = getattr(error, "strerror", None) or error
    return f"tpumem: the session's picture could not be written to {path}: {reason}"


REPORT_KEYS = (  # report_record's
    "index",
    "outcome",
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
)


def report_record(line: Line) -> dict[str, Any]:
    """A test's line as the JSON report keeps it (docs/report-schema.md): its figures, the device
    memory and programs after it (what the session's picture draws), and a named test's
    explanation; the keys of REPORT_KEYS (those after ``executables`` only where they say something)."""
    record: dict[str, Any] = {
        "index": line.index,
        "outcome": line.outcome,
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
    if line.explanation is not None:
        record["made"] = [
            {"site": _site(m.site), "bytes": m.nbytes, "arrays": m.count, "shape": m.shape}
            for m in line.explanation.made
        ]
        record["held"] = [{"by": h.holder, "path": h.path, "bytes": h.nbytes} for h in line.explanation.held]
        record["traceback"] = line.explanation.traceback
        record["collected"] = line.explanation.collected
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
    out = []
    shown = [m for m in e.made[:SHOWN_SITES] if m.nbytes * 100 >= line.residue]  # a line's 1% or more
    for m in shown:
        out.append(f"made at {_site(m.site)}: {format_size(m.nbytes)} ({plural(m.count, 'array')}, e.g. {m.shape})")
    if len(e.made) > len(shown):
        rest = sum(m.nbytes for m in e.made[len(shown) :])
        out.append(f"made at {plural(len(e.made) - len(shown), 'more line')}: {format_size(rest)}")
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
    if session.first is not None and session.first.rss is not None and session.last.rss is not None:
        out.append(f"  host RSS: {format_size(session.first.rss)} -> {format_size(session.last.rss)}")
    times, programs, freed = session.cleared()
    if times:
        out.append(
            f"  jax.clear_caches() ran after {plural(times, 'test')} (--tpumem-clear-caches): it freed "
            f"{plural(programs, 'program')} and {format_size(freed)} on the devices"
        )
    return out


def _runtime(session: Session, top: int) -> list[str]:
    """What only a runtime that reports bytes in use shows (GPU, TPU): memory no array holds, peaks."""
    out = []
    outside = session.grew_outside(top)
    if outside:
        out.append(
            f"{plural(len(outside), 'test')} grew the device memory that no live array holds by "
            f"{format_size(session.threshold)} or more (programs jax compiled, the runtime's own buffers):"
        )
        for line in outside:
            compiled = f"; it compiled {plural(line.compiled, 'program')} jax holds" if line.compiled else ""
            out.append(f"  {format_delta(line.outside)}  {line.test}{compiled}")
    highest = session.highest(min(top, SHOWN_PEAKS))
    if highest:
        out.append(
            "the highest peaks, of the tests that raised the runtime's high-water mark (peak_bytes_in_use: a test "
            "under an earlier test's mark has no peak of its own to read):"
        )
        for line in highest:
            marks = ", ".join(f"{label} {format_size(n)}" for label, n in line.peaks.items())
            out.append(f"  {marks}  {line.test}")
    return out


def _residues(session: Session, top: int) -> list[str]:
    """The tests named for what they left, why, and the failed tests whose traceback kept arrays."""
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
            out.append(f"  {format_size(line.left)}  {line.test}{outcome}")
            out += [f"      {x}" for x in explanation_lines(line)]
            out.append(f"      {_fate(session, line.test)}")
    elif session.threshold:
        out.append(f"no test left {least} or more of the arrays it made alive after its teardown (--tpumem-residue)")
    kept = session.kept_by_tracebacks()
    if kept:
        out.append(
            f"{plural(len(kept), 'failed test')} kept {least} or more of their arrays alive by the failure's traceback:"
        )
        for line in kept[:top]:
            assert line.explanation is not None  # kept_by_tracebacks() lists explained lines only
            expected = " (xfailed)" if line.outcome == "xfailed" else ""
            out.append(
                f"  {format_size(line.explanation.traceback)}  {line.test}{expected}: {_fate(session, line.test)}"
            )
    return out


def _patterns(session: Session, top: int) -> list[str]:
    out = []
    for p in session.patterns[:top]:
        if p.nbytes:
            out.append(f"{p.tests} tests left arrays made at {_site(p.site)} alive: {format_size(p.nbytes)} at the end")
        else:
            out.append(
                f"{p.tests} tests compiled programs at {_site(p.site)} that jax's caches keep: "
                f"{p.programs} at the end (jax.clear_caches() frees them)"
            )
    return out


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
    the tests that left the most behind and why, patterns across tests, the fixtures' memory."""
    if not _devices(session.last):
        n = len(session.lines)
        return [f"{plural(n, 'test')} read between; no jax backend was started: nothing on a device to account for"]
    return (
        _totals(session)
        + _runtime(session, top)
        + _residues(session, top)
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


def crash_lines(worker: str, test: str, path: str, records: list[dict[str, Any]] | None) -> list[str]:
    """What a crashed pytest-xdist worker's flight recorder says: the test it started last and the
    readings after the test before it (``records`` None: the file could not be read)."""
    if records is None:
        return [f"tpumem: {worker}'s flight recorder {path} could not be read"]
    started = next((r["start"] for r in reversed(records) if "start" in r), None)
    last = next((r for r in reversed(records) if "test" in r and isinstance(r.get("devices"), dict)), None)
    out = [f"tpumem: {worker}'s flight recorder ({path}): the last test it began was {started or test}"]
    if last is None:
        out.append("  no test had ended before it: no readings")
        return out
    devices = ", ".join(f"{label} {format_size(n)}" for label, n in last["devices"].items()) or "no backend yet"
    out.append(
        f"  after {last['test']}: {devices}; programs held {last.get('executables')}; "
        f"host RSS {format_size(last.get('rss'))}"
    )
    return out


def recorded_tests(records: list[dict[str, Any]], worker: str) -> dict[str, dict[str, Any]]:
    """The tests a crashed pytest-xdist ``worker``'s flight recorder holds, as the JSON report
    keeps them (report_record's keys, and the worker): what it read before it died is not lost."""
    return {
        r["test"]: {**{k: r[k] for k in REPORT_KEYS if k in r}, "worker": worker}
        for r in records
        if isinstance(r.get("test"), str) and isinstance(r.get("residue"), int) and r.get("devices")
    }
