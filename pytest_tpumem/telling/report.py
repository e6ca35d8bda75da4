"""The JSON report a CI keeps (``--tpumem-json``, ``--tpumem-save``): every measured test's figures
and the run's context, in the schema of docs/report-schema.md. Built from the summary's rows,
written whole (a temporary file, then a rename), and read back -- checked -- by the baseline
comparison and ``python -m pytest_tpumem``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..units import MAX_SIZE, shown_value
from .rows import merge

SCHEMA = "pytest-tpumem-report"
VERSION = 2  # 2: peaks and growth from deterministic readings (witness "program", no "sampler"; series "confirmation")


class ReportError(ValueError):
    """A report that cannot be used: missing, unreadable, not JSON, or not in this schema. The
    message names the file and what is wrong with it."""


def entry_of(records: list[dict[str, Any]], outcome: str = "") -> dict[str, Any]:
    """One test's entry: its checks as recorded, and the figures a gate compares -- ``peak``, the
    largest on any device or target, and ``growth``, the largest per iteration -- with the worst
    verdict, the peaks per device and the witness (rows.merge)."""
    merged = merge(records)
    peaks = merged.get("peaks") or {}
    entry: dict[str, Any] = {
        "outcome": outcome,
        "verdict": merged.get("verdict", "ok"),
        "peak": max(peaks.values()) if peaks else None,
        "peaks": peaks,
        "budget": merged.get("budget"),
        "witness": merged.get("witness", ""),
        "growth": merged.get("growth"),
        "threshold": merged.get("threshold"),
        "growth_source": merged.get("growth_source", ""),
        "stand_in": bool(merged.get("stand_in", False)),
        "host_peak": merged.get("host_peak"),
        "checks": list(records),
    }
    return entry


def build(
    tests: dict[str, dict[str, Any]], context: dict[str, Any], processes: Iterable[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The whole report: ``tests`` maps a test id to its entry (entry_of)."""
    ordered = dict(sorted(tests.items()))
    report = {
        "schema": SCHEMA,
        "version": VERSION,
        "context": context,
        "summary": {
            "measured": len(ordered),
            "failed": sum(1 for t in ordered.values() if t["verdict"] != "ok"),
        },
        "tests": ordered,
    }
    processes = list(processes)
    if processes:
        report["processes"] = processes
    return report


def dumps(report: dict[str, Any]) -> bytes:
    return (json.dumps(report, indent=1, sort_keys=False, allow_nan=False) + "\n").encode()


def write(report: dict[str, Any], path: str) -> None:
    """Write the report whole or not at all."""
    from .files import write_atomic

    write_atomic(path, dumps(report))


def process_path(path: str, index: int, count: int) -> str:
    """The file of one of several jax.distributed processes: ``report.json`` -> ``report.process-1-of-2.json``."""
    if count <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.process-{index}-of-{count}{ext or '.json'}"


MAX_BYTES = 1 << 30  # a report larger than this is not one pytest-tpumem wrote


def read(path: str) -> dict[str, Any]:
    """A report read back and checked; ReportError naming the file where it cannot be used. Only
    a regular file is read (a FIFO or /dev/zero would never end), and only what JSON allows (no
    NaN), nested no deeper than a report is."""
    import stat

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ReportError(
                f"{path}: not a regular file (a report is a JSON file written by --tpumem-json or --tpumem-save)"
            )
        if st.st_size > MAX_BYTES:
            raise ReportError(f"{path}: {st.st_size} bytes, larger than any report ({MAX_BYTES} bytes at most)")
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except OSError as e:
        raise ReportError(f"{path}: cannot be read: {e.strerror or e}") from None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        report = json.loads(data, parse_constant=no_constant)
    except RecursionError:
        raise ReportError(f"{path}: nested too deeply to be a report") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ReportError(
            f"{path}: not JSON ({e}); is it a report written by --tpumem-json or --tpumem-save?"
        ) from None
    check(report, path)
    return report


