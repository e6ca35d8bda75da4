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
still alive after the last iteration, grouped by the user's line that made them. With
``clear_caches=False``, a program compiled anew and kept in every iteration is a leak of its own
(the compile cache grows), whatever the threshold. With ``clear_caches=True``, what clearing freed
after each run (the caches' residue) is reported: what a pipeline's second run would find taken.
Host RSS is judged with the threshold, with a threshold of its own (``host="200MB"``), or not at
all (``host=False``: read and shown only).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import defaults
from ..readings import devices as device_readings
from ..readings import host as host_readings
from ..units import parse_size
from .verdict import Verdict


def _deltas(values: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(b - a for a, b in zip(values, values[1:]))


def _rule(values: tuple[int, ...], every: bool = False) -> int:
    """The lower median delta (``every``: the smallest), but no more than the mean: see the module's docstring."""
    d = sorted(_deltas(values))
    if not d:
        return 0
    return min(d[0] if every else d[(len(d) - 1) // 2], (values[-1] - values[0]) // len(d))


HOST_MALLOC = "host malloc"  # bytes the C allocator has handed out (readings.host.malloc_figures)
HOST_OTHER = "host other"  # RSS outside malloc's heaps: Python's small objects, memory mapped directly
HOST_RSS = "host RSS"  # judged (every delta must grow) only where the two above cannot be read


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
        are state the next run replaces (or a one-off), not growth."""
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
    """A program compiled anew, and kept by jax's caches, in every measured iteration."""

    name: str  # "jit_step"
    site: Any  # readings.frames.Frame that compiled it, or None
    per_iteration: int  # copies compiled and kept per iteration (the fewest of any iteration)


def kept_in_every_iteration(
    runs: list[list[Any]],
    before: dict[Any, int] | Callable[[], dict[Any, int]] | None = None,
    after: dict[Any, int] | Callable[[], dict[Any, int]] | None = None,
) -> tuple[KeptProgram, ...]:
    """The programs (name, line) compiled in every iteration (readings.programs.ProgramMade per run)
    whose line holds at least one more executable per iteration at the end than at the baseline
    (``before``/``after``: executables held by line, or a function that counts them, called only
    where some program was compiled in every iteration: counting reads every executable's
    traceback): jax's compile cache grows. A program compiled again but replacing the last one (the
    cache stays the size it was) is not growth; neither is anything seen in a single iteration."""
    if len(runs) < 2 or not all(runs):
        return ()
    counts = []
    for made in runs:
        c: dict[tuple[str, Any], int] = {}
        for m in made:
            c[(m.name, m.site)] = c.get((m.name, m.site), 0) + 1
        counts.append(c)
    every = set(counts[0]).intersection(*counts[1:])
    if not every:
        return ()
    before = (before() if callable(before) else before) or {}
    after = (after() if callable(after) else after) or {}
    grown = {key for key in every if after.get(key[1], 0) - before.get(key[1], 0) >= len(runs)}
    return tuple(KeptProgram(name, site, min(c[(name, site)] for c in counts)) for name, site in sorted(grown, key=str))


@dataclass(frozen=True)
class LeakReport:
    """Result of a leak check: every series, the threshold and the verdict."""

    iterations: int
    warmup: int
    threshold: int
    series: tuple[Series, ...]
    sites: tuple[LeakSite, ...] = ()  # where a device leaked: what survived, by the line that made it
    compiled: tuple[int, ...] = ()  # programs compiled in each measured iteration
    kept_programs: tuple[KeptProgram, ...] = ()  # clear_caches=False: compiled anew and kept in every iteration
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
        """Programs were compiled anew and kept in every iteration: jax's compile cache grows (a
        leak of its own, except where a growth is confirmed after clearing: then only bytes count)."""
        return bool(self.kept_programs) and not self.confirmed_cleared

    @property
    def leaking(self) -> bool:
        """Whether any series leaked (``leaking_series`` says which), or the compile cache grows."""
        return bool(self.leaking_series) or self.cache_grows

    @property
    def leaked(self) -> bool:
        return self.leaking

    failed = leaking

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


class LeakError(AssertionError):
    """Raised by ``pytest_tpumem.check_leaks`` with ``raise_on_leak=True``: ``text`` is the failure
    text (telling/), ``.report`` the LeakReport."""

    def __init__(self, report: LeakReport, text: str):
        super().__init__(text)
        self.report = report


def _settle(result: Any) -> None:
    """Wait for the run's work: its result, every live array still being computed, effects, and
    the programs whose outputs it dropped (readings.inflight: no runtime thread busy any more).

    A test body returns None, so waiting for the result alone would read memory while programs
    are still running (and their buffers still held)."""
    import jax

    from ..readings.inflight import wait_idle

    for pending in (result, jax.live_arrays()):
        try:
            jax.block_until_ready(pending)
        except Exception:
            pass  # results that are not pytrees of arrays, arrays deleted meanwhile
    jax.effects_barrier()
    wait_idle()


def _cleanup(clear_caches: bool, devices: list[Any] | None = None) -> dict[str, int]:
    """Collect the run's garbage and (``clear_caches``) clear jax's caches; with ``devices``, the
    runtime's bytes in use per device (where it reports them: not on CPU) and host RSS just before
    the caches were cleared, to tell what clearing freed. Cheap reads only: no live-array walk."""
    gc.collect()  # frees the run's cycles; what clear_caches drops is freed by reference counting
    before: dict[str, int] = {}
    if clear_caches:
        import jax

        if devices is not None:
            host_readings.trim_host()
            before = device_readings.read_in_use(devices)
            rss = host_readings.host_rss()
            if rss is not None:
                before["host"] = rss
        jax.clear_caches()
    host_readings.trim_host()
    return before


def _residue(before: dict[str, int], point: dict[str, tuple[int, int | None]]) -> dict[str, int]:
    """What clearing jax's caches freed: the reading before it minus the point read after it."""
    out = {}
    for label, used in before.items():
        after = point.get(HOST_RSS if label == "host" else f"{label} bytes in use")
        if after is not None:
            out[label] = max(0, used - after[0])
    return out


def _read(devices: list[Any], visit: Callable[[Any], None] | None = None) -> dict[str, tuple[int, int | None]]:
    """One point for every series: name -> (bytes, limit); ``visit`` sees every live array on the way."""
    point: dict[str, tuple[int, int | None]] = {}
    for label, mem in device_readings.read_devices(devices, visit).items():
        point[f"{label} live arrays"] = (mem.live_bytes, mem.limit)
        if mem.in_use is not None:
            point[f"{label} bytes in use"] = (mem.in_use, mem.limit)
    rss = host_readings.host_rss()
    malloc = host_readings.malloc_figures()
    if malloc is not None:
        in_use, obtained = malloc
        point[HOST_MALLOC] = (in_use, None)
        if rss is not None:
            point[HOST_OTHER] = (rss - obtained, None)
    if rss is not None:
        point[HOST_RSS] = (rss, None)
    return point


def _confirm(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    devices: list[Any],
    births: Any,
    last: dict[str, tuple[int, int | None]],
    iterations: int,
    runs: int,
    clear: bool,
    cleared_before: bool,
    step: Callable[[int], None],
) -> tuple[list[dict[str, tuple[int, int | None]]], int]:
    """``runs`` more runs after the ``iterations``, read as those were (jax's caches cleared after
    each where ``clear``): the points, baseline first, and the runs made. Where the first runs kept
    the caches and these clear them, they are cleared before the baseline is read, so that neither
    it nor any later reading holds what they held (before the check or during it). No run comes
    first to warm up (it would cost one more compile of everything): what a first compile leaves
    behind is one delta, and the rule asks for growth in half of them."""
    run = iterations
    if clear and not cleared_before:
        _cleanup(True)
        points = [_read(devices)]
    else:
        points = [last]
    for done in range(runs):
        _settle(fn(*args, **kwargs))
        _cleanup(clear)
        run += 1
        points.append(_read(devices, births.visitor(run)))
        step(done + 1)
    return points, run - iterations


def validate(fn: Any, iterations: Any, warmup: Any, clear_caches: Any = True) -> None:
    """ValueError (one line naming the value) for arguments check_leaks cannot run with."""
    import inspect

    if not callable(fn):
        raise ValueError(f"fn={_short_repr(fn)} is not callable; pass the function to run, then its arguments")
    target = getattr(fn, "func", fn)  # a functools.partial's function
    if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
        raise ValueError(
            f"fn={_short_repr(fn)} is an async function: calling it only makes a coroutine, and its body would never "
            "run; pass a function that runs it, e.g. lambda: asyncio.run(fn())"
        )
    if inspect.isgeneratorfunction(target):
        raise ValueError(
            f"fn={_short_repr(fn)} is a generator function: calling it runs none of its body; pass a function that "
            "exhausts it, e.g. lambda: list(fn())"
        )
    for name, value, least, most in (
        ("iterations", iterations, 1, defaults.MAX_ITERATIONS),
        ("warmup", warmup, 0, defaults.MAX_WARMUP),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise ValueError(f"{name}={_short_repr(value)}: expected an int from {least} to {most}")
    if not isinstance(clear_caches, bool):
        raise ValueError(f"clear_caches={clear_caches!r}: expected True or False")


def parse_host(host: Any) -> bool | int:
    """``host=``: True (host RSS judged with the threshold), False (not judged) or a size (its own
    threshold); ValueError naming the value otherwise."""
    if isinstance(host, bool):
        return host
    from ..units import SizeError

    try:
        return parse_size(host, what="host")
    except SizeError as e:
        raise ValueError(f"{e}; or True (judged with the threshold) or False (not judged)") from None


def _short_repr(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text[:60] + ("..." if len(text) > 60 else "")


def check_leaks(
    fn: Callable[..., Any],
    *args: Any,
    iterations: int = defaults.ITERATIONS,
    warmup: int = defaults.WARMUP,
    threshold: int | str = defaults.LEAK_THRESHOLD,
    clear_caches: bool = defaults.CLEAR_CACHES,
    host: bool | int | str = True,
    devices: list[Any] | None = None,
    capacity: tuple[int, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    profile: bool = False,
    confirm_cleared: bool = False,
    **kwargs: Any,
) -> LeakReport:
    """Run ``fn(*args, **kwargs)`` ``warmup + iterations`` times and report per-iteration growth.

    After each run the result is waited for and dropped, garbage is collected and (by default)
    ``jax.clear_caches()`` frees compiled executables, then every source is read: on ``devices``
    (default: every local device) and the host. ``capacity``: (bytes, where from) for the forecast
    of a device that reports no ``bytes_limit`` (a TPU target's usable HBM). ``progress(done,
    total)`` is called after each run. ``profile``: keep jax's device-memory profiles after the
    warmup and after the last run (``LeakReport.profiles``). ``host``: host RSS judged with
    ``threshold`` (True), with a threshold of its own (a size), or read and not judged (False).
    ``confirm_cleared`` (with ``clear_caches=False``: what the whole-suite sweep does): the caches
    are kept between runs, so nothing is compiled again; a series that grew by the threshold is
    confirmed by as many runs again with the caches cleared after each, so what they hold is not
    a leak (programs kept by the caches are then a leak only by their bytes). Keyword arguments
    named like this function's own (``iterations``, ``warmup``, ``threshold``, ``clear_caches``,
    ``host``, ``devices``, ``capacity``, ``progress``, ``profile``, ``confirm_cleared``; and
    ``raise_on_leak`` of ``pytest_tpumem.check_leaks``) are taken here, not passed to ``fn``: give them to ``fn`` with
    ``functools.partial``.
    """
    validate(fn, iterations, warmup, clear_caches)
    host = parse_host(host)
    if confirm_cleared and clear_caches:
        raise ValueError(
            "confirm_cleared=True: expected clear_caches=False (with clear_caches=True every reading is after clearing)"
        )
    threshold = parse_size(threshold, what="threshold")
    devices = device_readings.local_devices() if devices is None else list(devices)
    # Everything alive before the check is moved out of the collector's sight (gc.freeze): each
    # collection then scans only what the runs created, a fraction of a millisecond instead of
    # ~50 ms for the ~100k objects jax keeps. Cycles among those older objects are not the runs'
    # doing and are left alone until the check ends; only the young generations are collected
    # first (a full collection here cost ~75 ms a check, a third of a sweep's overhead).
    gc.collect(1)
    frozen = not gc.get_freeze_count()
    if frozen:
        gc.freeze()
    from ..readings import programs
    from ..readings.arrays import ArrayBirths, describe

    total = warmup + iterations
    step = progress or (lambda done, total: None)
    try:
        for done in range(1, warmup + 1):
            _settle(fn(*args, **kwargs))
            _cleanup(clear_caches)
            step(done, total)
        if warmup == 0:
            _cleanup(clear_caches)
        births = ArrayBirths()
        points = [_read(devices, births.visitor(0))]  # what is alive now is not the runs' doing
        first_profile = device_readings.memory_profile() if profile else None
        made: list[list[Any]] = []  # per iteration: the programs it compiled
        held_before = programs.held_now(devices) if not clear_caches else None  # held until the check ends
        compiled: list[int] = []
        residue: dict[str, int] = {}
        for done in range(warmup + 1, total + 1):
            before = programs.held_now(devices)  # held through the run: no new program can take their ids
            _settle(fn(*args, **kwargs))
            new = programs.compiled_since(devices, before)
            del before
            freed = _cleanup(clear_caches, devices)
            points.append(_read(devices, births.visitor(done - warmup)))
            compiled.append(len(new))
            made.append(new)
            for label, n in _residue(freed, points[-1]).items():
                residue[label] = max(residue.get(label, 0), n)
            step(done, total)
        last_profile = device_readings.memory_profile() if profile else None
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
        report = LeakReport(
            iterations,
            warmup,
            threshold,
            tuple(series),
            compiled=tuple(compiled),
            kept_programs=()
            if clear_caches
            else kept_in_every_iteration(
                made, lambda: programs.count_by_site(held_before or []), lambda: programs.held_by_site(devices)
            ),
            cache_residue=residue,
            clear_caches=clear_caches,
            confirmed_cleared=confirm_cleared,
            host=host,
            profiles=tuple(p for p in (first_profile, last_profile) if p is not None) if profile else (),
        )
        runs_after_baseline = iterations  # runs whose arrays can be leak sites
        suspects = report.leaking_series
        if suspects and (confirm_cleared or all(s.device == "host" for s in suspects)):
            # Not read off live arrays alone: confirmed by as many runs again before it is a leak.
            clear = clear_caches or confirm_cleared
            try:
                runs = max(iterations, defaults.CONFIRM_RUNS)
                confirmation, confirming_runs = _confirm(
                    fn,
                    args,
                    kwargs,
                    devices,
                    births,
                    points[-1],
                    iterations,
                    runs,
                    clear,
                    clear_caches,
                    lambda done: step(total + done, total + runs),
                )
            except Exception as e:  # code that cannot run again (a stream run dry): the first runs' verdict stands
                report = replace(report, unconfirmed=f"{type(e).__name__}: {str(e).strip()[:200]}")
            else:
                runs_after_baseline += confirming_runs
                report = replace(
                    report,
                    confirmed_by=runs,
                    series=tuple(
                        replace(s, confirmation=tuple(p[s.name][0] for p in confirmation))
                        if all(s.name in p for p in confirmation)
                        else s
                        for s in report.series
                    ),
                )
    finally:
        if frozen:
            gc.unfreeze()
    # What leaked, and where: only now that a leak was found, for it costs.
    if any(s.device != "host" for s in report.leaking_series):
        survivors = [(describe(a), run) for a, run in births.made_since_baseline()]
        report = replace(report, sites=leak_sites(survivors, runs_after_baseline))
        del survivors
    elif report.leaking_series:  # the host alone grew: one more run, traced

        def traced() -> None:
            _settle(fn(*args, **kwargs))
            _cleanup(clear_caches)

        try:
            report = replace(report, host_sites=host_sites(host_readings.traced_growth(traced)))
        except Exception as e:  # code that cannot run once more (a stream run dry): the verdict stands
            report = replace(report, host_trace_error=f"{type(e).__name__}: {str(e).strip()[:200]}")
    return report
