"""The wire format: a test's entry (its checks added up to the figures a gate compares) and the
report of a run, as typed data with ``to_json`` / ``from_json``.

``Entry.of`` adds up the records a test's checks left (telling.results.row: one JSON object per
check, carried by pytest-xdist in ``user_properties``): the worst verdict, every device's peak,
the largest peak and growth. The summary, the JSON report, the baseline comparison, merge and the
CLI all read entries; ``Report.from_json`` is the one reader of a report file's data, and checks
it against docs/report-schema.md (a ReportError names the first thing wrong). A check's own record
stays a JSON object under ``checks``: its details (series, sites, devices) are for a person.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import ReportError
from ..units import MAX_SIZE, shown_value
from .verdict import Verdict, rank_of

SCHEMA = "pytest-tpumem-report"
VERSION = 2  # 2: peaks and growth from deterministic readings (witness "program", no "sampler"; series "confirmation")

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

# A suite ledger's line (docs/report-schema.md, telling.ledger.report_record): each key's kind (null
# is allowed for each: not known), then its whole numbers, True where one may be below 0 (a change).
_LINE: dict[str, str] = {
    "index": _INT,
    "outcome": _TEXT,
    "left": _INT,
    "compiled": _INT,
    "devices": _OBJECT,
    "change": _OBJECT,
    "stand_in": _BOOL,
    "executables": _INT,
    "outside": _INT,
    "peaks": _OBJECT,
    "cleared": _OBJECT,
    "made": _LIST,
    "held": _LIST,
    "traceback": _INT,
    "collected": _INT,
    "worker": _TEXT,
    "started": _BOOL,
    "host": _OBJECT,
}
_LINE_NUMBERS = {  # every _INT key of _LINE
    "index": False,
    "left": False,
    "compiled": False,
    "executables": False,
    "outside": True,
    "traceback": False,
    "collected": False,
}
_LINE_MAPS = {"devices": False, "peaks": False, "change": True}  # label -> bytes
_LINE_PARTS: dict[str, dict[str, str]] = {  # a list of objects: each key's kind (its whole numbers from 0)
    "made": {"site": _TEXT, "bytes": _INT, "arrays": _INT, "shape": _TEXT},
    "held": {"by": _TEXT, "path": _TEXT, "bytes": _INT},
}
_CRASHED = {"worker": _TEXT, "test": _TEXT, "said": _LIST}  # a crashed worker's keys
_CLEARED = {"programs": False, "bytes": True}
_HOST = {"rss": False, "grew": True, "kept_free": False, "jax_arrays": False, "fixtures_grew": True}  # host's numbers


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


def _whole(value: Any, signed: bool = False) -> bool:
    """A whole number (not a bool) no figure of any memory is past: 0 (or -2^63+1) to 2^63-1."""
    return _kind_ok(value, _INT) and (-MAX_SIZE if signed else 0) <= value <= MAX_SIZE


def _not_whole(value: Any, signed: bool) -> str:
    return f"is {shown_value(value)}, not a whole number from {'-2^63+1' if signed else '0'} to 2^63-1"


def _wrong(value: Any, kind: str, signed: bool = False) -> str:
    """What is wrong with ``value`` where ``kind`` is wanted (a whole number: within MAX_SIZE); ""
    where it fits or is null."""
    if value is None or (_whole(value, signed) if kind == _INT else _kind_ok(value, kind)):
        return ""
    return _not_whole(value, signed) if kind == _INT else f"is {shown_value(value)}, not {kind}"


def _check_line(line: dict[str, Any], what: str, bad: Any) -> None:
    """A ledger line's keys of the kinds _LINE gives, each whole number in it within MAX_SIZE
    (the page and the picture draw them as floats: 10**400 is no figure of any memory)."""
    for key, kind in _LINE.items():
        if kind != _INT and (wrong := _wrong(line.get(key), kind)):  # whole numbers: below, with their range
            raise bad(f'{what}: "{key}" {wrong}')
    for key, signed in _LINE_NUMBERS.items():
        if wrong := _wrong(line.get(key), _INT, signed):
            raise bad(f'{what}: "{key}" {wrong}')
    for key, signed in _LINE_MAPS.items():
        for label, value in (line.get(key) or {}).items():
            if not _whole(value, signed):
                raise bad(f'{what}: "{key}" {shown_value(label)} {_not_whole(value, signed)}')
    _check_line_parts(line, what, bad)
    _check_line_nested(line, what, bad)


def _check_line_parts(line: dict[str, Any], what: str, bad: Any) -> None:
    """A ledger line's lists of objects (_LINE_PARTS), each key of its kind."""
    for key, spec in _LINE_PARTS.items():
        for i, part in enumerate(line.get(key) or []):
            if not isinstance(part, dict):
                raise bad(f'{what}: "{key}"[{i}] is {shown_value(part)}, not an object')
            for name, kind in spec.items():
                if wrong := _wrong(part.get(name), kind):
                    raise bad(f'{what}: "{key}"[{i}] "{name}" {wrong}')


