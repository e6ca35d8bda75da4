"""Rows and the summary table: one JSON-able record per check (bytes as integers, the verdict as
its text, so pytest-xdist carries it to the controller in ``user_properties``), records of one
test merged into one row, and the terminal summary, worst first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..decisions.verdict import Verdict, rank_of
from ..units import format_size
from .words import STAND_IN_NOTE, plural, table

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


def regressed_row(changes: list[Any]) -> dict[str, Any]:
    """A test failed for its figures against the baseline (decisions.compare.Change)."""
    return {
        "check": "baseline",
        "verdict": Verdict.REGRESSED.value,
        "changes": [{"figure": c.figure, "old": c.old, "new": c.new, "beyond": c.regressed_beyond} for c in changes],
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
        total += f"; {plural(skipped_without_libtpu, 'budgeted test')} skipped, not judged on the TPU target: no libtpu"
    if any(r.get("stand_in") for r in rows.values()):
        total += f"; {STAND_IN_NOTE}"
    lines.append(total)
    return lines
