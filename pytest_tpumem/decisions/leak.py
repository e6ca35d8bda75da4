"""Leak check: run code repeatedly, read every source after each run, decide whether it grows.

Decision rule (also in the README): after ``warmup`` runs, a baseline is read; then each of the
``iterations`` runs gives one delta per series (live arrays and runtime bytes-in-use per device,
and host RSS). The growth per iteration is the smaller of the *lower median* delta and the *mean*
delta (net growth / iterations); a series leaks when it is at or above the threshold. So at least
half of the iterations (rounded up: both of 2, 2 of 3, 3 of 4) must each have grown by the
threshold, and the memory must not have come back down. A steady leak grows every iteration and
is caught; a one-off allocation (a cache filled once) grows in one iteration only and is not;
memory that goes up and down, and noise, are not. With ``iterations=1`` the single delta decides.

Every reading waits for the work the run left in flight (readings.inflight): a program whose
outputs the run dropped still holds its buffers until it ends, and host RSS read before that
moved by whole buffers from one iteration to the next.

The host is read as RSS split in two (glibc): ``host malloc``, the bytes the C allocator has
handed out, and ``host other``, RSS less what the allocator has taken from the OS (Python's small
objects, memory mapped directly). Both get the rule above. RSS itself moves by whole blocks the
allocator keeps or gives back (a freed 16.8 MB buffer kept resident by a thread's arena for a few
runs, seen in RSS and in the allocator's heaps, in neither of the two): it is shown, and judged only
where the split cannot be read, and then only where *every* delta grew by the threshold, as
CPython's refleak hunter asks of reference counts.

A growth that is not read off live arrays alone is confirmed before it is a leak: where only the
host grew (more than a test's own memory lives there), and everywhere under the whole-suite sweep
(jax's caches kept between runs, which hold what the runs compiled; one iteration only, so that a
clean test costs two runs). As many runs again as the iterations, and at least
``defaults.CONFIRM_RUNS``, are read, with jax's caches cleared after each where the first ones
cleared them or the sweep asks (then also before the confirmation's baseline); a series leaks only
when those runs grow by the threshold too, and its growth is the smaller of the two figures.
What the caches held before the check is then in none of the confirmation's readings, so it is
never credited against a growth.

Where a device leaks, the report says what leaked and where: the arrays made after the warmup and
still alive after the last iteration, grouped by the user's line that made them. With jax's caches
kept between runs (``clear_caches=False``, and the sweep), a program new to every run after the
warmup and still held by jax's caches at the end is a leak of its own (the compile cache grows with
every call), whatever the threshold. "New to a run" means that no earlier run of the check ran or
compiled it, whether the run compiled it or an earlier test did (so the verdict does not depend on
which tests ran first); with one iteration (the sweep), the new programs it kept are confirmed by
``defaults.CONFIRM_RUNS`` more runs with the caches kept before the rule judges them. With ``clear_caches=True``, what clearing freed
after each run (the caches' residue) is reported: what a pipeline's second run would find taken.
Host RSS is judged with the threshold, with a threshold of its own (``host="200MB"``), or not at
all (``host=False``: read and shown only).

The runs are made and read by measuring.leak; this module judges what they read (``judge``,
``to_confirm``, ``confirmed``), and checks.check_leaks puts the two together.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..measuring.leak import HOST_OTHER, HOST_RSS, Point, Runs
from .leakoptions import LeakOptions
from .verdict import Verdict


def _deltas(values: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(b - a for a, b in zip(values, values[1:]))


def _rule(values: tuple[int, ...], every: bool = False) -> int:
    """The lower median delta (``every``: the smallest), but no more than the mean: see the module's docstring."""
    d = sorted(_deltas(values))
    if not d:
        return 0
    return min(d[0] if every else d[(len(d) - 1) // 2], (values[-1] - values[0]) // len(d))


@dataclass(frozen=True)
class Series:
    """Bytes after the baseline and after each iteration, for one source on one device (or the host)."""

    name: str  # "cpu:0 live arrays", "gpu:0 bytes in use", "host RSS"
    device: str  # device label, or "host"
    values: tuple[int, ...]  # values[0] is the baseline after warmup
    limit: int | None = None
    limit_source: str = "bytes_limit"  # where the limit comes from: the device's, or a TPU target's usable HBM
    confirmation: tuple[int, ...] = ()  # where a growth was confirmed: the baseline and each of the runs after
    every: bool = False  # grown only where every delta grew (host RSS, which moves by whole allocator blocks)
    shown_only: bool = False  # read and shown, not judged (host RSS, where host malloc and host other split it)

    @property
    def deltas(self) -> tuple[int, ...]:
        return _deltas(self.values)

    @property
    def growth(self) -> int:
        """Growth per iteration as judged: the lower median of the deltas (``every``: the smallest),
        but no more than the mean (net growth over the iterations), so memory that goes up and
        down is not growth. Where the growth was confirmed by more runs, no more than their growth either."""
        growth = _rule(self.values, self.every)
        if len(self.confirmation) > 1:
            growth = min(growth, _rule(self.confirmation, self.every))
        return growth

    def iterations_left(self) -> int | None:
        """How many more iterations at this growth until ``limit`` is reached, where it is known."""
        if self.limit is None or self.growth <= 0:
            return None
        return max(0, (self.limit - self.values[-1]) // self.growth)


@dataclass(frozen=True)
class LeakSite:
    """Arrays made at one line of the user's code after the warmup and still alive after the last iteration."""

    site: Any  # readings.frames.Frame, or None where no user frame was recorded
    count: int
    nbytes: int  # all of them together, every device
    shapes: tuple[str, ...]  # the distinct shapes, the most common first ("f32[4000000]")
    devices: tuple[str, ...]
    iterations: int
    runs: int = 0  # in how many of the measured runs its surviving arrays were made

    @property
    def per_iteration(self) -> int:
        return self.nbytes // max(self.iterations, 1)

    @property
    def accumulates(self) -> bool:
        """Arrays made in more than one run are still alive: they pile up. Arrays of one run only
        are state the next run replaces (or a one-off), not growth; with one run after the baseline,
        what it left is taken as piling up (one run cannot show more)."""
        return self.runs > 1 or self.iterations == 1


def leak_sites(arrays: list[tuple[Any, int]], iterations: int, top: int = 5) -> tuple[LeakSite, ...]:
    """The arrays (readings.arrays.ArrayInfo, and the run that made each) grouped by the line that
    made them: the sites whose arrays pile up first, then by bytes."""
    groups: dict[Any, list[tuple[Any, int]]] = {}
    for info, run in arrays:
        if info is not None:
            groups.setdefault(info.site, []).append((info, run))
    sites = []
    for site, made in groups.items():
        shapes: dict[str, int] = {}
        for i, _ in made:
            shapes[i.shape] = shapes.get(i.shape, 0) + 1
        devices = sorted({d for i, _ in made for d in i.devices})
        sites.append(
            LeakSite(
                site,
                len(made),
                sum(i.nbytes for i, _ in made),
                tuple(sorted(shapes, key=lambda k: -shapes[k])),
                tuple(devices),
                iterations,
                len({run for _, run in made}),
            )
        )
    return tuple(sorted(sites, key=lambda g: (not g.accumulates, -g.nbytes, str(g.site)))[:top])


@dataclass(frozen=True)
class HostSite:
    """Host memory one more run left allocated at one line of the user's code (traced with tracemalloc)."""

    site: Any  # readings.frames.Frame, or None where no user frame was in the allocation's stack
    nbytes: int
    allocations: int


def host_sites(grown: list[tuple[Any, int, int]], top: int = 5) -> tuple[HostSite, ...]:
    """readings.host.traced_growth's (line, bytes, allocations), the most bytes first."""
    sites = sorted((HostSite(site, size, count) for site, size, count in grown), key=lambda h: (-h.nbytes, str(h.site)))
    largest = sites[0].nbytes if sites else 0
    return tuple(h for h in sites[:top] if h.nbytes * 100 >= largest)  # under 1% of the largest: noise


@dataclass(frozen=True)
class KeptProgram:
    """A program new to every run after the warmup (compiled then, or by an earlier test) and still
    held by jax's caches at the end."""

    name: str  # "jit_step"
    site: Any  # readings.frames.Frame that compiled it, or None
    per_iteration: int  # new copies held per run (the fewest of any run)
    earlier: int = 0  # of them, how many were compiled before the check (by an earlier test)


def kept_in_every_iteration(runs: list[list[Any]]) -> tuple[KeptProgram, ...]:
    """The programs (name, line) new to every run after the warmup and still held at the end
    (readings.programs.ProgramMade per run, as measuring.leak.NewPrograms gives them): jax's
    compile cache grows with every call. A program new to one run only (a branch taken once, a
    cache filled once) is not growth; neither is one the cache let go of (it is not in the lists),
    and one run alone cannot show it."""
    if len(runs) < MIN_PROGRAM_RUNS or not all(runs):
        return ()
    counts: list[dict[tuple[str, Any], int]] = []
    earlier: dict[tuple[str, Any], int] = {}
    for made in runs:
        c: dict[tuple[str, Any], int] = {}
        for m in made:
            key = (m.name, m.site)
            c[key] = c.get(key, 0) + 1
            earlier[key] = earlier.get(key, 0) + (1 if m.earlier else 0)
        counts.append(c)
    every = set(counts[0]).intersection(*counts[1:])
    return tuple(
        KeptProgram(name, site, min(c[(name, site)] for c in counts), earlier[(name, site)])
        for name, site in sorted(every, key=str)
    )


MIN_PROGRAM_RUNS = 2  # runs after the warmup that must each hold a new program before the cache is said to grow


@dataclass(frozen=True)
class LeakReport:
    """Result of a leak check: every series, the threshold and the verdict."""

    iterations: int
    warmup: int
    threshold: int
    series: tuple[Series, ...]
    sites: tuple[LeakSite, ...] = ()  # where a device leaked: what survived, by the line that made it
    compiled: tuple[int, ...] = ()  # programs compiled in each measured iteration
    kept_programs: tuple[KeptProgram, ...] = ()  # caches kept: new to every run after the warmup and held at the end
    programs_confirmed_by: int = 0  # caches kept, one iteration: the runs that confirmed its new programs
    held_by_jax: tuple[KeptProgram, ...] = ()  # new to every run, but held by jax's own value-keyed caches alone:
    # eager control flow over a function made anew each call (compiled every time; jax bounds them): not a leak
    programs_unjudged: str = ""  # programs new to every run could not be judged on this jax: why
    host_sites: tuple[HostSite, ...] = ()  # where only the host leaked: what one more, traced run left, by line
    host_trace_error: str = ""  # where that one more run raised: the code could not run again
    cache_residue: dict[str, int] = field(default_factory=dict)  # clear_caches=True: the most jax.clear_caches()
    # freed after a measured run, bytes per device that reports bytes in use (not CPU), and "host" for RSS
    clear_caches: bool = True
    confirmed_cleared: bool = False  # caches kept between runs (the sweep): a growth is confirmed with them cleared
    host: bool | int = True  # host RSS judged with the threshold (True), not judged (False), or with its own (bytes)
    confirmed_by: int = 0  # runs after the iterations that confirmed a growth (0: none was needed)
    unconfirmed: str = ""  # where the confirming runs raised: the error (the first runs' verdict stands)
    profiles: tuple[
        bytes, ...
    ] = ()  # where asked for: jax's device-memory profiles after the warmup and after the last run
    files: tuple[str, ...] = ()  # files written for this report (profiles, timeline), where a directory was given

    def threshold_for(self, series: Series) -> int | None:
        """The threshold ``series`` is judged with; None for a series only shown, and for the host's where ``host=False``."""
        if series.shown_only:
            return None
        if series.device != "host" or self.host is True:
            return self.threshold
        return None if self.host is False else int(self.host)

    @property
    def leaking_series(self) -> tuple[Series, ...]:
        """The series that grew by their threshold or more per iteration, devices before the host."""
        return tuple(s for s in self.series if (t := self.threshold_for(s)) is not None and s.growth >= t)

    @property
    def figure(self) -> Series | None:
        """The series whose growth a gate compares: the first leaking one; else the fastest-growing of
        those read exactly (host RSS, which moves by allocator blocks, is left out)."""
        if self.leaking_series:
            return self.leaking_series[0]
        exact = [s for s in self.series if not s.every and self.threshold_for(s) is not None]  # not RSS
        return max(exact, key=lambda s: s.growth, default=None)

    @property
    def cache_grows(self) -> bool:
        """Programs new to every run after the warmup are still held by jax's caches: the compile
        cache grows with every call, a leak of its own whatever its bytes."""
        return bool(self.kept_programs)

    @property
    def leaking(self) -> bool:
        """Whether any series leaked (``leaking_series`` says which), or the compile cache grows."""
        return bool(self.leaking_series) or self.cache_grows

    failed = leaking  # what every check's result says (BudgetResult.failed, TargetResult.failed, ...)

    @property
    def verdict(self) -> Verdict:
        return Verdict.LEAK if self.leaking else Verdict.OK

    @property
    def worst(self) -> Series | None:
        """The series that decided: the first leaking one (devices before the host), else the fastest growing."""
        if self.leaking_series:
            return self.leaking_series[0]
        judged = [s for s in self.series if self.threshold_for(s) is not None]
        return max(judged or self.series, key=lambda s: s.growth, default=None)

    def growth(self, device: str) -> int:
        """Largest judged growth per iteration among the series of ``device`` ("host" for RSS)."""
        return max((s.growth for s in self.series if s.device == device), default=0)


def judge(
    runs: Runs,
    options: LeakOptions,
    capacity: tuple[int, str] | None = None,
    programs_confirmed_by: int = 0,
) -> LeakReport:
    """The report of the measured runs (measuring.leak): a series per source read at every point.
    ``capacity``: (bytes, where from) for a device that reports no ``bytes_limit`` (a TPU target's
    usable HBM). ``programs_confirmed_by``: runs after the iterations whose new programs
    (``runs.new_programs``) were read too (caches kept)."""
    points = runs.points
    series = []
    for name, (_, limit) in points[0].items():
        if all(name in p for p in points):
            device = "host" if name.startswith("host ") else name.split(" ", 1)[0]
            source = "bytes_limit"
            if limit is None and device != "host" and capacity is not None:
                limit, source = capacity
            rss = name == HOST_RSS
            shown = rss and HOST_OTHER in points[0]  # RSS is split exactly into malloc's and the rest
            series.append(
                Series(name, device, tuple(p[name][0] for p in points), limit, source, every=rss, shown_only=shown)
            )
    return LeakReport(
        options.iterations,
        options.warmup,
        options.threshold,
        tuple(series),
        compiled=runs.compiled,
        kept_programs=() if options.clear_caches else kept_in_every_iteration(runs.new_programs),
        programs_confirmed_by=programs_confirmed_by,
        held_by_jax=kept_in_every_iteration(runs.held_by_jax),
        programs_unjudged=runs.programs_unjudged,
        cache_residue=runs.residue,
        clear_caches=options.clear_caches,
        confirmed_cleared=options.confirm_cleared,
        host=options.host,
        profiles=runs.profiles,
    )


def to_confirm(report: LeakReport) -> bool:
    """A growth not read off live arrays alone is confirmed by more runs before it is a leak: where
    only the host grew, and everywhere under the sweep (caches kept between runs)."""
    suspects = report.leaking_series
    return bool(suspects) and (report.confirmed_cleared or all(s.device == "host" for s in suspects))


def confirmed(report: LeakReport, points: list[Point], runs: int) -> LeakReport:
    """``report`` with the confirming runs' points (baseline first) beside each series they read."""
    return replace(
        report,
        confirmed_by=runs,
        series=tuple(
            replace(s, confirmation=tuple(p[s.name][0] for p in points)) if all(s.name in p for p in points) else s
            for s in report.series
        ),
    )
