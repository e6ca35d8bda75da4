"""A leak check, told: the failure text (or, for a clean check, one line saying so), the report
section and the row of a ``decisions.leak.LeakReport``, a check's progress on the test's line, and
that row on the run's page with its timeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..units import format_apart, format_delta, format_size
from .markup import Block, dict_of, heading, int_of, list_of, size_text, table_block
from .svg import timeline_spec
from .words import files_lines, plural, shown

if TYPE_CHECKING:
    from ..decisions.leak import HostSite, KeptProgram, LeakReport, LeakSite, Series


def values_text(values: tuple[int, ...], base: int | None = None) -> str:
    """``16.0MB -> 32.0MB (+16.0MB) -> ...``; with ``base``, each value less it (``+0B -> +16.0MB ...``)."""
    size: Callable[[int], str] = format_delta
    if base is None:
        size, base = format_size, 0
    parts = [size(values[0] - base)]
    for a, b in zip(values, values[1:]):
        parts.append(f"{size(b - base)} ({format_delta(b - a)})")
    return " -> ".join(parts)


def series_line(s: Series, judged: bool = True) -> str:
    # host other (RSS less what malloc took from the OS) is below zero where malloc holds memory that
    # is not resident: its level means nothing, its changes do. Then it is shown from its baseline.
    base = s.values[0] if min((*s.values, *s.confirmation)) < 0 else None
    name = s.name if base is None else f"{s.name} (from its baseline: RSS less malloc's heaps is below 0 here)"
    line = f"{name}: {values_text(s.values, base)}"
    if len(s.confirmation) > 1:
        line += f"; confirmation: {values_text(s.confirmation, base)}"
    if s.shown_only:
        line += " (shown, not judged: host malloc and host other split it)"
    elif not judged:
        line += " (not judged: host=False)"
    left = s.iterations_left()
    if left is not None:
        source = "" if s.limit_source == "bytes_limit" else f", {s.limit_source}"
        line += f"; exhausted in ~{left} more iterations (limit {format_size(s.limit)}{source})"
    return line


def site_line(site: LeakSite) -> str:
    """``16.0MB/iteration  3 arrays f32[4000000] on cpu:0  at test_leaky.py:17 in test_leak``"""
    shapes = ", ".join(site.shapes[:2]) + (f" and {len(site.shapes) - 2} more shapes" if len(site.shapes) > 2 else "")
    where = (
        f"at {site.site}" if site.site is not None else "made inside a library (no line of the test's code recorded)"
    )
    devices = ", ".join(site.devices[:4]) + (" ..." if len(site.devices) > 4 else "")
    rate = (
        f"{format_size(site.per_iteration):>9}/iteration"
        if site.accumulates
        else f"{format_size(site.nbytes):>9} of one run"
    )
    return f"{rate}  {plural(site.count, 'array')} {shapes} on {devices}  {where}"


def kept_program_line(p: KeptProgram) -> str:
    where = f" at {p.site}" if p.site is not None else ""
    line = f"{p.name} compiled{where} ({p.per_iteration} per run"
    if p.earlier:
        line += f"; {p.earlier} of them compiled before this check, by an earlier test"
    return line + ")"


def runs_judged(report: LeakReport) -> str:
    """The runs the compile-cache rule judged: ``the 3 iterations``, or ``3 runs after the warmup
    (1 iteration and 2 more to confirm it, jax's caches kept)``."""
    if report.programs_confirmed_by:
        runs = report.iterations + report.programs_confirmed_by
        return (
            f"{runs} runs after the warmup ({plural(report.iterations, 'iteration')} and "
            f"{report.programs_confirmed_by} more to confirm it, jax's caches kept)"
        )
    return f"the {plural(report.iterations, 'iteration')}"


def host_site_line(h: HostSite) -> str:
    where = f"at {h.site}" if h.site is not None else "in a library (no line of the test's code in its stack)"
    return f"{format_size(h.nbytes):>9}  {plural(h.allocations, 'allocation')}  {where}"


def details(report: LeakReport, verbosity: int) -> list[str]:
    """What leaked and where: the arrays that survived on a device, or what grew on the host."""
    lines = []
    if report.sites:
        lines.append("  still alive after the last run, made after the warmup, by the line that made them:")
        lines += ["    " + site_line(g) for g in shown(report.sites, verbosity)]
    if report.host_sites:
        lines.append(
            "  left allocated on the host by one more run, traced with tracemalloc (Python and numpy "
            "allocations, not XLA's), by line:"
        )
        lines += ["    " + host_site_line(h) for h in shown(report.host_sites, verbosity)]
    if report.unconfirmed:
        lines.append(
            f"  (not confirmed: one more run, to confirm the growth, raised {report.unconfirmed}: the code could not "
            f"run again, and the verdict rests on the first {plural(report.iterations, 'iteration')})"
        )
    if report.host_trace_error:
        lines.append(
            "  (one more run, traced with tracemalloc to name the lines, raised "
            f"{report.host_trace_error}: the code could not run again)"
        )
    return lines


def threshold_text(report: LeakReport, series: Series) -> str:
    """``threshold 100.0MB/iteration``, or the host's own: ``host threshold 200.0MB/iteration``;
    with the digits that tell it apart from the series' growth."""
    limit = report.threshold_for(series)
    own = "host " if series.device == "host" and limit != report.threshold else ""
    return f"{own}threshold {format_apart(series.growth, limit)[1] if limit else format_size(limit)}/iteration"


def message(report: LeakReport, verbosity: int = 0) -> str:
    """What grew, by how much per iteration, on which device, and what leaked where; for a clean
    check, one line saying so. -q keeps the first series and site, -v adds every series and what
    the report section says of programs and caches."""
    head = report.worst
    over = f"over {plural(report.iterations, 'iteration')}"
    if report.confirmed_by:
        over += f", confirmed by {plural(report.confirmed_by, 'more run')}"
        if report.confirmed_cleared:
            over += " with jax's caches cleared"
    if not report.leaking:
        if head is None:
            return f"leak_check: no leak: nothing could be read {over}"
        return (
            f"leak_check: no leak {over}: the largest growth was {head.name} at "
            f"{format_size(max(head.growth, 0))}/iteration, under the {threshold_text(report, head)}"
        )
    lines = []
    if report.leaking_series:
        assert head is not None  # the first leaking series
        grew = format_apart(head.growth, report.threshold_for(head) or head.growth)[0]
        lines.append(f"leak_check: {head.name} grew {grew}/iteration {over} ({threshold_text(report, head)})")
        series = report.series if verbosity > 0 else shown(report.leaking_series, verbosity)
        lines += ["  " + series_line(s, report.threshold_for(s) is not None) for s in series]
        lines += details(report, verbosity)
        if verbosity > 0:
            lines += ["  " + line for line in section(report).splitlines()[len(report.series) :]]
        lines += files_lines(report.files)
    if report.cache_grows:
        n = len(report.kept_programs)
        lines.append(
            f"leak_check: jax's compile cache grows: {plural(n, 'program')} new in every one of {runs_judged(report)} "
            "and still held by jax's caches at the end, whatever the threshold: a jit made again on every call, a "
            "new static argument or a new shape each time"
        )
        lines += ["  " + kept_program_line(p) for p in report.kept_programs]
        if not report.leaking_series:
            lines += files_lines(report.files)
    return "\n".join(lines)


def section(report: LeakReport) -> str:
    lines = [series_line(s, report.threshold_for(s) is not None) for s in report.series]
    if report.confirmed_by:
        how = (
            "with jax's caches cleared after each"
            if report.confirmed_cleared or report.clear_caches
            else "with jax's caches kept"
        )
        lines.append(
            f"the growth was confirmed by {plural(report.confirmed_by, 'more run')} ({how}): a series leaks only "
            "where both grew by its threshold, and its growth is the smaller of the two"
        )
    if report.compiled:
        lines.append(f"programs compiled in each iteration: {', '.join(map(str, report.compiled))}")
    if report.held_by_jax:
        lines.append(
            f"new in every one of {runs_judged(report)} but held by jax's own caches alone (not a leak: jax "
            "keys them by value and keeps at most 4096 a cache; each call compiles again, which is slow): "
            + "; ".join(kept_program_line(p) for p in report.held_by_jax)
        )
    elif report.programs_confirmed_by and not report.kept_programs:
        lines.append(
            f"programs new to the iteration and held by jax's caches were read over "
            f"{plural(report.programs_confirmed_by, 'more run')} (jax's caches kept): none was new to every run"
        )
    if report.programs_unjudged:
        lines.append(
            f"programs new to every run were not judged: whether jax alone holds them cannot be told here "
            f"({report.programs_unjudged})"
        )
    if report.clear_caches and report.cache_residue:
        freed = ", ".join(f"{label} {format_size(n)}" for label, n in report.cache_residue.items())
        lines.append(
            f"jax.clear_caches() freed after a run, at most: {freed} (what a second run would find taken without it)"
        )
    return "\n".join(lines)


def progress(done: int, total: int) -> str:
    return f"[run {done}/{total}] "


def site_text(frame: Any) -> str | None:
    return None if frame is None else str(frame)


def row(r: LeakReport) -> dict[str, Any]:
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
                "leaks": s in r.leaking_series,
                "threshold": r.threshold_for(s),
                "limit": s.limit,
            }
            for s in r.series
        },
        "sites": [
            {"site": site_text(g.site), "bytes": g.nbytes, "arrays": g.count, "shapes": list(g.shapes), "runs": g.runs}
            for g in r.sites
        ],
        "host_sites": [
            {"site": site_text(h.site), "bytes": h.nbytes, "allocations": h.allocations} for h in r.host_sites
        ],
        "kept_programs": [
            {"program": k.name, "site": site_text(k.site), "per_iteration": k.per_iteration, "earlier": k.earlier}
            for k in r.kept_programs
        ],
        "programs_confirmed_by": r.programs_confirmed_by,
        "held_by_jax": [
            {"program": k.name, "site": site_text(k.site), "per_iteration": k.per_iteration} for k in r.held_by_jax
        ],
        "programs_unjudged": r.programs_unjudged or None,
        "cache_residue": dict(r.cache_residue),
        "compiled": list(r.compiled),
    }


