"""A budget on the run's own devices, told: the failure text, the report section and the row of a
``decisions.budget.BudgetResult`` (and the peak lines an out-of-memory reuses), and that row on the
run's page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import defaults
from ..units import format_apart, format_size
from .markup import Block, dict_of, heading, list_of, size_text, table_block
from .upcast import HEAD, compilers_own_line, upcast_line, upcast_record, upcasts_html
from .words import STAND_IN_NOTE, files_lines, plural, shown

if TYPE_CHECKING:  # for the reader and type checkers only: no import at run time
    from ..decisions.budget import BudgetResult
    from ..decisions.peak import DevicePeak, LeftBehind, PeakReport
    from ..readings.buffers import Buffer

# Why a measurement has no "program" witness (PeakReport.uncounted), in words.
UNCOUNTED = {
    "unavailable": "this jax does not let tpumem see the programs it runs (readings.executions); "
    "the peak is read at the start, the body's end and the end only",
}


def witness(d: DevicePeak) -> str:
    """``program jit(step)``, ``body-end``: the witness that judged, with the program where one did."""
    return f"{d.witness} {d.program}" if d.witness == "program" and d.program else d.witness


def peak_line(d: DevicePeak, whole_device: bool = False) -> str:
    seen = ", ".join(f"{k} {format_size(v)}" for k, v in d.witnesses.items())
    line = f"{d.device}: start {format_size(d.start)}, peak {format_size(d.peak)} by {witness(d)} [{seen}]"
    if d.unexplained:
        line += (
            f"; the sampler saw {format_size(d.sampler)}, {format_size(d.unexplained)} more than any deterministic "
            "reading explains (timing-dependent, not judged)"
        )
    if d.left:
        line += f"; {format_size(d.left)} of the start left by other tests" + (
            " (counted: --tpumem-budget-counts=device)" if whole_device else " (not counted: the test's own use)"
        )
    if d.largest_free is not None:
        free = f"free {format_size(d.free)}, " if d.free is not None else ""
        line += f"; at the end {free}largest free block {format_size(d.largest_free)}"
        if d.fragmented:
            line += " (fragmented: a larger allocation fails although the total would fit)"
    return line


def sampled_over(result: BudgetResult) -> str:
    """A test within its budget by every deterministic reading, where only the sampler saw more."""
    d = max(result.sampled_over, key=lambda d: d.sampler or 0)
    assert result.budget is not None  # only a budgeted test is sampled over it
    return (
        f"max_hbm: only the sampler saw {format_size(d.sampler)} on {d.device}, over the budget of "
        f"{format_size(result.budget.limit)} ({result.budget.spelled}); the test is judged by its deterministic "
        f"peak, {format_size(d.peak)} by {witness(d)}. What the sampler sees depends on when it looks, so it "
        "does not judge: the moment came from a path tpumem does not watch (a program compiled ahead of time "
        "and called again, pmap)"
    )


def message(result: BudgetResult, verbosity: int = 0) -> str:
    """Short failure text for a test over its budget on the run's devices: the devices over it and
    why (the upcasts, the largest arrays); -q keeps the first of each, -v adds every device."""
    over = result.over
    if not over:
        return ""
    worst = over[0]
    budget = result.budget
    assert budget is not None  # only a budgeted test is over it
    peak, limit = format_apart(worst.peak, budget.limit)  # never "peak 64.1kB is over the budget of 64.1kB"
    lines = [
        f"max_hbm: peak {peak} on {worst.device} is over the budget of "
        f"{limit} ({budget.spelled}), judged by {witness(worst)}"
    ]
    if worst.left:
        lines[0] += counted_text(result.peak)
    if worst.stand_in:
        lines[0] += f"; {STAND_IN_NOTE}"
    devices = list(result.peak.devices.values()) if verbosity > 0 else shown(over, verbosity)
    lines += ["  " + peak_line(d, result.peak.whole_device) for d in devices]
    lines += ["  " + left_line(b) for b in shown(result.peak.left_behind, verbosity)]
    lines += precision_lines(result.upcasts, result.precision, verbosity, peak=result.peak)
    if result.buffers and (verbosity >= 0 or not result.upcasts):
        lines.append(
            "  largest arrays the programs this test ran make (per device; XLA may reuse a temporary's memory):"
        )
        lines += ["    " + buffer_line(b) for b in shown(result.buffers, verbosity)]
    lines += files_lines(result.files)
    return "\n".join(lines)


def counted_text(peak: PeakReport) -> str:
    """Which use a budget judged, where other tests left arrays alive at the start."""
    if peak.whole_device:
        return "; everything on the device counted, what other tests left too (--tpumem-budget-counts=device)"
    return "; the test's own use, what other tests left not counted (--tpumem-budget-counts=test)"


def left_line(b: LeftBehind) -> str:
    """``64.0MB of the start was left by tests/t.py::test_x: made at tests/t.py:15 in test_x, kept by global _SEEN of t``"""
    line = f"{format_size(b.nbytes)} of the start was left by {b.owner}"
    said = [f"made at {b.made}" if b.made else "", f"kept by {b.held}" if b.held else ""]
    return line + (": " + ", ".join(x for x in said if x) if any(said) else "")


def precision_lines(
    upcasts: tuple[Any, ...], precision: Any, verbosity: int = 0, peak: PeakReport | None = None
) -> list[str]:
    """The upcasts the code asked for, then the float32 temporaries the run's compiler made on its
    own (on the CPU backend: what its figure overstates of a chip's), no more than its programs' temporaries."""
    lines = [HEAD] + ["    " + upcast_line(u) for u in shown(upcasts, verbosity)] if upcasts else []
    if precision is None or not precision.run or peak is None:
        return lines
    temps = max((p.temps for p in peak.programs), default=0)
    own = compilers_own_line(precision, temps)
    return lines + ([own] if own else [])


def section(result: BudgetResult) -> str:
    text = peak_section(result.peak)
    if not result.judged_on or result.budget is None:
        return text
    over = result.over
    said = (
        f"these figures are shown, not judged: the budget ({result.budget.spelled}) is judged on "
        f"{result.judged_on}'s compile"
    )
    if over:
        said += f" (here {format_size(over[0].peak)} on {over[0].device}, over {format_size(result.budget.limit)})"
        own = precision_lines((), result.precision, peak=result.peak)
        said += "".join("\n" + line.strip() for line in own)
        if result.buffers:
            said += "\nlargest arrays the programs this test ran make here (per device; XLA may reuse a temporary's memory):"
            said += "".join("\n  " + buffer_line(b) for b in result.buffers)
    return text + "\n" + said


def peak_section(report: PeakReport) -> str:
    """The long form of a measured peak, for the test's report section."""
    lines = [peak_line(d, report.whole_device) for d in report.devices.values()]
    lines += [left_line(b) for b in report.left_behind]
    if report.host_peak is not None:
        lines.append(f"host peak (VmHWM): {format_size(report.host_peak)}")
    if report.uncounted:
        lines.append(f"programs run: not read ({UNCOUNTED[report.uncounted]})")
    shown = report.programs[: defaults.PROGRAMS_SHOWN]
    for p in shown:
        lines.append(
            f"ran {p.name} on {','.join(p.devices)}: needs {format_size(p.peak)} "
            f"(arguments {format_size(p.arguments)}, outputs {format_size(p.outputs)}, temps {format_size(p.temps)})"
        )
    if len(report.programs) > len(shown):
        lines.append(f"... and {plural(len(report.programs) - len(shown), 'smaller program')}")
    return "\n".join(lines)


def buffer_line(b: Buffer) -> str:
    where = f" at {b.source}" if b.source else ""
    if b.kind.startswith("argument"):
        what = f"{b.kind} ({b.op})" if b.op else b.kind
        taken = f" of {', '.join(b.programs)}" if b.programs else ""
    else:
        what = f"{b.kind} from {b.op or b.instruction} [{b.instruction}]"  # the op names its program
        taken = ""
    return f"{format_size(b.size):>9}  {b.shape}  {what}{taken}{where}"


def devices_row(peak: Any) -> dict[str, dict[str, Any]]:
    """Per device: the peak, the witness that judged it, every witness's figure (bytes), the limit."""
    return {
        d.device: {
            "peak": d.peak,
            "start": d.start,
            "witness": d.witness,
            "witnesses": dict(d.witnesses),
            "program": d.program or None,
            "sampler": d.sampler,
            "limit": d.limit,
            "stand_in": d.stand_in,
            "left": d.left,
        }
        for d in peak.devices.values()
    }


def row(r: BudgetResult) -> dict[str, Any]:
    peak = r.peak
    return {
        "check": "budget" if r.budget else "peak",
        "verdict": r.verdict.value,
        "budget": r.budget.limit if r.budget else None,
        "budget_source": r.budget.spelled if r.budget else None,
        "peaks": {d.device: d.peak for d in peak.devices.values()},
        "witness": peak.worst.witness if peak.worst else "",
        "stand_in": any(d.stand_in for d in peak.devices.values()),
        "host_peak": peak.host_peak,
        "devices": devices_row(peak),
        "uncounted": peak.uncounted or None,
        "left_behind": [
            {"owner": b.owner, "devices": dict(b.devices), "made": b.made or None, "held": b.held or None}
            for b in peak.left_behind
        ],
        "budget_counts": "device" if peak.whole_device else "test",
        "judged_on": r.judged_on or None,
        "upcasts": [upcast_record(u) for u in r.upcasts],
        "buffers": [buffer_record(b) for b in r.buffers],
    }


def buffer_record(b: Buffer) -> dict[str, Any]:
    """One of the largest arrays of a test over its budget, as the report keeps it (an upcast's
    record is telling.upcast.upcast_record)."""
    return {
        "bytes": b.size,
        "shape": b.shape,
        "kind": b.kind,
        "op": b.op,
        "instruction": b.instruction,
        "source": b.source or None,
        "text": buffer_line(b).strip(),
    }


def html(check: dict[str, Any], nodeid: str) -> list[Block]:
    """A budget's (or a peak's) part of its test's section on the run's page (telling.html), from
    its record: the peak per device with its witnesses, the upcasts and the largest arrays."""
    budget = f", budget {size_text(check.get('budget'))} ({check.get('budget_source')})" if check.get("budget") else ""
    devices = [_device_cells(label, dict_of(d)) for label, d in dict_of(check.get("devices")).items()]
    buffers = [
        (size_text(b.get("bytes")), b.get("shape", ""), b.get("text", ""))
        for b in map(dict_of, list_of(check.get("buffers")))
    ]
    return [
        heading(f"{check.get('check', '')}: {check.get('verdict', '')}{budget}"),
        *table_block(("device", "peak", "at start", "witness", "every witness"), devices, (1, 2)),
        *upcasts_html(list_of(check.get("upcasts"))),
        *table_block(("bytes", "shape", "what, and where"), buffers, (0,), "largest arrays of the programs it ran"),
    ]


def _device_cells(label: str, d: dict[str, Any]) -> tuple[Any, ...]:
    witnesses = ", ".join(f"{k} {size_text(v)}" for k, v in dict_of(d.get("witnesses")).items())
    return (label, size_text(d.get("peak")), size_text(d.get("start")), d.get("witness", ""), witnesses)
