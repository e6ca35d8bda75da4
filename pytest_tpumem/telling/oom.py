"""Out of device memory, told: the failure text (also its report section) and the row of a
``decisions.oom.OomResult``, and that row on the run's page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..units import format_size
from .budget import devices_row, peak_line
from .markup import Block, heading, pre

if TYPE_CHECKING:
    from ..decisions.oom import OomResult


def message(result: OomResult, verbosity: int = 0) -> str:
    """What ran out, where, with the figures of the run that ran out (the same at every verbosity):
    the peaks measured until then, or, where a leak check's later run ran out, what that run had in
    use when it did."""
    during = result.during
    if result.run is not None:
        during += f", on run {result.run[0]} of {result.run[1]} of its leak check"
    lines = [f"out of device memory {during} (budget {format_size(result.limit)}): {result.error}"]
    if result.run is not None:
        lines += [
            f"  {label}: {format_size(n)} in use when run {result.run[0]} ran out"
            for label, n in result.at_failure.items()
        ]
        if result.peak is not None:
            lines += ["  the first run's peak: " + peak_line(d) for d in result.peak.devices.values()]
    elif result.peak is not None:
        lines += ["  " + peak_line(d) for d in result.peak.devices.values()]
    lines.append("  tpumem freed the test's frames and jax's caches so the tests after it can run")
    return "\n".join(lines)


def section(result: OomResult) -> str:
    return message(result)


def row(r: OomResult) -> dict[str, Any]:
    out: dict[str, Any] = {"check": "oom", "verdict": r.verdict.value, "budget": r.limit, "error": r.error}
    if r.run is not None:
        out["run"] = list(r.run)
    figures = r.figures
    if figures:
        out["peaks"] = figures
    if r.peak is not None and r.run is None:
        out["devices"] = devices_row(r.peak)
    return out


def html(check: dict[str, Any], nodeid: str) -> list[Block]:
    """Out of memory in its test's section on the run's page (telling.html): the error."""
    return [heading("out of memory"), pre(check.get("error", ""))]
