"""The JSON report a CI keeps (``--tpumem-json``, ``--tpumem-save``): every measured test's entry
and the run's context, in the schema of docs/report-schema.md (decisions.entry: the typed data,
its one reader and its checks). Written whole (a temporary file, then a rename), and read back --
checked -- by the baseline comparison and ``python -m pytest_tpumem``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from typing import Any

from ..decisions.entry import SCHEMA, VERSION, Entry, LedgerTests, Report, merged_entries
from ..errors import ReportError
from .files import write_atomic

__all__ = ["SCHEMA", "VERSION", "ReportError", "build", "dumps", "merge_reports", "process_path", "read", "write"]


def build(
    tests: dict[str, Entry],
    context: dict[str, Any],
    processes: Iterable[dict[str, Any]] = (),
    ledger: LedgerTests | None = None,
) -> Report:
    """The whole report: ``tests`` maps a test id to its entry (decisions.entry.Entry.of), in the
    order the tests ran (the summary keeps it among equals; the file is written sorted by id);
    ``ledger`` the suite ledger's residues, where it ran."""
    return Report(context, dict(tests), tuple(processes), ledger=ledger)


def merged_ledgers(ledgers: list[LedgerTests]) -> LedgerTests | None:
    """The suite ledgers of several processes as one: every test's line (a test two processes both
    ran keeps the larger residue), the largest thresholds, every crash."""
    if not ledgers:
        return None
    tests: dict[str, dict[str, Any]] = {}
    for ledger in ledgers:
        for nodeid, line in ledger.tests.items():
            if nodeid not in tests or line["residue"] > tests[nodeid]["residue"]:
                tests[nodeid] = line
    crashed = tuple(c for ledger in ledgers for c in ledger.crashed)
    return LedgerTests(
        max(ledger.threshold for ledger in ledgers), tests, crashed, max(ledger.host_threshold for ledger in ledgers)
    )


FAILURE_CHARS = 20_000  # the most of a failed test's text a report keeps: its end, where the error is


def failure_text(before: str, report: Any) -> str:
    """A failed phase's text (pytest's ``longreprtext``) after what earlier phases of the test
    said, its end kept where it is long (the first line says what was cut)."""
    text = report.longreprtext or f"{report.when}: failed"
    if report.when != "call":
        text = f"[{report.when}]\n{text}"
    text = f"{before}\n\n{text}" if before else text
    if len(text) > FAILURE_CHARS:
        cut = len(text) - FAILURE_CHARS
        text = f"[the first {cut} characters are cut]\n" + text[cut:]
    return text


def dumps(report: Report) -> bytes:
    return (json.dumps(report.to_json(), indent=1, sort_keys=False, allow_nan=False) + "\n").encode()


def write(report: Report, path: str) -> None:
    """Write the report whole or not at all."""
    write_atomic(path, dumps(report))


def process_path(path: str, index: int, count: int) -> str:
    """The file of one of several jax.distributed processes: ``report.json`` -> ``report.process-1-of-2.json``."""
    if count <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.process-{index}-of-{count}{ext or '.json'}"


def baseline_kept(path: str, n: int, because: str) -> str:
    """What a baseline saved from a narrowed run kept of the last one (decisions.partial.kept)."""
    tests = "test" if n == 1 else "tests"
    return (
        f"tpumem: the baseline {path} keeps {n} {tests} of the last one that this run did not run "
        f"({because}): a narrowed run replaces only the tests it ran"
    )


MAX_BYTES = 1 << 30  # a report larger than this is not one pytest-tpumem wrote


def read(path: str) -> Report:
    """A report read back and checked; ReportError naming the file where it cannot be used. Only
    a regular file is read (a FIFO or /dev/zero would never end), and only what JSON allows (no
    NaN), nested no deeper than a report is."""
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
    return Report.from_json(report, path)


def merge_reports(reports: list[tuple[str, Report]]) -> Report:
    """The reports of several processes or hosts (path, report) as one. A test measured in several
    has the worst verdict, the largest peak and growth, every device's peak (a device label two
    processes both use, such as each host's ``cpu:0``, is named with the process: ``p1:cpu:0``)
    and every check, each marked with the process it came from. The context of each process is
    kept under ``processes``. ReportError where two reports come from the same process (the same
    file given twice) or from different platforms or device kinds."""
    if not reports:
        raise ReportError("nothing to merge: give the reports of the processes")
    contexts: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], str] = {}  # a process (hostname, index, start, pid) -> the report that had it
    indexes: dict[int, str] = {}  # process_index -> the report that had it
    stated: dict[str, tuple[Any, str]] = {}  # platform, device kind -> the first said, and by which report
    tests: dict[str, list[tuple[int, Entry]]] = {}
    for path, report in reports:
        if report.version != reports[0][1].version:
            raise ReportError(
                f"{path}: schema version {report.version}, but {reports[0][0]} has {reports[0][1].version}; "
                "merge reports of one run"
            )
        for context in report.processes or [report.context]:
            _check_once(path, context, seen, indexes)
            _check_one_platform(path, context, stated)
            contexts.append(context)
        index = report.context.get("process_index")
        for nodeid, entry in report.tests.items():
            tests.setdefault(nodeid, []).append((len(contexts) - 1 if index is None else int(index), entry))
    merged = {nodeid: merged_entries(entries) for nodeid, entries in tests.items()}
    ledgers = [report.ledger for _, report in reports if report.ledger is not None]
    result = build(merged, _merged_context(contexts, stated), contexts, merged_ledgers(ledgers))
    return Report.from_json(result.to_json(), "the merged report")  # what merge writes, show and compare read


def _check_once(path: str, context: dict[str, Any], seen: dict[tuple[Any, ...], str], indexes: dict[int, str]) -> None:
    """ReportError where the process of ``context`` (in the report at ``path``) was given before,
    or another process of a run had its index; else it is added to ``seen`` and ``indexes``."""
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


def _check_one_platform(path: str, context: dict[str, Any], stated: dict[str, tuple[Any, str]]) -> None:
    """ReportError where ``context`` names another platform or device kind than ``stated`` has; else
    what it names is added there."""
    for k, what in (("platform", "platform"), ("device_kind", "device kind")):
        value = context.get(k)
        if not value:
            continue  # a process in which no backend started says none
        first = stated.setdefault(k, (value, path))
        if value != first[0]:
            raise ReportError(f"{path}: {what} {value!r}, but {first[1]} has {first[0]!r}; merge reports of one run")


def _merged_context(contexts: list[dict[str, Any]], stated: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """The context of the processes merged: the first's, with their devices, counts and times."""
    finished = [str(c["finished"]) for c in contexts if c.get("finished")]
    return {
        **contexts[0],
        **{k: value for k, (value, _) in stated.items()},
        "process_index": None,
        "process_count": max(int(c.get("process_count") or 1) for c in contexts),
        "merged_from": len(contexts),
        "devices": [d for c in contexts for d in c.get("devices") or []],
        "device_count": sum(int(c.get("device_count") or 0) for c in contexts),
        "started": min(str(c.get("started", "")) for c in contexts),
        "finished": max(finished) if finished else None,
    }
