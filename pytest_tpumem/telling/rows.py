"""Rows and the summary table: one JSON-able record per check (bytes as integers, the verdict as
its text, so pytest-xdist carries it to the controller in ``user_properties``), records of one
test merged into one row, and the terminal summary, worst first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..decisions.verdict import Verdict, rank_of
from ..units import format_size
from .text import STAND_IN_NOTE, _plural, table

if TYPE_CHECKING:
    from ..decisions.budget import BudgetResult
    from ..decisions.leak import LeakReport
    from ..decisions.oom import OomResult
    from ..decisions.target import TargetResult

PROPERTY = "pytest_tpumem"  # the user_properties key; namespaced so a user's own "tpumem" cannot clash


def encode(row: dict[str, Any]) -> str:
    """A row as the property's value: JSON text, which JUnit XML, pytest-xdist and report logs all
    carry as it is (a dict would reach JUnit XML as a Python repr)."""
    import json

    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


def records_of(user_properties: Any) -> list[dict[str, Any]]:
    """This plugin's rows among a test's (or its report's) ``user_properties``."""
    return [r for k, v in user_properties if k == PROPERTY and (r := decode(v)) is not None]


def decode(value: Any) -> dict[str, Any] | None:
    """A property's value as a row; None where it is not one of ours."""
    import json

    if isinstance(value, dict):
        return value
    try:
        row = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return row if isinstance(row, dict) and "verdict" in row else None


def _site(frame: Any) -> str | None:
    return None if frame is None else str(frame)


def _devices(peak: Any) -> dict[str, dict[str, Any]]:
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
        }
        for d in peak.devices.values()
    }


def budget_row(r: BudgetResult) -> dict[str, Any]:
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
        "devices": _devices(peak),
        "uncounted": peak.uncounted or None,
    }


def target_row(r: TargetResult) -> dict[str, Any]:
    return {
        "check": "target",
        "verdict": r.verdict.value,
        "budget": r.limit,
        "budget_source": r.spelled,
        "target": r.target.topology,
        "peaks": {r.target.topology: r.need},
        "witness": f"compiled for {r.target.topology}",
        "programs": [
            {
                "program": j.program,
                "source": j.source,
                "need": j.need if j.estimate is not None else None,
                "resident": j.resident,
                "not_judged": j.reason or None,
            }
            for j in r.judgements
            if not j.skipped
        ],
        "errors": list(r.errors),
    }


def leak_row(r: LeakReport) -> dict[str, Any]:
    worst = r.figure
    source = worst.name if worst else ""
    if r.sites and r.sites[0].site is not None:
        source += f" at {r.sites[0].site.file}:{r.sites[0].site.line}"
    if r.cache_grows:
        source = (source + "; " if r.leaking_series else "") + "compile cache grows"
    return {
        "check": "leak",
        "verdict": r.verdict.value,
        "growth": worst.growth if worst else 0,
        "growth_source": source,
        "threshold": r.threshold,
        "iterations": r.iterations,
        "confirmed_by": r.confirmed_by,
        "unconfirmed": r.unconfirmed or None,
        "warmup": r.warmup,
        "clear_caches": r.clear_caches,
        "series": {
            s.name: {
                "device": s.device,
                "values": list(s.values),
                "confirmation": list(s.confirmation) or None,
                "every": s.every,
                "shown_only": s.shown_only,
                "growth": s.growth,
                "threshold": r.threshold_for(s),
                "limit": s.limit,
            }
            for s in r.series
        },
        "sites": [
            {"site": _site(g.site), "bytes": g.nbytes, "arrays": g.count, "shapes": list(g.shapes), "runs": g.runs}
            for g in r.sites
        ],
        "host_sites": [{"site": _site(h.site), "bytes": h.nbytes, "allocations": h.allocations} for h in r.host_sites],
        "kept_programs": [
            {"program": k.name, "site": _site(k.site), "per_iteration": k.per_iteration} for k in r.kept_programs
        ],
        "cache_residue": dict(r.cache_residue),
        "compiled": list(r.compiled),
    }


def oom_row(r: OomResult) -> dict[str, Any]:
    out: dict[str, Any] = {"check": "oom", "verdict": r.verdict.value, "budget": r.limit, "error": r.error}
    if r.peak is not None:
        out["peaks"] = {d.device: d.peak for d in r.peak.devices.values()}
        out["devices"] = _devices(r.peak)
    return out


def regressed_row(changes: list[Any]) -> dict[str, Any]:
    """A test failed for its figures against the baseline (decisions.compare.Change)."""
    return {
        "check": "baseline",
        "verdict": Verdict.REGRESSED.value,
        "changes": [
            {"figure": c.figure, "old": c.old, "new": c.new, "beyond": c.regressed_beyond} for c in changes
        ],
    }


def merge(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several records of one test (its budget, its target, a marker and fixture calls) as one row:
    the worst verdict, the peaks of every device and target, the largest growth."""
    out: dict[str, Any] = {}
    for r in rows:
        verdict = min(out.get("verdict", "ok"), r.get("verdict", "ok"), key=rank_of)
        if "growth" in out and "growth" in r and r["growth"] < out["growth"]:
            r = {k: v for k, v in r.items() if not k.startswith("growth")}
        for key, value in r.items():
            if value is None:
                continue
            if key in ("peaks", "devices"):
                out[key] = {**out.get(key, {}), **value}
            elif key == "witness" and out.get("witness") and value not in out["witness"]:
                out["witness"] = f"{out['witness']}; {value}"
            elif key == "budget":
                out.setdefault("budget", value)
            else:
                out[key] = value
        out["verdict"] = verdict
    return out


def worst_first(item: tuple[str, dict[str, Any]]) -> tuple:
    """Sort key of (test id, row or report entry): the worst verdict first, then the closest to its
    budget or threshold, then the largest peak."""
    _, r = item
    peak = max(r.get("peaks", {0: 0}).values() or [0])
    ratio = peak / r["budget"] if r.get("budget") else 0.0
    growth_ratio = (r.get("growth") or 0) / r["threshold"] if r.get("threshold") else 0.0
    return (rank_of(r["verdict"]), -max(ratio, growth_ratio), -peak)


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
    items = sorted(rows.items(), key=worst_first)
    bad = [i for i in items if i[1]["verdict"] != "ok"]
    shown = bad if quiet else items
    shown = shown[:top]
    cells = [("verdict", "peak per device", "budget", "growth/iter", "source", "test")]
    for nodeid, r in shown:
        source = r.get("witness", "")
        if r.get("growth_source"):
            source = (source + "; " if source else "") + r["growth_source"]
        cells.append(
            (
                r["verdict"],
                _peaks_cell(r),
                format_size(r["budget"]) if r.get("budget") else "-",
                format_size(r["growth"]) if "growth" in r else "-",
                source,
                nodeid,
            )
        )
    lines = table(cells) if shown else []
    total = f"{len(items)} measured, {len(bad)} failed a memory check"
    if len(shown) < (len(bad) if quiet else len(items)):
        total += f" (showing {len(shown)}, see --tpumem-top)"
    if skipped_without_libtpu:
        total += f"; {_plural(skipped_without_libtpu, 'budgeted test')} skipped, not judged on the TPU target: no libtpu"
    if any(r.get("stand_in") for r in rows.values()):
        total += f"; {STAND_IN_NOTE}"
    lines.append(total)
    return lines