def _check_line_nested(line: dict[str, Any], what: str, bad: Any) -> None:
    """A ledger line's "cleared" and "host": their numbers within MAX_SIZE."""
    for part, numbers in (("cleared", _CLEARED), ("host", _HOST)):
        for name, signed in numbers.items():
            if wrong := _wrong((line.get(part) or {}).get(name), _INT, signed):
                raise bad(f'{what}: "{part}" "{name}" {wrong}')


def _past_any_figure(v: Any) -> bool:
    """A whole number beyond +-(2^63-1), or a float that is not finite (JSON's 1e400 reads as infinity)."""
    if isinstance(v, int):
        return not -MAX_SIZE <= v <= MAX_SIZE
    return isinstance(v, float) and not math.isfinite(v)


def _out_of_bounds(data: Any) -> bool:
    """Whether ``data`` (a report's JSON) holds a number past any figure (_past_any_figure)."""
    stack = [data]
    while stack:
        item = stack.pop()
        for v in item.values() if type(item) is dict else item:
            kind = type(v)  # JSON's: exactly these types, and this walk may see millions of values
            if kind is dict or kind is list:
                stack.append(v)
            elif (kind is int and not -MAX_SIZE <= v <= MAX_SIZE) or (kind is float and not math.isfinite(v)):
                return True
    return False


def _where_out_of_bounds(data: Any) -> tuple[str, Any]:
    """The first number _out_of_bounds finds, with its place: ``ledger.tests['t.py::a'].left``."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        for key, v in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(key, int):
                here = f"{path}[{key}]"
            elif key.isidentifier():
                here = f"{path}.{key}" if path else key
            else:
                here = f"{path}[{shown_value(key)}]"
            if isinstance(v, (dict, list)):
                stack.append((v, here))
            elif _past_any_figure(v):
                return here, v
    return "?", None


def _typed(obj: dict[str, Any], spec: dict[str, tuple[str, bool]], what: str, where: str) -> None:
    for key, (kind, nullable) in spec.items():
        if key not in obj or (obj[key] is None and nullable):
            continue
        if not _kind_ok(obj[key], kind):
            raise ReportError(f'{where}: {what} "{key}" is {shown_value(obj[key])}, not {kind}')


def _merged_records(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several records of one test (its budget, its target, a marker and fixture calls) as one:
    the worst verdict, the peaks of every device and target, the first budget, every witness, and
    the largest growth with its threshold and source."""
    out: dict[str, Any] = {}
    for r in records:
        verdict = min(out.get("verdict", "ok"), r.get("verdict", "ok"), key=rank_of)
        if "growth" in out and "growth" in r and r["growth"] < out["growth"]:
            r = {k: v for k, v in r.items() if not k.startswith("growth") and k != "threshold"}
        out.update({key: _merged_value(out, key, value) for key, value in r.items() if value is not None})
        out["verdict"] = verdict
    return out


def _merged_value(out: dict[str, Any], key: str, value: Any) -> Any:
    """``key``'s value once one more record's ``value`` of it is merged into ``out``."""
    if key in ("peaks", "devices"):
        return {**out.get(key, {}), **value}
    if key == "witness" and out.get("witness") and value not in out["witness"]:
        return f"{out['witness']}; {value}"
    return out.get("budget", value) if key == "budget" else value