# What a report's values may be: each reader (the summary, show, compare, merge) relies on these.
_TEXT, _INT, _BOOL, _OBJECT, _LIST = "text", "a whole number", "true or false", "an object", "a list"
_CONTEXT: dict[str, tuple[str, bool]] = {  # key: (kind, null allowed)
    "started": (_TEXT, True),
    "finished": (_TEXT, True),
    "hostname": (_TEXT, True),
    "pid": (_INT, True),
    "platform": (_TEXT, True),
    "device_kind": (_TEXT, True),
    "devices": (_LIST, True),
    "device_count": (_INT, True),
    "bytes_limit": (_INT, True),
    "stand_in": (_BOOL, True),
    "process_index": (_INT, True),
    "process_count": (_INT, True),
    "merged_from": (_INT, True),
    "xdist_workers": (_INT, True),
    "versions": (_OBJECT, True),
    "env": (_OBJECT, True),
    "git": (_OBJECT, True),
    "rootdir": (_TEXT, True),
    "settings": (_OBJECT, True),
}
_ENTRY: dict[str, tuple[str, bool]] = {
    "outcome": (_TEXT, False),
    "verdict": (_TEXT, False),
    "peak": (_INT, True),
    "peaks": (_OBJECT, False),
    "budget": (_INT, True),
    "witness": (_TEXT, False),
    "growth": (_INT, True),
    "threshold": (_INT, True),
    "growth_source": (_TEXT, False),
    "stand_in": (_BOOL, False),
    "host_peak": (_INT, True),
    "checks": (_LIST, False),
}
_SIGNED = {"growth"}  # a figure that may be below 0 (memory given back)


def _kind_ok(value: Any, kind: str) -> bool:
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _OBJECT:
        return isinstance(value, dict)
    return isinstance(value, list)


def _bytes_ok(value: Any, signed: bool = False) -> bool:
    return (-MAX_SIZE if signed else 0) <= value <= MAX_SIZE


def check(report: Any, where: str) -> None:
    """ReportError where ``report`` is not a report of this schema and version, naming the first
    thing that is wrong: every key a reader of the project uses has the type docs/report-schema.md
    gives it, and every size fits in 2^63 bytes."""
    from ..decisions.verdict import Verdict

    def bad(what: str) -> ReportError:
        return ReportError(f"{where}: {what}")

    def typed(obj: dict[str, Any], spec: dict[str, tuple[str, bool]], what: str) -> None:
        for key, (kind, nullable) in spec.items():
            if key not in obj or (obj[key] is None and nullable):
                continue
            if not _kind_ok(obj[key], kind):
                raise bad(f'{what} "{key}" is {shown_value(obj[key])}, not {kind}')

    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise bad(f'not a pytest-tpumem report (no "schema": "{SCHEMA}")')
    version = report.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad(f"version {shown_value(version)} is not a whole number")
    if version > VERSION:
        raise bad(f"schema version {version} is newer than this pytest-tpumem reads ({VERSION}); upgrade pytest-tpumem")
    context = report.get("context")
    if not isinstance(context, dict):
        raise bad('"context" is missing or not an object')
    processes = report.get("processes", [])
    if not isinstance(processes, list) or not all(isinstance(p, dict) for p in processes):
        raise bad('"processes" is not a list of objects')
    for i, c in enumerate([context, *processes]):
        what = "context" if i == 0 else f"processes[{i - 1}]"
        typed(c, _CONTEXT, what)
        if isinstance(c.get("devices"), list) and not all(isinstance(d, str) for d in c["devices"]):
            raise bad(f'{what} "devices" is not a list of text')
        for key in ("versions", "env"):
            if isinstance(c.get(key), dict) and not all(isinstance(v, (str, type(None))) for v in c[key].values()):
                raise bad(f'{what} "{key}" is not an object of text')
        git = c.get("git")
        if isinstance(git, dict) and (
            not isinstance(git.get("commit", ""), (str, type(None)))
            or not isinstance(git.get("dirty"), (bool, type(None)))
        ):
            raise bad(f'{what} "git" is not {{"commit": text, "dirty": true, false or null}}')
        for key in ("bytes_limit",):
            if isinstance(c.get(key), int) and not _bytes_ok(c[key]):
                raise bad(f'{what} "{key}" is {shown_value(c[key])}, not bytes from 0 to 2^63-1')
        for key in ("process_index", "process_count", "device_count", "merged_from", "xdist_workers", "pid"):
            if isinstance(c.get(key), int) and not 0 <= c[key] <= 2**31:
                raise bad(f'{what} "{key}" is {shown_value(c[key])}, out of range')
    tests = report.get("tests")
    if not isinstance(tests, dict):
        raise bad('"tests" is missing or not an object')
    verdicts = {v.value for v in Verdict}
    for nodeid, entry in tests.items():
        name = f"test {shown_value(nodeid)}:"
        if not isinstance(entry, dict):
            raise bad(f"{name} not an object")
        if not isinstance(entry.get("verdict"), str):
            raise bad(f'{name} "verdict" is missing or not text')
        if entry["verdict"] not in verdicts:
            raise bad(f'{name} "verdict" is {shown_value(entry["verdict"])}, not one of {", ".join(sorted(verdicts))}')
        for key in ("peak", "growth", "budget", "threshold", "host_peak"):
            value = entry.get(key)
            if value is not None and (not _kind_ok(value, _INT) or not _bytes_ok(value, key in _SIGNED)):
                raise bad(
                    f'{name} "{key}" is {shown_value(value)}, not bytes as a whole number from '
                    f"{'-2^63+1' if key in _SIGNED else '0'} to 2^63-1"
                )
        typed(entry, _ENTRY, name)
        peaks = entry.get("peaks", {})
        if not isinstance(peaks, dict) or not all(_kind_ok(v, _INT) and _bytes_ok(v) for v in peaks.values()):
            raise bad(f'{name} "peaks" is not an object of whole numbers of bytes')
        checks = entry.get("checks", [])
        if not all(isinstance(c, dict) and isinstance(c.get("check", ""), str) for c in checks):
            raise bad(f'{name} "checks" is not a list of objects')


