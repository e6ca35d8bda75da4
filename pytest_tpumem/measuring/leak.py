"""The runs of a leak check, read after each: decisions.leak judges what they read.

``LeakRuns`` runs ``fn(*args, **kwargs)`` over and over. After each run it waits for the run's
work (its result, every live array still being computed, effects, and the programs whose outputs
it dropped: readings.inflight), collects the garbage, clears jax's caches where asked, and reads
one *point*: per device the bytes of live arrays and the runtime's bytes in use where it reports
them, and on the host malloc's bytes, the rest of RSS (``host other``) and RSS itself. It also
keeps what the runs compiled, what clearing the caches freed, and which live arrays each run made,
so that the lines that made a leak can be named once a leak is found.

While it runs (``with LeakRuns(...)``), everything alive before is moved out of the collector's
sight (gc.freeze): each collection then scans only what the runs created.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..readings import devices as device_readings
from ..readings import host as host_readings
from ..readings import programs
from ..readings.arrays import ArrayBirths, describe

HOST_MALLOC = "host malloc"  # bytes the C allocator has handed out (readings.host.malloc_figures)
HOST_OTHER = "host other"  # RSS outside malloc's heaps: Python's small objects, memory mapped directly
HOST_RSS = "host RSS"  # judged (every delta must grow) only where the two above cannot be read

Point = dict[str, tuple[int, int | None]]  # series name ("cpu:0 live arrays", "host RSS") -> (bytes, limit)


def settle(result: Any) -> None:
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


def cleanup(clear_caches: bool, devices: list[Any] | None = None) -> dict[str, int]:
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


def residue(before: dict[str, int], point: Point) -> dict[str, int]:
    """What clearing jax's caches freed: the reading before it minus the point read after it."""
    out = {}
    for label, used in before.items():
        after = point.get(HOST_RSS if label == "host" else f"{label} bytes in use")
        if after is not None:
            out[label] = max(0, used - after[0])
    return out


def read(devices: list[Any], visit: Callable[[Any], None] | None = None) -> Point:
    """One point for every series: name -> (bytes, limit); ``visit`` sees every live array on the way."""
    point: Point = {}
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


@dataclass
class Runs:
    """What the measured runs read: a point after the baseline and after each iteration, and per
    iteration the programs it compiled; what clearing the caches freed at most, per device and
    "host"; jax's device-memory profiles where asked for (after the warmup, after the last run)."""

    points: list[Point]
    made: list[list[Any]]  # per iteration: readings.programs.ProgramMade of what it compiled
    residue: dict[str, int] = field(default_factory=dict)
    profiles: tuple[bytes, ...] = ()

    @property
    def compiled(self) -> tuple[int, ...]:
        return tuple(len(m) for m in self.made)


class LeakRuns:
    """Runs ``fn(*args, **kwargs)`` and reads after each run, on ``devices`` and the host.
    ``progress(done, total)`` is called after each run."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        devices: list[Any],
        clear_caches: bool,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.devices = devices
        self.clear_caches = clear_caches
        self.progress = progress or (lambda done, total: None)
        self.births = ArrayBirths()
        self.runs = 0  # measured runs made so far (the warmup's not counted)
        self._held_before: list[Any] | None = None
        self._frozen = False

    def __enter__(self) -> LeakRuns:
        # Everything alive before the check is moved out of the collector's sight (gc.freeze): each
        # collection then scans only what the runs created, a fraction of a millisecond instead of
        # ~50 ms for the ~100k objects jax keeps. Cycles among those older objects are not the runs'
        # doing and are left alone until the check ends; only the young generations are collected
        # first (a full collection here cost ~75 ms a check, a third of a sweep's overhead).
        gc.collect(1)
        self._frozen = not gc.get_freeze_count()
        if self._frozen:
            gc.freeze()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def _run(self) -> None:
        settle(self.fn(*self.args, **self.kwargs))

    def measure(self, warmup: int, iterations: int, profile: bool = False) -> Runs:
        """``warmup`` runs, a baseline, then ``iterations`` runs, each read."""
        total = warmup + iterations
        for done in range(1, warmup + 1):
            self._run()
            cleanup(self.clear_caches)
            self.progress(done, total)
        if warmup == 0:
            cleanup(self.clear_caches)
        points = [read(self.devices, self.births.visitor(0))]  # what is alive now is not the runs' doing
        first_profile = device_readings.memory_profile() if profile else None
        # Where the caches are kept, what they hold now is held until the check ends.
        self._held_before = programs.held_now(self.devices) if not self.clear_caches else None
        made: list[list[Any]] = []
        most: dict[str, int] = {}
        for done in range(warmup + 1, total + 1):
            before = programs.held_now(self.devices)  # held through the run: no new program can take their ids
            self._run()
            new = programs.compiled_since(self.devices, before)
            del before
            freed = cleanup(self.clear_caches, self.devices)
            self.runs += 1
            points.append(read(self.devices, self.births.visitor(self.runs)))
            made.append(new)
            for label, n in residue(freed, points[-1]).items():
                most[label] = max(most.get(label, 0), n)
            self.progress(done, total)
        last_profile = device_readings.memory_profile() if profile else None
        return Runs(points, made, most, tuple(p for p in (first_profile, last_profile) if p is not None))

    def held_before_by_site(self) -> dict[Any, int]:
        """Executables the caches held at the baseline, by the line that compiled them (kept caches only)."""
        return programs.count_by_site(self._held_before or [])

    def held_by_site(self) -> dict[Any, int]:
        """Executables the caches hold now, by the line that compiled them."""
        return programs.held_by_site(self.devices)

    def confirm(self, last: Point, runs: int, clear: bool, progress: Callable[[int], None]) -> list[Point]:
        """``runs`` more runs, read as the first ones were (jax's caches cleared after each where
        ``clear``): the points, baseline first. Where the first runs kept the caches and these
        clear them, they are cleared before the baseline is read, so that neither it nor any later
        reading holds what they held (before the check or during it). No run comes first to warm
        up (it would cost one more compile of everything): what a first compile leaves behind is
        one delta, and the rule asks for growth in half of them."""
        if clear and not self.clear_caches:
            cleanup(True)
            points = [read(self.devices)]
        else:
            points = [last]
        for done in range(runs):
            self._run()
            cleanup(clear)
            self.runs += 1
            points.append(read(self.devices, self.births.visitor(self.runs)))
            progress(done + 1)
        return points

    def survivors(self) -> list[tuple[Any, int]]:
        """The arrays made by the measured runs and still alive (readings.arrays.ArrayInfo each), with the run that made each."""
        return [(describe(a), run) for a, run in self.births.made_since_baseline()]

    def trace_host(self) -> list[tuple[Any, int, int]]:
        """One more run, traced with tracemalloc: what it left allocated on the host, by line."""

        def traced() -> None:
            self._run()
            cleanup(self.clear_caches)

        return host_readings.traced_growth(traced)
