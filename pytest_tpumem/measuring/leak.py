"""The runs of a leak check, read after each: decisions.leak judges what they read.

``LeakRuns`` runs ``fn(*args, **kwargs)`` over and over. After each run it waits for the run's
work (its result, every live array still being computed, effects, and the programs whose outputs
it dropped: readings.inflight), collects the garbage, clears jax's caches where asked, and reads
one *point*: per device the bytes of live arrays and the runtime's bytes in use where it reports
them, and on the host malloc's bytes, the rest of RSS (``host other``) and RSS itself. It also
keeps how many programs each run compiled, what clearing the caches freed, and which live arrays
each run made, so that the lines that made a leak can be named once a leak is found.

Where jax's caches are kept between runs (``clear_caches=False``, the whole-suite sweep), it also
keeps, per run after the warmup, the programs the run ran or compiled that no earlier run of the
check had (``NewPrograms``): whether compiled now or by an earlier test, a program new to every run
and still held by jax at the end is one the code asks jax to compile on every call.

While it runs (``with LeakRuns(...)``), everything alive before is moved out of the collector's
sight (gc.freeze): each collection then scans only what the runs created.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..readings import devices as device_readings
from ..readings import host as host_readings
from ..readings import jaxcompat, programs
from ..readings.arrays import ArrayBirths, describe
from ..readings.executions import ProgramsRan
from ..readings.inflight import wait_idle
from ..readings.jaxcompat import Unavailable

if TYPE_CHECKING:
    import jax

    from ..readings.arrays import ArrayInfo

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

    for pending in (result, jax.live_arrays()):
        try:
            jax.block_until_ready(pending)
        except Exception:
            pass  # results that are not pytrees of arrays, arrays deleted meanwhile
    jax.effects_barrier()
    wait_idle()


def cleanup(clear_caches: bool, devices: list[jax.Device] | None = None) -> dict[str, int]:
    """Collect the run's garbage, (``clear_caches``) clear jax's caches, and give freed heap back
    to the OS (malloc_trim); where it clears them with ``devices``, the runtime's bytes in use per
    device (where it reports them: not on CPU) and host RSS just before the caches were cleared, to
    tell what clearing freed ({} otherwise). Cheap reads only: no live-array walk."""
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


def read(devices: list[jax.Device], visit: Callable[[Any], None] | None = None) -> Point:
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
    iteration how many programs it compiled; what clearing the caches freed at most, per device and
    "host"; jax's device-memory profiles where asked for (after the warmup, after the last run).
    With the caches kept: per run after the warmup (the iterations, then any run that confirmed
    them), the programs new to it that jax still held at the end (readings.programs.ProgramMade)."""

    points: list[Point]
    compiled: tuple[int, ...]
    residue: dict[str, int] = field(default_factory=dict)
    profiles: tuple[bytes, ...] = ()
    new_programs: list[list[Any]] = field(default_factory=list)
    held_by_jax: list[list[Any]] = field(default_factory=list)  # of those, per run, what jax alone held
    programs_unjudged: str = ""  # why jax's own holding could not be told apart (this jax lacks the means)


class NewPrograms:
    """The programs each run ran or compiled that no earlier run of the check had, and which of
    them jax still holds (caches kept between runs only).

    Every program a run ran or compiled is held here until the end of the check, so that no other
    executable can take its id meanwhile (jax's executables take no weak reference). A run's new
    programs are let go of once it has ended, and those jax still holds are held again: a program
    the code made for one call only (a closure's, dying with it) is then gone from the check. At
    the end every one is let go of, and a run's new programs count only where jax still holds them
    then: a cache that replaces its last program does not grow."""

    def __init__(self, devices: list[jax.Device]):
        self.devices = devices
        self._seen: dict[int, Any] = {}  # every program run or compiled by a run so far, held
        self._new: list[dict[int, bool]] = []  # per judged run: id -> compiled before the check began
        self._pending: dict[int, bool] = {}  # the last run's new programs, let go of until it is cleaned up

    def run(self, call: Callable[[], None], judged: bool) -> int:
        """``call()`` watched; the number of programs it compiled. ``judged``: a run after the
        warmup, whose new programs are kept for the rule (the warmup's are only remembered)."""
        before = programs.held_now(self.devices) or []
        known = {id(e) for e in before}
        watch: ProgramsRan | None = ProgramsRan()
        try:
            watch.__enter__()  # type: ignore[union-attr]
        except Unavailable:
            watch = None
        try:
            call()
        finally:
            if watch is not None:
                watch.__exit__(None, None, None)
        ran = list(watch.executables.values()) if watch is not None else []
        del watch
        listed = programs.held_now(self.devices) or []
        compiled = [e for e in listed if id(e) not in known]
        new = {id(e): e for e in (*ran, *compiled) if id(e) not in self._seen}
        if judged:  # let go of, and read after the cleanup; a new program held before the run was
            # compiled before the check (one compiled by an earlier run is in _seen, or was let go of and died)
            self._pending = {i: i in known for i in new}
        else:
            self._seen.update(new)
        del before, listed, ran, new
        return len(compiled)

    def after_cleanup(self) -> None:
        """After the run's cleanup: its new programs that jax still holds are held again."""
        pending, self._pending = self._pending, {}
        live = {id(e): e for e in programs.held_now(self.devices) or []}
        kept = {i: earlier for i, earlier in pending.items() if i in live}
        self._seen.update((i, live[i]) for i in kept)
        self._new.append(kept)

    def kept_new(self) -> bool:
        """Whether the last judged run's new programs are still held by jax (read after its cleanup)."""
        return bool(self._new and self._new[-1])

    def finish(self) -> list[list[Any]]:
        """Let go of every program, then per judged run its new programs jax still holds
        (readings.programs.ProgramMade, read only for those)."""
        held = {i for new in self._new for i in new}
        self._seen.clear()  # what only this check held dies now (by reference counting)
        live = {id(e): e for e in programs.held_now(self.devices) or [] if id(e) in held}
        out = [
            [programs.program_made(live[i], earlier) for i, earlier in new.items() if i in live] for new in self._new
        ]
        self._new = []
        return out

    def not_held_by_jax_alone(self, runs: list[list[Any]]) -> list[list[Any]]:
        """``runs`` (finish()'s lists) less the programs that jax alone held: those that die once
        jax's value-keyed caches are emptied (readings.jaxcompat.clear_value_caches: the programs of
        eager control flow over a function made anew, which jax bounds itself). What stays is held
        by what the code keeps (a jit it keeps, a compiled program in a list, a jit's own cache of a
        function it keeps). Empties those caches: call it only for programs that would be judged."""
        jaxcompat.clear_value_caches()
        gc.collect()
        live = {id(e) for e in programs.held_now(self.devices) or []}
        return [[m for m in made if m.key in live] for made in runs]


