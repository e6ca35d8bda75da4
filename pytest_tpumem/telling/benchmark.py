"""A report's figures for charting memory over commits: github-action-benchmark's
``customSmallerIsBetter`` input (``python -m pytest_tpumem benchmark``).

The format, as that action reads it (benchmark-action/github-action-benchmark, src/extract.ts,
``BenchmarkResult``, a zod schema): a JSON array, not empty, of objects with ``name`` (string),
``unit`` (string), ``value`` (number), and optional ``range`` and ``extra`` (strings; ``extra`` is
the chart's tooltip); other keys are dropped. Each entry is one chart line, matched by name from
commit to commit; the action alerts where ``value / previous value`` passes ``alert-threshold``
(src/write.ts, ``getRatio``: 1 where both are 0, and infinite where only the previous one is).

Written here, one entry a figure, in MB (10^6 bytes) to 0.1 MB, so a change under 50 kB is no
change on the chart: each measured test's peak (``<test id> peak``) and, for a leak-checked test,
its devices' growth per iteration (``<test id> growth/iteration``, the largest of its device
series, 0 where they shrank: a test that grew nothing before and grows now alerts, whatever the
ratio; host memory's growth, which moves by tens of kB from run to run, is not charted, as a ratio
from 0 would alert on it); then the run's high-water marks, each
device's largest peak and the runner's host RSS after a test (``run: cpu:0 high-water mark``,
``run: host RSS high-water mark``). Figures a TPU target judged in the run's place are the ones
written, as the report's ``peak`` is.
"""

from __future__ import annotations

import json
from typing import Any

from ..decisions.entry import Report
from ..decisions.marks import device_growth, device_marks, host_mark
from ..units import format_size

UNIT = "MB"
EXTRA = "pytest-tpumem"  # every entry's tooltip begins so: decisions.ours tells the file as the plugin's


def _mb(value: int) -> float:
    return round(max(value, 0) / 1e6, 1)


def _entry(name: str, value: int, said: str) -> dict[str, Any]:
    return {"extra": f"{EXTRA}: {said}", "name": name, "unit": UNIT, "value": _mb(value)}


def entries(report: Report) -> list[dict[str, Any]]:
    """The chart's entries of ``report``: its tests' in test id order, then the run's marks."""
    out = []
    for nodeid, e in sorted(report.tests.items()):
        if e.peak is not None:
            budget = f", budget {format_size(e.budget)}" if e.budget else ""
            out.append(_entry(f"{nodeid} peak", e.peak, f"peak {format_size(e.peak)}{budget}; {e.verdict.value}"))
        growth = device_growth(e)
        if growth is not None:
            said = f"device growth {format_size(growth)}/iteration; {e.verdict.value}"
            out.append(_entry(f"{nodeid} growth/iteration", growth, said))
    return out + marks(report)


def marks(report: Report) -> list[dict[str, Any]]:
    """The run's high-water marks (decisions.marks): each device's largest peak, and the runner's host RSS."""
    out = [
        _entry(f"run: {m.where} high-water mark", m.bytes, f"{format_size(m.bytes)} in {m.nodeid}")
        for m in device_marks(report)
    ]
    host = host_mark(report)
    if host is not None:
        said = f"{format_size(host.bytes)} {'after' if host.after else 'in'} {host.nodeid}"
        out.append(_entry("run: host RSS high-water mark", host.bytes, said))
    return out


def dumps(found: list[dict[str, Any]]) -> bytes:
    """The file, each entry's ``extra`` first: what tells it as the plugin's
    (decisions.ours.BENCHMARK_START, where ``found`` is not empty). ASCII, so any test id fits."""
    return (json.dumps(found, indent=1, allow_nan=False) + "\n").encode()