def merge_reports(reports: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The reports of several processes or hosts (path, report) as one. A test measured in several
    has the worst verdict, the largest peak and growth, every device's peak (a device label two
    processes both use, such as each host's ``cpu:0``, is named with the process: ``p1:cpu:0``)
    and every check, each marked with the process it came from. The context of each process is
    kept under ``processes``. ReportError where two reports come from the same process (the same
    file given twice) or from different platforms or device kinds."""
    if not reports:
        raise ReportError("nothing to merge: give the reports of the processes")
    contexts: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], str] = {}
    indexes: dict[int, str] = {}  # process_index -> the report that had it
    tests: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for path, report in reports:
        if report.get("version") != reports[0][1].get("version"):
            raise ReportError(
                f"{path}: schema version {report.get('version')}, but {reports[0][0]} has {reports[0][1].get('version')}; "
                "merge reports of one run"
            )
        for context in report.get("processes") or [report["context"]]:
            key = (context.get("hostname"), context.get("process_index"), context.get("started"), context.get("pid"))
            if key in seen:
                raise ReportError(f"{path}: the same process's report as {seen[key]}; give each process's report once")
            index = context.get("process_index")
            if index is not None and index in indexes:
                raise ReportError(
                    f"{path}: process {index} of {context.get('process_count')}, as {indexes[index]} is: two runs, not two "
                    "processes of one run (merge joins the processes of one jax.distributed run or of several hosts)"
                )
            seen[key] = path
            if index is not None:
                indexes[index] = path
            for k, what in (("platform", "platform"), ("device_kind", "device kind")):
                first = contexts[0].get(k) if contexts else None
                if first and context.get(k) and context[k] != first:
                    raise ReportError(
                        f"{path}: {what} {context[k]!r}, but {reports[0][0]} has {first!r}; merge reports of one run"
                    )
            contexts.append(context)
        index = report["context"].get("process_index")
        for nodeid, entry in report["tests"].items():
            tests.setdefault(nodeid, []).append((len(contexts) - 1 if index is None else int(index), entry))
    merged = {nodeid: _merge_entries(entries) for nodeid, entries in tests.items()}
    devices = [d for c in contexts for d in c.get("devices") or []]
    finished = [str(c["finished"]) for c in contexts if c.get("finished")]
    context = {
        **contexts[0],
        "process_index": None,
        "process_count": max(int(c.get("process_count") or 1) for c in contexts),
        "merged_from": len(contexts),
        "devices": devices,
        "device_count": sum(int(c.get("device_count") or 0) for c in contexts),
        "started": min(str(c.get("started", "")) for c in contexts),
        "finished": max(finished) if finished else None,
    }
    result = build(merged, context, contexts)
    check(result, "the merged report")  # what merge writes, show and compare read
    return result


def _merge_entries(entries: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    if len(entries) == 1:
        return entries[0][1]
    from ..decisions.verdict import rank_of

    peaks: dict[str, int] = {}
    owner: dict[str, int] = {}
    for process, entry in entries:
        for label, value in (entry.get("peaks") or {}).items():
            if label in owner and owner[label] != process:
                label = f"p{process}:{label}"
            owner.setdefault(label, process)
            peaks[label] = max(value, peaks.get(label, value))
    figures = {k: [e[k] for _, e in entries if e.get(k) is not None] for k in ("peak", "growth", "host_peak")}
    first = entries[0][1]
    return {
        **first,
        "outcome": _worst_outcome(e.get("outcome", "") for _, e in entries),
        "verdict": min((e["verdict"] for _, e in entries), key=rank_of),
        "peak": max(figures["peak"], default=None),
        "peaks": peaks,
        "growth": max(figures["growth"], default=None),
        "host_peak": max(figures["host_peak"], default=None),
        "checks": [{**c, "process_index": process} for process, e in entries for c in e.get("checks", [])],
    }


def _worst_outcome(outcomes: Iterable[str]) -> str:
    order = ("failed", "passed", "skipped", "")
    return min(outcomes, key=lambda o: order.index(o) if o in order else len(order), default="")
