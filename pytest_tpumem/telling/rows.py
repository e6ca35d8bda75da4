"""Rows and the summary table: one JSON-able record per check (bytes as integers, the verdict as
its text, so pytest-xdist carries it to the controller in ``user_properties``), records of one
test merged into one row, and the terminal summary, worst first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..decisions.verdict import Verdict
from ..units import format_size
from .text import STAND_IN_NOTE

if TYPE_CHECKING:
    from ..decisions.budget import BudgetResult
    from ..decisions.leak import LeakReport
    from ..decisions.oom import OomResult
    from ..decisions.target import TargetResult

PROPERTY = "pytest_tpumem"  # the user_properties key; namespaced so a user's own "tpumem" cannot clash


def _rank(verdict: str) -> int:
    """A row's verdict (its text) in Verdict's order, worst first; unknown text last."""
    try:
        return Verdict(verdict).rank
    except ValueError:
        return len(Verdict)


def budget_row(r: BudgetResult) -> dict[str, Any]:
    peak = r.peak
    return {
        "verdict": r.verdict.value,
        "budget": r.budget.limit if r.budget else None,
        "peaks": {d.device: d.peak for d in peak.devices.values()},
        "witness": peak.worst.witness if peak.worst else "",
        "stand_in": any(d.stand_in for d in peak.devices.values()),
        "host_peak": peak.host_peak,
    }


def target_row(r: TargetResult) -> dict[str, Any]:
    return {
        "verdict": r.verdict.value,
        "budget": r.limit,
        "peaks": {r.target.topology: r.need},
        "witness": f"compiled for {r.target.topology}",
    }


def leak_row(r: LeakReport) -> dict[str, Any]:
    worst = r.worst
    source = worst.name if worst else ""
    if r.sites and r.sites[0].site is not None:
        source += f" at {r.sites[0].site.file}:{r.sites[0].site.line}"
    if r.cache_grows:
        source = (source + "; " if r.leaking_series else "") + "compile cache grows"
    return {
        "verdict": r.verdict.value,
        "growth": worst.growth if worst else 0,
        "growth_source": source,
        "threshold": r.threshold,
    }


def oom_row(r: OomResult) -> dict[str, Any]:
    out: dict[str, Any] = {"verdict": r.verdict.value, "budget": r.limit}
    if r.peak is not None:
        out["peaks"] = {d.device: d.peak for d in r.peak.devices.values()}
    return out


def merge(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several records of one test (its budget, its target, a marker and fixture calls) as one row:
    the worst verdict, the peaks of every device and target, the largest growth."""
    out: dict[str, Any] = {}
    for r in rows:
        verdict = min(out.get("verdict", "ok"), r.get("verdict", "ok"), key=_rank)
        if "growth" in out and "growth" in r and r["growth"] < out["growth"]:
            r = {k: v for k, v in r.items() if not k.startswith("growth")}
        for key, value in r.items():
            if value is None:
                continue
            if key == "peaks":
                out["peaks"] = {**out.get("peaks", {}), **value}
            elif key == "witness" and out.get("witness") and value not in out["witness"]:
                out["witness"] = f"{out['witness']}; {value}"
            elif key == "budget":
                out.setdefault("budget", value)
            else:
                out[key] = value
        out["verdict"] = verdict
    return out


def _sort_key(item: tuple[str, dict[str, Any]]) -> tuple:
    _, r = item
    peak = max(r.get("peaks", {0: 0}).values() or [0])
    ratio = peak / r["budget"] if r.get("budget") else 0.0
    growth_ratio = r.get("growth", 0) / r["threshold"] if r.get("threshold") else 0.0
    return (_rank(r["verdict"]), -max(ratio, growth_ratio), -peak)


def _peaks_cell(r: dict[str, Any]) -> str:
    peaks = r.get("peaks")
    if not peaks:
        return "-"
    used = {dev: n for dev, n in peaks.items() if n > 0} or dict(list(peaks.items())[:1])
    if len(used) <= 4:
        return ", ".join(f"{dev} {format_size(n)}" for dev, n in used.items())
    dev, n = max(used.items(), key=lambda kv: kv[1])
    return f"max {format_size(n)} on {dev}, {len(used)} devices used"


def summary_lines(rows: dict[str, dict[str, Any]], top: int, quiet: bool, skipped_without_libtpu: int = 0) -> list[str]:
    """Aligned rows, worst first; under -q only the tests that did not pass their checks."""
    items = sorted(rows.items(), key=_sort_key)
    bad = [i for i in items if i[1]["verdict"] != "ok"]
    shown = bad if quiet else items
    shown = shown[:top]
    table = [("verdict", "peak per device", "budget", "growth/iter", "source", "test")]
    for nodeid, r in shown:
        source = r.get("witness", "")
        if r.get("growth_source"):
            source = (source + "; " if source else "") + r["growth_source"]
        table.append(
            (
                r["verdict"],
                _peaks_cell(r),
                format_size(r["budget"]) if r.get("budget") else "-",
                format_size(r["growth"]) if "growth" in r else "-",
                source,
                nodeid,
            )
        )
    widths = [max(len(t[i]) for t in table) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(t[:5], widths)) + "  " + t[5] for t in table] if shown else []
    total = f"{len(items)} measured, {len(bad)} failed a memory check"
    if len(shown) < (len(bad) if quiet else len(items)):
        total += f" (showing {len(shown)}, see --tpumem-top)"
    if skipped_without_libtpu:
        n = skipped_without_libtpu
        total += f"; {n} budgeted test{'s' if n != 1 else ''} skipped, not judged on the TPU target: no libtpu"
    if any(r.get("stand_in") for r in rows.values()):
        total += f"; {STAND_IN_NOTE}"
    lines.append(total)
    return lines
