"""The checks as a user calls them without pytest, each measuring (measuring/), then deciding
(decisions/), and giving a result and its words::

    from pytest_tpumem import check_leaks, message
    report = check_leaks(train_step, state, batch, iterations=3, threshold="100MB")
    print(message(report))

    tracker = PeakTracker().start()
    run_model()
    report = tracker.stop()

``message(result, verbosity=0)`` and ``section(result)`` are telling.results' (every result is
plain data). The plugin's hooks run the same two checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import defaults
from .decisions import leak, peak
from .decisions.leak import LeakReport
from .decisions.leakoptions import LeakOptions, check_callable
from .decisions.peak import PeakReport
from .measuring.leak import LeakRuns, Runs
from .measuring.peak import PeakWatch
from .readings import devices as device_readings
from .readings import programs as program_readings
from .readings.jaxcompat import Unavailable
from .telling.results import message, section

if TYPE_CHECKING:
    import jax

    from .readings.buffers import Buffer

__all__ = ["LeakError", "PeakTracker", "check_leaks", "message", "section"]


class LeakError(AssertionError):
    """Raised by ``check_leaks`` with ``raise_on_leak=True``: ``text`` is the failure text
    (telling/), ``.report`` the LeakReport."""

    def __init__(self, report: LeakReport, text: str):
        super().__init__(text)
        self.report = report


def _error_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()[:200]}"


def check_leaks(
    fn: Callable[..., Any],
    *args: Any,
    iterations: int = defaults.ITERATIONS,
    warmup: int = defaults.WARMUP,
    threshold: int | str = defaults.LEAK_THRESHOLD,
    clear_caches: bool = defaults.CLEAR_CACHES,
    host: bool | int | str = True,
    devices: list[jax.Device] | None = None,
    capacity: tuple[int, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    profile: bool = False,
    confirm_cleared: bool = False,
    raise_on_leak: bool = False,
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
    a leak (programs kept by the caches are then a leak only by their bytes). ``raise_on_leak``:
    raise LeakError (an AssertionError carrying the report, its text the failure text) where the
    check leaks, instead of returning the report. Keyword arguments named like this function's own
    are taken here, not passed to ``fn``: give them to ``fn`` with ``functools.partial``.
    """
    check_callable(fn)
    options = LeakOptions.parse(iterations, warmup, threshold, clear_caches, host, confirm_cleared)
    report = check_leaks_with(
        options, fn, args, kwargs, devices=devices, capacity=capacity, progress=progress, profile=profile
    )
    if raise_on_leak and report.leaking:
        raise LeakError(report, message(report))
    return report