def html(check: dict[str, Any], nodeid: str) -> list[Block]:
    """A leak check's part of its test's section on the run's page (telling.html), from its record:
    its timeline, the lines that made what stays alive, the host memory kept, the programs kept."""
    growth = f"growth {size_text(check.get('growth'))}/iteration, threshold {size_text(check.get('threshold'))}"
    out = [heading(f"leak check: {check.get('verdict', '')}, {growth}, {check.get('iterations')} iterations")]
    timeline = _timeline(check)
    if timeline is not None:
        out.append(["timeline", timeline_spec(timeline, nodeid)])  # type: ignore[arg-type]
    sites = [
        # "of runs": a line whose arrays of every run are alive piles up
        (
            size_text(s.get("bytes")),
            s.get("arrays", ""),
            s.get("runs", ""),
            ", ".join(map(str, list_of(s.get("shapes")))),
            s.get("site", ""),
        )
        for s in map(dict_of, list_of(check.get("sites")))
    ]
    host = [
        (size_text(s.get("bytes")), s.get("allocations", ""), s.get("site", ""))
        for s in map(dict_of, list_of(check.get("host_sites")))
    ]
    kept = [
        (k.get("per_iteration", ""), k.get("program", ""), k.get("site", ""))
        for k in map(dict_of, list_of(check.get("kept_programs")))
    ]
    title = "arrays alive after the last run, made after the warmup, by the line that made them"
    out += table_block(("bytes", "arrays", "of runs", "shapes", "made at"), sites, (0, 1, 2), title)
    out += table_block(("bytes", "allocations", "at"), host, (0, 1), "host memory kept, by line")
    title = "programs compiled anew and kept every iteration"
    out += table_block(("per iteration", "program", "compiled at"), kept, (0,), title)
    return out