def _wire(
    kind: str,
    *,
    null: bool = False,
    size: bool = False,
    signed: bool = False,
    read: Any = None,
    write: Any = None,
    omit_empty: bool = False,
    **default: Any,
) -> Any:
    """An Entry field that is a key of a report's test: its JSON kind, whether null is allowed,
    whether it is bytes (``signed``: that may be below 0, memory given back), how a value read is
    made the field's (``read``) and the field's written (``write``), or left out where empty
    (``omit_empty``)."""
    meta = {
        "kind": kind,
        "null": null,
        "size": size,
        "signed": signed,
        "read": read,
        "write": write,
        "omit_empty": omit_empty,
    }
    return field(metadata=meta, **default)


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One test's figures: the worst verdict of its checks, its peak per device and the largest
    (``peak``), its budget, the witness, its growth per iteration (the largest) with the threshold
    and the series it was read from, and every check's record. Each field but ``extra`` is a key of
    the report's test, in this order (docs/report-schema.md); how it is read, checked and written
    follows from the field (``_wire``). Made by keyword."""

    outcome: str = _wire(_TEXT, default="")  # pytest's: "passed", "failed", "skipped"; "" where not known
    verdict: Verdict = _wire(_TEXT, default=Verdict.OK, read=Verdict, write=lambda v: v.value)
    peak: int | None = _wire(_INT, null=True, size=True, default=None)
    peaks: dict[str, int] = _wire(_OBJECT, default_factory=dict, read=lambda v: dict(v or {}), write=dict)
    budget: int | None = _wire(_INT, null=True, size=True, default=None)
    witness: str = _wire(_TEXT, default="")
    growth: int | None = _wire(_INT, null=True, size=True, signed=True, default=None)
    threshold: int | None = _wire(_INT, null=True, size=True, default=None)
    growth_source: str = _wire(_TEXT, default="")
    stand_in: bool = _wire(_BOOL, default=False, read=bool)  # live arrays stood in for device memory (CPU)
    host_peak: int | None = _wire(_INT, null=True, size=True, default=None)
    checks: tuple[dict[str, Any], ...] = _wire(
        _LIST, default=(), read=lambda v: tuple(v or ()), write=lambda v: [dict(c) for c in v]
    )
    # where it failed: pytest's text of why (its last FAILURE_CHARS characters); written only then
    failure: str = _wire(_TEXT, default="", omit_empty=True)
    extra: dict[str, Any] = field(default_factory=dict)  # keys a newer writer added: kept, written back as read

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]], outcome: str = "", failure: str = "") -> Entry:
        """The entry of a test whose checks left ``records`` (telling.results.row); ``failure``:
        pytest's text of why it failed, if it did."""
        records = list(records)
        merged = _merged_records(records)
        peaks = merged.get("peaks") or {}
        # A run's figure that a TPU target judged in its place ("judged_on") is shown, not compared.
        judged = [p for r in records if not r.get("judged_on") for p in (r.get("peaks") or {}).values()]
        return cls._read(
            merged,
            outcome=outcome,
            peak=max(judged or peaks.values()) if peaks else None,
            checks=tuple(records),
            failure=failure,
        )

    @classmethod
    def _read(cls, obj: dict[str, Any], **given: Any) -> Entry:
        """An entry of the keys of ``obj`` it knows (each absent one at its default), then ``given``."""
        fields = {}
        for f in _WIRE:
            if f.name in obj and f.name not in given:
                read = f.metadata["read"]
                fields[f.name] = read(obj[f.name]) if read else obj[f.name]
        return cls(**{**fields, **given})

    @property
    def failed(self) -> bool:
        return self.verdict.failed

    @property
    def shown_only(self) -> set[str]:
        """Devices whose figure is shown, not judged: a run's own, where a TPU target judged the budget."""
        shown = {k for c in self.checks if c.get("judged_on") for k in (c.get("peaks") or {})}
        return shown - {k for c in self.checks if not c.get("judged_on") for k in (c.get("peaks") or {})}

    @property
    def comparable(self) -> bool:
        """Its figures can judge a later run: the test did not fail here (a failed test's figures stop where it failed)."""
        return self.outcome != "failed"

    def figure(self, name: str) -> int | None:
        """``peak`` or ``growth`` (a measured test's; ``residue`` is the suite ledger's, in Report.ledger)."""
        return self.peak if name == "peak" else self.growth if name == "growth" else None

    def worst_first(self) -> tuple[int, float, int]:
        """Sort key: the worst verdict first, then the closest to its budget or threshold, then the largest peak."""
        peak = max(self.peaks.values(), default=0)
        ratio = peak / self.budget if self.budget else 0.0
        growth_ratio = (self.growth or 0) / self.threshold if self.threshold else 0.0
        return (self.verdict.rank, -max(ratio, growth_ratio), -peak)

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in _WIRE:
            value, write = getattr(self, f.name), f.metadata["write"]
            if value or not f.metadata["omit_empty"]:
                out[f.name] = write(value) if write else value
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, obj: Any, where: str, nodeid: str) -> Entry:
        """An entry read from a report; ReportError naming ``where`` and the test where it is not one."""
        name = f"test {shown_value(nodeid)}:"
        if not isinstance(obj, dict):
            raise ReportError(f"{where}: {name} not an object")
        if not isinstance(obj.get("verdict"), str):
            raise ReportError(f'{where}: {name} "verdict" is missing or not text')
        if obj["verdict"] not in _VERDICTS:
            raise ReportError(
                f'{where}: {name} "verdict" is {shown_value(obj["verdict"])}, not one of {", ".join(_VERDICTS)}'
            )
        _check_fields(obj, name, where)
        return cls._read(obj, extra={k: v for k, v in obj.items() if k not in _ENTRY})