def check_leaks_with(
    options: LeakOptions,
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    devices: list[jax.Device] | None = None,
    capacity: tuple[int, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    profile: bool = False,
) -> LeakReport:
    """check_leaks with its options made (``LeakOptions.parse``) and ``fn`` checked where it was
    asked for: what the plugin's marker, sweep and fixture run."""
    iterations, warmup = options.iterations, options.warmup
    devices = device_readings.local_devices() if devices is None else list(devices)
    runner = LeakRuns(fn, args, kwargs or {}, devices, options.clear_caches, progress)
    with runner:
        runs = runner.measure(warmup, iterations, profile)
        programs_confirmed_by = _new_programs(runner, runs, options)
        report = leak.judge(runs, options, capacity, programs_confirmed_by)
        runs_after_baseline = iterations + programs_confirmed_by  # runs whose arrays can be leak sites
        if leak.to_confirm(report):
            more = max(iterations, defaults.CONFIRM_RUNS)
            total = warmup + iterations
            step = runner.progress
            try:
                points = runner.confirm(
                    runs.points[-1],
                    more,
                    options.clear_caches or options.confirm_cleared,
                    lambda done: step(total + done, total + more),
                )
            except Exception as e:  # code that cannot run again (a stream run dry): the first runs' verdict stands
                report = replace(report, unconfirmed=_error_line(e))
            else:
                runs_after_baseline += more
                report = leak.confirmed(report, points, more)
    # What leaked, and where: only now that a leak was found, for it costs.
    if any(s.device != "host" for s in report.leaking_series):
        report = replace(report, sites=leak.leak_sites(runner.survivors(), runs_after_baseline))
    elif report.leaking_series:  # the host alone grew: one more run, traced
        try:
            report = replace(report, host_sites=leak.host_sites(runner.trace_host()))
        except Exception as e:  # code that cannot run once more (a stream run dry): the verdict stands
            report = replace(report, host_trace_error=_error_line(e))
    return report


def _new_programs(runner: LeakRuns, runs: Runs, options: LeakOptions) -> int:
    """The programs new to every run after the warmup that jax still holds (caches kept; else none),
    put in ``runs`` (those jax alone held apart); the runs more that confirmed one iteration's (0: none)."""
    iterations, warmup = options.iterations, options.warmup
    confirmed_by = 0
    if iterations < leak.MIN_PROGRAM_RUNS and runner.kept_new():  # one run cannot show the cache growing
        confirmed_by = max(leak.MIN_PROGRAM_RUNS - iterations, defaults.CONFIRM_RUNS)
        total, step, more = warmup + iterations, runner.progress, confirmed_by
        try:
            runner.confirm_programs(more, lambda done: step(total + done, total + more))
        except Exception:  # code that cannot run again: the new programs of one run are not judged
            confirmed_by = 0
    kept = runner.programs_kept()  # every program the check held is let go of
    runs.new_programs = kept if iterations >= leak.MIN_PROGRAM_RUNS or confirmed_by else []
    if leak.kept_in_every_iteration(runs.new_programs):  # held by what the code keeps, or by jax alone?
        try:
            held = runner.not_held_by_jax_alone(runs.new_programs)
        except Unavailable as e:  # cannot be told apart on this jax: not judged, and said
            held, runs.programs_unjudged = [], str(e)
        still = {m.key for made in held for m in made}
        runs.held_by_jax = [[m for m in made if m.key not in still] for made in runs.new_programs] if held else []
        runs.new_programs = held
    return confirmed_by


class PeakTracker:
    """Measure the peak device memory between ``start()`` and ``stop()``.

    Usable without pytest::

        tracker = PeakTracker().start()
        run_model()
        report = tracker.stop()
    """

    def __init__(
        self,
        devices: list[jax.Device] | None = None,
        sample_interval: float = defaults.SAMPLE_MS / 1000,
        body: Callable[..., Any] | None = None,
        profile: bool = False,
        floor: int = defaults.READ_FLOOR,
    ):
        """``body``: the function (the test) whose locals are read after it returns: ``body-end``.
        ``profile``: take jax's device-memory profile at the body's end (while its locals are held),
        for a file. ``floor``: the programs and transfers between two readings add up to at least
        this many bytes (the peak is never more than this below the exact one; readings.executions)."""
        self.devices = device_readings.local_devices() if devices is None else list(devices)
        self._watch = PeakWatch(self.devices, sample_interval, body, profile, floor)
        self._report: PeakReport | None = None

    def start(self) -> PeakTracker:
        self._watch.start()
        return self

    def stop(self) -> PeakReport:
        """The report; called again, the same report (a leak check stops its tracker after the first run)."""
        if self._report is None:
            if not self._watch.started:
                raise RuntimeError("PeakTracker.stop() before start(): call tracker = PeakTracker().start() first")
            self._report = peak.judge(self._watch.stop())
        return self._report

    def program_buffers(self) -> tuple[Buffer, ...]:
        """After stop(): what the programs the code ran materialize (their optimized HLO read now;
        call it only where it is wanted, a failed budget), then let go of them."""
        ran, self._watch.ran = self._watch.ran, []
        return program_readings.program_buffers(ran)

    def release(self) -> None:
        """Let go of the programs the code ran (held for program_buffers())."""
        self._watch.ran = []
