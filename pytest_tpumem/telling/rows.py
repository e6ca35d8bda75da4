"""Records and the summary table: one JSON-able record per check (bytes as integers, the verdict as
its text, so pytest-xdist carries it to the controller in ``user_properties``), and the terminal
summary of the tests' entries (decisions.entry: a test's records added up), worst first."""

from __future__ import annotations

import json
from typing import Any

from ..decisions.entry import Entry
from ..decisions.verdict import Verdict
from ..units import format_size
from .words import STAND_IN_NOTE, plural, table

PROPERTY = "pytest_tpumem"  # the user_properties key; namespaced so a user's own "tpumem" cannot clash


def encode(row: dict[str, Any]) -> str:
    """A row as the property's value: JSON text, which JUnit XML, pytest-xdist and report logs all
    carry as it is (a dict would reach JUnit XML as a Python repr)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


def records_of(user_properties: Any) -> list[dict[str, Any]]:
    """This plugin's rows among a test's (or its report's) ``user_properties``."""
    return [r for k, v in user_properties if k == PROPERTY and (r := decode(v)) is not None]


def decode(value: Any) -> dict[str, Any] | None:
    """A property's value as a row; None where it is not one of ours."""
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


def _peaks_cell(e: Entry) -> str:
    if not e.peaks:
        return "-"
    used = {dev: n for dev, n in e.peaks.items() if n > 0} or dict(list(e.peaks.items())[:1])
    shown = e.shown_only
    if shown:  # the figure that judged first; the run's own after it, marked
        used = {**{d: n for d, n in used.items() if d not in shown}, **{d: n for d, n in used.items() if d in shown}}
    if len(used) <= 4:
        return ", ".join(f"{dev} {format_size(n)}" + (" (shown)" if dev in shown else "") for dev, n in used.items())
    dev, n = max(used.items(), key=lambda kv: kv[1])
    return f"max {format_size(n)} on {dev}, {len(used)} devices used"


NONE_MEASURED = (
    "no test was measured: none has a max_hbm or leak_check marker, and neither --tpumem-max-hbm nor "
    "--tpumem-leak-check=all applies"
)


def summary_lines(tests: dict[str, Entry], top: int, quiet: bool, skipped_without_libtpu: int = 0) -> list[str]:
    """Aligned rows, worst first; under -q only the tests that did not pass their checks."""
    items = sorted(tests.items(), key=lambda i: i[1].worst_first())
    if not items and not skipped_without_libtpu:  # the summary has other things to say (a comparison)
        return [NONE_MEASURED]
    bad = [i for i in items if i[1].failed]
    shown = bad if quiet else items
    shown = shown[:top]
    cells = [("verdict", "peak per device", "budget", "growth/iter", "source", "test")]
    for nodeid, e in shown:
        source = e.witness
        if e.growth_source:
            source = (source + "; " if source else "") + e.growth_source
        cells.append(
            (
                e.verdict.value,
                _peaks_cell(e),
                format_size(e.budget) if e.budget else "-",
                format_size(e.growth) if e.growth is not None else "-",
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
    if any(e.stand_in for e in tests.values()):
        total += f"; {STAND_IN_NOTE}"
    lines.append(total)
    return lines