_WIRE = [f for f in fields(Entry) if "kind" in f.metadata]
_ENTRY: dict[str, tuple[str, bool]] = {f.name: (f.metadata["kind"], f.metadata["null"]) for f in _WIRE}
_SIZES = tuple(f.name for f in _WIRE if f.metadata["size"])
_SIGNED = {f.name for f in _WIRE if f.metadata["signed"]}
_VERDICTS = sorted(v.value for v in Verdict)


def _check_fields(obj: dict[str, Any], name: str, where: str) -> None:
    """A report's test's keys of the kinds its fields give: each size null or bytes that fit in
    2^63 (only growth below 0), its peaks bytes, its checks objects."""
    for key in _SIZES:
        value = obj.get(key)
        if value is not None and not _whole(value, key in _SIGNED):
            raise ReportError(
                f'{where}: {name} "{key}" is {shown_value(value)}, not bytes as a whole number from '
                f"{'-2^63+1' if key in _SIGNED else '0'} to 2^63-1"
            )
    _typed(obj, _ENTRY, name, where)
    if not all(_whole(v) for v in obj.get("peaks", {}).values()):
        raise ReportError(f'{where}: {name} "peaks" is not an object of whole numbers of bytes')
    if not all(isinstance(c, dict) and isinstance(c.get("check", ""), str) for c in obj.get("checks", [])):
        raise ReportError(f'{where}: {name} "checks" is not a list of objects')


def merged_entries(entries: list[tuple[int, Entry]]) -> Entry:
    """One test's entries from several processes (process index, entry) as one: the worst verdict
    and outcome, the largest peak, growth and host peak, every device's peak (a label two processes
    both use, such as each host's ``cpu:0``, named with the process: ``p1:cpu:0``), and every
    check, each marked with the process it came from."""
    if len(entries) == 1:
        return entries[0][1]

    def largest(name: str) -> int | None:
        values = [getattr(e, name) for _, e in entries]
        return max((v for v in values if v is not None), default=None)

    return replace(
        entries[0][1],
        outcome=_worst_outcome(e.outcome for _, e in entries),
        verdict=Verdict.worst([e.verdict for _, e in entries]),
        peak=largest("peak"),
        peaks=_merged_peaks(entries),
        growth=largest("growth"),
        host_peak=largest("host_peak"),
        checks=tuple({**c, "process_index": process} for process, e in entries for c in e.checks),
        failure="\n".join(f"process {process}: {e.failure}" for process, e in entries if e.failure),
    )


def _merged_peaks(entries: list[tuple[int, Entry]]) -> dict[str, int]:
    """Every process's peak per device, the largest of each; a label another process used first
    is named with the process (``p1:cpu:0``)."""
    peaks: dict[str, int] = {}
    owner: dict[str, int] = {}
    for process, entry in entries:
        for label, value in entry.peaks.items():
            if label in owner and owner[label] != process:
                label = f"p{process}:{label}"
            owner.setdefault(label, process)
            peaks[label] = max(value, peaks.get(label, value))
    return peaks


