"""Out of device memory, told: the failure text (also its report section) and the row of a
``decisions.oom.OomResult``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..units import format_size
from .budget import devices_row, peak_line

if TYPE_CHECKING:
    from ..decisions.oom import OomResult


def message(result: OomResult, verbosity: int = 0) -> str:
    """What ran out, where, with the peaks read until then (the same at every verbosity)."""
    lines = [f"out of device memory {result.during} (budget {format_size(result.limit)}): {result.error}"]
    if result.peak is not None:
        lines += ["  " + peak_line(d) for d in result.peak.devices.values()]
    lines.append("  tpumem freed the test's frames and jax's caches so the tests after it can run")
    return "\n".join(lines)


def section(result: OomResult) -> str:
    return message(result)


def row(r: OomResult) -> dict[str, Any]:
    out: dict[str, Any] = {"check": "oom", "verdict": r.verdict.value, "budget": r.limit, "error": r.error}
    if r.peak is not None:
        out["peaks"] = {d.device: d.peak for d in r.peak.devices.values()}
        out["devices"] = devices_row(r.peak)
    return out
