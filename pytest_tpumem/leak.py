"""Leak check: run code repeatedly, read every source after each run, decide whether it grows.

Decision rule (also in the README): after ``warmup`` runs, a baseline is read; then each of the
``iterations`` runs gives one delta per series (live arrays and runtime bytes-in-use per device,
and host RSS). The growth per iteration is the smaller of the *lower median* delta and the *mean*
delta (net growth / iterations); a series leaks when it is at or above the threshold. So at least
half of the iterations (rounded up: both of 2, 2 of 3, 3 of 4) must each have grown by the
threshold, and the memory must not have come back down. A steady leak grows every iteration and
is caught; a one-off allocation (a cache filled once) grows in one iteration only and is not;
memory that goes up and down, and noise, are not. With ``iterations=1`` the single delta decides.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable

from . import sources
from .units import format_delta, format_size, parse_size


@dataclass(frozen=True)
class Series:
    """Bytes after the baseline and after each iteration, for one source on one device (or the host)."""

    name: str  # "cpu:0 live arrays", "gpu:0 bytes in use", "host RSS"
    device: str  # device label, or "host"
    values: tuple[int, ...]  # values[0] is the baseline after warmup
    limit: int | None = None

    @property
    def deltas(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in zip(self.values, self.values[1:]))

    @property
    def growth(self) -> int:
        """Growth per iteration as judged: the lower median of the deltas, but no more than the
        mean (net growth over the iterations), so memory that goes up and down is not growth."""
        d = sorted(self.deltas)
        if not d:
            return 0
        return min(d[(len(d) - 1) // 2], (self.values[-1] - self.values[0]) // len(d))

    def iterations_left(self) -> int | None:
        """How many more iterations at this growth until ``limit`` is reached, where it is known."""
        if self.limit is None or self.growth <= 0:
            return None
        return max(0, (self.limit - self.values[-1]) // self.growth)

    def describe(self) -> str:
        parts = [format_size(self.values[0])]
        for v, d in zip(self.values[1:], self.deltas):
            parts.append(f"{format_size(v)} ({format_delta(d)})")
        line = f"{self.name}: " + " -> ".join(parts)
        left = self.iterations_left()
        if left is not None:
            line += f"; exhausted in ~{left} more iterations (limit {format_size(self.limit)})"
        return line


@dataclass(frozen=True)
class LeakReport:
    """Result of a leak check: every series, the threshold and the verdict."""

    iterations: int
    warmup: int
    threshold: int
    series: tuple[Series, ...]

    @property
    def leaking(self) -> tuple[Series, ...]:
        return tuple(s for s in self.series if s.growth >= self.threshold)

    @property
    def leaked(self) -> bool:
        return bool(self.leaking)

    @property
    def verdict(self) -> str:
        return "leak" if self.leaked else "ok"

    @property
    def worst(self) -> Series | None:
        """The series that decided: the first leaking one (devices before the host), else the fastest growing."""
        if self.leaking:
            return self.leaking[0]
        return max(self.series, key=lambda s: s.growth, default=None)

    def growth(self, device: str) -> int:
        """Largest judged growth per iteration among the series of ``device`` ("host" for RSS)."""
        return max((s.growth for s in self.series if s.device == device), default=0)

    def message(self) -> str:
        """The short failure text: what grew, by how much per iteration, on which device."""
        bad = self.leaking or self.series
        head = self.worst
        lines = [
            f"leak_check: {head.name} grew {format_size(head.growth)}/iteration over {self.iterations} "
            f"iterations (threshold {format_size(self.threshold)}/iteration)"
        ]
        lines += ["  " + s.describe() for s in bad]
        return "\n".join(lines)


class LeakError(AssertionError):
    """Raised by :func:`check_leaks` with ``raise_on_leak=True``; carries the report."""

    def __init__(self, report: LeakReport):
        super().__init__(report.message())
        self.report = report


def _settle(result: Any) -> None:
    """Wait for the run's work: its result, every live array still being computed, and effects.

    A test body returns None, so waiting for the result alone would read memory while programs
    are still running (and their buffers still held)."""
    import jax

    for pending in (result, jax.live_arrays()):
        try:
            jax.block_until_ready(pending)
        except Exception:
            pass  # results that are not pytrees of arrays, arrays deleted meanwhile
    jax.effects_barrier()


def _cleanup(clear_caches: bool) -> None:
    gc.collect()  # frees the run's cycles; what clear_caches drops is freed by reference counting
    if clear_caches:
        import jax

        jax.clear_caches()
    sources.trim_host()


def _read(devices: list[Any]) -> dict[str, tuple[int, int | None]]:
    """One point for every series: name -> (bytes, limit)."""
    point: dict[str, tuple[int, int | None]] = {}
    for label, mem in sources.read_devices(devices).items():
        point[f"{label} live arrays"] = (mem.live_bytes, mem.limit)
        if mem.in_use is not None:
            point[f"{label} bytes in use"] = (mem.in_use, mem.limit)
    rss = sources.host_rss()
    if rss is not None:
        point["host RSS"] = (rss, None)
    return point


def validate(iterations: Any, warmup: Any) -> None:
    for name, value, least in (("iterations", iterations, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name}={value!r}: expected an int >= {least}")


def check_leaks(
    fn: Callable[..., Any],
    *args: Any,
    iterations: int = 3,
    warmup: int = 1,
    threshold: int | str = "100MB",
    clear_caches: bool = True,
    raise_on_leak: bool = False,
    **kwargs: Any,
) -> LeakReport:
    """Run ``fn(*args, **kwargs)`` ``warmup + iterations`` times and report per-iteration growth.

    After each run the result is waited for and dropped, garbage is collected and (by default)
    ``jax.clear_caches()`` frees compiled executables, then every source is read.
    """
    validate(iterations, warmup)
    threshold = parse_size(threshold, what="threshold")
    devices = sources.local_devices()
    # Everything alive before the check is moved out of the collector's sight (gc.freeze): each
    # collection then scans only what the runs created, a fraction of a millisecond instead of
    # ~50 ms for the ~100k objects jax keeps. Cycles among those older objects are not the runs'
    # doing and are left alone until the check ends.
    gc.collect()
    frozen = not gc.get_freeze_count()
    if frozen:
        gc.freeze()
    try:
        for _ in range(warmup):
            _settle(fn(*args, **kwargs))
            _cleanup(clear_caches)
        if warmup == 0:
            _cleanup(clear_caches)
        points = [_read(devices)]
        for _ in range(iterations):
            _settle(fn(*args, **kwargs))
            _cleanup(clear_caches)
            points.append(_read(devices))
    finally:
        if frozen:
            gc.unfreeze()
    series = []
    for name, (_, limit) in points[0].items():
        if all(name in p for p in points):
            device = "host" if name == "host RSS" else name.split(" ", 1)[0]
            series.append(Series(name, device, tuple(p[name][0] for p in points), limit))
    report = LeakReport(iterations, warmup, threshold, tuple(series))
    if raise_on_leak and report.leaked:
        raise LeakError(report)
    return report