def _worst_outcome(outcomes: Iterable[str]) -> str:
    order = ("failed", "passed", "skipped", "")
    return min(outcomes, key=lambda o: order.index(o) if o in order else len(order), default="")


@dataclass(frozen=True)
class LedgerTests:
    """The suite ledger's part of a report: every test it read, with its residue (the bytes of the
    arrays it made alive after its teardown) and what else its line says; the threshold that
    names a test; the crashed pytest-xdist workers' last readings (docs/report-schema.md)."""

    threshold: int = 0
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # test id -> {"residue": bytes, "outcome": ...}
    crashed: tuple[dict[str, Any], ...] = ()  # {"worker": "gw0", "test": id, "said": [lines]}
    host_threshold: int = 0  # --tpumem-host-residue: a test that grew host memory this much is named

    def residue(self, nodeid: str) -> int | None:
        line = self.tests.get(nodeid)
        return line.get("residue") if line is not None else None

    def host_grew(self, nodeid: str) -> int | None:
        """What ``nodeid`` grew the process's host memory by (less its wider-scope fixtures'); None
        where not read, or where jax's backend started in it (the runtime's own, once a process)."""
        host = (self.tests.get(nodeid) or {}).get("host")
        if not isinstance(host, dict) or host.get("backend_started") is True:
            return None
        grew = host.get("grew")
        return grew if isinstance(grew, int) and not isinstance(grew, bool) else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "threshold": self.threshold,
            "host_threshold": self.host_threshold,
            "tests": dict(sorted(self.tests.items())),
        }
        if self.crashed:
            out["crashed"] = list(self.crashed)
        return out

    @classmethod
    def from_json(cls, obj: Any, where: str) -> LedgerTests:
        def bad(what: str) -> ReportError:
            return ReportError(f'{where}: "ledger" {what}')

        if not isinstance(obj, dict):
            raise bad("is not an object")
        threshold = obj.get("threshold", 0)
        host_threshold = obj.get("host_threshold", 0)
        for key, value in (("threshold", threshold), ("host_threshold", host_threshold)):
            if not _whole(value):
                raise bad(f'"{key}" is {shown_value(value)}, not bytes as a whole number from 0 to 2^63-1')
        tests = obj.get("tests", {})
        if not isinstance(tests, dict):
            raise bad('"tests" is not an object')
        for nodeid, line in tests.items():
            residue = line.get("residue") if isinstance(line, dict) else None
            if not _whole(residue):  # None where the line is not an object
                raise bad(
                    f'test {shown_value(nodeid)}: "residue" is {shown_value(residue)}, not bytes from 0 to 2^63-1'
                )
            _check_line(line, f"test {shown_value(nodeid)}", bad)
        crashed = obj.get("crashed", [])
        _check_crashed(crashed, bad)
        return cls(threshold, {k: dict(v) for k, v in tests.items()}, tuple(crashed), host_threshold)


def _check_crashed(crashed: Any, bad: Any) -> None:
    """The ledger's crashed workers: a list of objects, each key of the kind _CRASHED gives."""
    if not isinstance(crashed, list) or not all(isinstance(c, dict) for c in crashed):
        raise bad('"crashed" is not a list of objects')
    for i, crash in enumerate(crashed):
        for key, kind in _CRASHED.items():
            if wrong := _wrong(crash.get(key), kind):
                raise bad(f'"crashed"[{i}] "{key}" {wrong}')
        if not all(isinstance(said, str) for said in crash.get("said") or []):
            raise bad(f'"crashed"[{i}] "said" is not a list of text')