class LeakRuns:
    """Runs ``fn(*args, **kwargs)`` and reads after each run, on ``devices`` and the host.
    ``progress(done, total)`` is called after each run."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        devices: list[jax.Device],
        clear_caches: bool,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.devices = devices
        self.clear_caches = clear_caches
        self.progress = progress or (lambda done, total: None)
        self.births = ArrayBirths()
        self.runs = 0  # measured runs made so far (the warmup's not counted)
        self.new_programs = None if clear_caches else NewPrograms(devices)
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

    def _prepare(self) -> None:
        """What ``fn`` asks to do before each run, unwatched (``fn.before_run``: a unittest method's
        tearDown and setUp between two runs, glue.rerun.Reruns)."""
        before_run = getattr(self.fn, "before_run", None)
        if callable(before_run):
            before_run()

    def _counted(self, judged: bool) -> int:
        """One run; the programs it compiled (with the caches kept, its new programs are kept too)."""
        if self.new_programs is not None:
            self._prepare()
            return self.new_programs.run(self._run, judged)
        before = programs.held_now(self.devices)
        self._run()
        known = {id(e) for e in before or []}
        del before
        return sum(1 for e in programs.held_now(self.devices) or [] if id(e) not in known)

    def measure(self, warmup: int, iterations: int, profile: bool = False) -> Runs:
        """``warmup`` runs, a baseline, then ``iterations`` runs, each read."""
        total = warmup + iterations
        for done in range(1, warmup + 1):
            self._counted(judged=False)
            cleanup(self.clear_caches)
            self.progress(done, total)
        if warmup == 0:
            cleanup(self.clear_caches)
        points = [read(self.devices, self.births.visitor(0))]  # what is alive now is not the runs' doing
        first_profile = device_readings.memory_profile() if profile else None
        compiled: list[int] = []
        most: dict[str, int] = {}
        for done in range(warmup + 1, total + 1):
            compiled.append(self._counted(judged=True))
            freed = cleanup(self.clear_caches, self.devices)
            if self.new_programs is not None:
                self.new_programs.after_cleanup()
            self.runs += 1
            points.append(read(self.devices, self.births.visitor(self.runs)))
            for label, n in residue(freed, points[-1]).items():
                most[label] = max(most.get(label, 0), n)
            self.progress(done, total)
        last_profile = device_readings.memory_profile() if profile else None
        return Runs(points, tuple(compiled), most, tuple(p for p in (first_profile, last_profile) if p is not None))

    def kept_new(self) -> bool:
        """With the caches kept: whether the last run's new programs are still held by jax."""
        return self.new_programs is not None and self.new_programs.kept_new()

    def confirm_programs(self, runs: int, progress: Callable[[int], None]) -> None:
        """``runs`` more runs with the caches kept, each one's new programs kept as the iterations' were."""
        assert self.new_programs is not None  # only with the caches kept
        for done in range(runs):
            self._prepare()
            self.new_programs.run(self._run, judged=True)
            cleanup(False)
            self.new_programs.after_cleanup()
            self.runs += 1
            progress(done + 1)

    def not_held_by_jax_alone(self, runs: list[list[Any]]) -> list[list[Any]]:
        """``runs`` less the programs jax alone held (NewPrograms.not_held_by_jax_alone)."""
        assert self.new_programs is not None  # only with the caches kept
        return self.new_programs.not_held_by_jax_alone(runs)

    def programs_kept(self) -> list[list[Any]]:
        """Per judged run, its new programs jax still holds now; [] with the caches cleared. Every
        program the check held is let go of: call it once the caches-kept runs are over."""
        return self.new_programs.finish() if self.new_programs is not None else []

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

    def survivors(self) -> list[tuple[ArrayInfo | None, int]]:
        """The arrays made by the measured runs and still alive (readings.arrays.ArrayInfo each), with the run that made each."""
        return [(describe(a), run) for a, run in self.births.made_since_baseline()]

    def trace_host(self) -> list[tuple[Any, int, int]]:
        """One more run, traced with tracemalloc: what it left allocated on the host, by line."""

        def traced() -> None:
            self._run()
            cleanup(self.clear_caches)

        return host_readings.traced_growth(traced)