@dataclass(frozen=True)
class _Series:
    """A leak check's series as the report keeps it, in the shape telling.svg.timeline_spec reads."""

    name: str
    device: str
    values: tuple[int, ...]
    every: bool
    growth: int
    judged: bool = True  # its record's threshold is not null (host RSS beside the host's split, host=False)


@dataclass(frozen=True)
class _Timeline:
    series: tuple[_Series, ...]
    iterations: int
    threshold: int
    leaking_series: tuple[_Series, ...] = field(default=())

    def threshold_for(self, series: _Series) -> int | None:
        return self.threshold if series.judged else None


def _timeline(check: dict[str, Any]) -> _Timeline | None:
    """A leak check's record as telling.svg draws it; None where it has no series to draw."""
    series, leaking = [], []
    for name, s in dict_of(check.get("series")).items():
        values = list_of(dict_of(s).get("values"))
        if not values or not all(int_of(v) is not None for v in values):
            continue
        one = _Series(
            str(name),
            str(s.get("device", "")),
            tuple(values),
            bool(s.get("every")),
            int_of(s.get("growth")) or 0,
            not s.get("shown_only") and ("threshold" not in s or int_of(s["threshold"]) is not None),
        )
        series.append(one)
        if s.get("leaks"):
            leaking.append(one)
    threshold = int_of(check.get("threshold"))
    if not series or threshold is None:
        return None
    iterations = max(len(s.values) for s in series) - 1
    series = [s for s in series if len(s.values) == iterations + 1]
    return _Timeline(tuple(series), iterations, threshold, tuple(leaking))