@dataclass(frozen=True)
class Report:
    """A run's report: its context (where and how it ran: docs/report-schema.md), every measured
    test's entry by test id, the contexts of the processes it was merged from, and the suite
    ledger's part (LedgerTests), where it ran."""

    context: dict[str, Any]
    tests: dict[str, Entry]
    processes: tuple[dict[str, Any], ...] = ()
    version: int = VERSION
    ledger: LedgerTests | None = None  # the suite ledger's residues, where it ran

    @property
    def measured(self) -> int:
        return len(self.tests)

    @property
    def failed(self) -> int:
        return sum(1 for e in self.tests.values() if e.failed)

    @property
    def rootdir(self) -> str:
        return str(self.context.get("rootdir") or "")

    def to_json(self) -> dict[str, Any]:
        ordered = dict(sorted(self.tests.items()))
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "version": self.version,
            "context": self.context,
            "summary": {"measured": len(ordered), "failed": self.failed},
            "tests": {nodeid: e.to_json() for nodeid, e in ordered.items()},
        }
        if self.processes:
            out["processes"] = list(self.processes)
        if self.ledger is not None:
            out["ledger"] = self.ledger.to_json()
        return out

    @classmethod
    def from_json(cls, report: Any, where: str) -> Report:
        """A report's data read back (the JSON of a file); ReportError naming ``where`` and the
        first thing that is wrong: every key a reader of the project uses has the type
        docs/report-schema.md gives it, and every size fits in 2^63 bytes."""

        def bad(what: str) -> ReportError:
            return ReportError(f"{where}: {what}")

        version = _version(report, bad)
        context, processes = _contexts(report, where, bad)
        tests = report.get("tests")
        if not isinstance(tests, dict):
            raise bad('"tests" is missing or not an object')
        entries = {nodeid: Entry.from_json(entry, where, nodeid) for nodeid, entry in tests.items()}
        ledger = LedgerTests.from_json(report["ledger"], where) if "ledger" in report else None
        if _out_of_bounds(report):  # a figure a check's record or a newer writer's key holds
            place, value = _where_out_of_bounds(report)
            raise bad(
                f"{place} is {shown_value(value)}: past any figure of memory (a report's numbers are whole numbers "
                "from -2^63+1 to 2^63-1, or finite)"
            )
        return cls(context, entries, tuple(processes), version, ledger)


def _version(report: Any, bad: Any) -> int:
    """The schema version of a pytest-tpumem report that this one reads."""
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise bad(f'not a pytest-tpumem report (no "schema": "{SCHEMA}")')
    version = report.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad(f"version {shown_value(version)} is not a whole number")
    if version > VERSION:
        raise bad(f"schema version {version} is newer than this pytest-tpumem reads ({VERSION}); upgrade pytest-tpumem")
    return version


def _contexts(report: dict[str, Any], where: str, bad: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A report's context and the contexts of the processes it was merged from, each checked."""
    context = report.get("context")
    if not isinstance(context, dict):
        raise bad('"context" is missing or not an object')
    processes = report.get("processes", [])
    if not isinstance(processes, list) or not all(isinstance(p, dict) for p in processes):
        raise bad('"processes" is not a list of objects')
    for i, c in enumerate([context, *processes]):
        _check_context(c, "context" if i == 0 else f"processes[{i - 1}]", where)
    return context, processes


def _check_context(c: dict[str, Any], what: str, where: str) -> None:
    """A context's (or a merged process's) keys of the kinds _CONTEXT gives, what its lists and
    objects hold, and its numbers in range."""

    def bad(text: str) -> ReportError:
        return ReportError(f"{where}: {what} {text}")

    _typed(c, _CONTEXT, what, where)
    _check_context_texts(c, bad)
    git = c.get("git")
    if isinstance(git, dict) and (
        not isinstance(git.get("commit", ""), (str, type(None))) or not isinstance(git.get("dirty"), (bool, type(None)))
    ):
        raise bad('"git" is not {"commit": text, "dirty": true, false or null}')
    if isinstance(c.get("bytes_limit"), int) and not 0 <= c["bytes_limit"] <= MAX_SIZE:
        raise bad(f'"bytes_limit" is {shown_value(c["bytes_limit"])}, not bytes from 0 to 2^63-1')
    for key in ("process_index", "process_count", "device_count", "merged_from", "xdist_workers", "pid"):
        if isinstance(c.get(key), int) and not 0 <= c[key] <= 2**31:
            raise bad(f'"{key}" is {shown_value(c[key])}, out of range')


def _check_context_texts(c: dict[str, Any], bad: Any) -> None:
    """A context's "devices" (a list of text), "versions" and "env" (objects of text or null)."""
    if isinstance(c.get("devices"), list) and not all(isinstance(d, str) for d in c["devices"]):
        raise bad('"devices" is not a list of text')
    for key in ("versions", "env"):
        if isinstance(c.get(key), dict) and not all(isinstance(v, (str, type(None))) for v in c[key].values()):
            raise bad(f'"{key}" is not an object of text')
