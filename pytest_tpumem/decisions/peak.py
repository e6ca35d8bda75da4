"""Peak device memory of a stretch of code, judged from deterministic readings only.

jax cannot reset ``peak_bytes_in_use``, and on TPU it under-reports, so no single figure is trusted.
For every local device the peak is the largest of these witnesses, each the same on every run of
the same code:

- ``start``: bytes in use when the measurement started;
- ``program``: for every program the code ran (jit calls and eager operations alike, whatever ran
  before), the bytes in use when it started -- its arguments among them, made before the test or
  inside it -- plus what XLA says it needs beyond its arguments (readings.executions);
- ``transfer``: bytes in use after an array was put on the device (``jax.device_put``);
- ``body-end``: bytes in use just after the test function returned, read while its frame (and so
  its local arrays) is still held;
- ``end``: bytes in use at the end;
- ``runtime-peak``: the runtime's high-water mark (GPU, TPU), when it rose during the measurement
  (or always, where the installed jax can reset it at the start).

A background ``sampler`` also reads bytes in use every few milliseconds. What it sees depends on
when it looks, so it never judges: it is kept beside the witnesses as evidence, and where it saw
more than they explain (a path the watch does not see: a program compiled ahead of time and called
from its own C++ path, pmap) the report says so.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .. import defaults
from ..readings import devices as device_readings
from ..readings import host
from ..readings.executions import Need


@dataclass(frozen=True)
class DevicePeak:
    device: str
    start: int
    peak: int
    witness: str
    witnesses: dict[str, int]
    limit: int | None
    stand_in: bool  # True where live arrays stand in for device memory (CPU)
    free: int | None = None  # at the end: bytes_limit - bytes in use, where both are reported
    largest_free: int | None = None  # at the end: the largest free block, where the allocator reports it
    sampler: int | None = None  # the most the sampler saw: timing-dependent evidence, never the peak
    program: str = ""  # the witness "program": which program ran at that moment ("jit_step")

    @property
    def fragmented(self) -> bool:
        """The largest free block is under half of what is free: a large allocation can fail with room to spare."""
        return self.free is not None and self.largest_free is not None and self.largest_free * 2 < self.free

    @property
    def unexplained(self) -> int:
        """How far the sampler saw above the peak (0 where it did not): a moment no deterministic reading explains."""
        return max(0, (self.sampler or 0) - self.peak)


@dataclass(frozen=True)
class PeakReport:
    """Peak memory per device of one measurement, plus the host peak where it could be read."""

    devices: dict[str, DevicePeak]
    host_peak: int | None
    programs: tuple[Need, ...] = field(default=())  # the programs the measured code ran, once each
    profile: bytes | None = None  # jax's device-memory profile (gzipped pprof) at the body's end, where asked for
    uncounted: str = ""  # why the programs the code ran were not read ("unavailable" on a jax without the
    # hooks: telling.budget.UNCOUNTED says it in words); "" where they were

    @property
    def worst(self) -> DevicePeak | None:
        return max(self.devices.values(), key=lambda d: d.peak, default=None)

    def over(self, budget: int) -> list[DevicePeak]:
        """Devices whose peak is above ``budget`` bytes."""
        return [d for d in self.devices.values() if d.peak > budget]

    def sampled_over(self, budget: int) -> list[DevicePeak]:
        """Devices within ``budget`` where the sampler alone saw more than it (timing-dependent: not judged)."""
        return [d for d in self.devices.values() if d.peak <= budget < (d.sampler or 0)]


# Ties go to the first named: the runtime's own figure, then what the test holds at its end, then
# the moment a program ran.
WITNESSES = ("runtime-peak", "body-end", "program", "transfer", "end", "start")


def choose_witness(witnesses: dict[str, int]) -> str:
    """The witness that judges: the largest figure; among equal ones, the first in WITNESSES."""
    return max(sorted(witnesses, key=WITNESSES.index), key=lambda k: witnesses[k])


class _Sampler(threading.Thread):
    """Reads bytes in use every ``interval`` seconds (or less often where a reading is slow) and
    keeps the maximum per device."""

    def __init__(self, devices: list[Any], interval: float):
        super().__init__(name="tpumem-sampler", daemon=True)
        self.devices = devices
        self.interval = interval
        self.max: dict[str, int] = {}
        self._stop_event = threading.Event()

    def sample(self) -> None:
        try:
            used = device_readings.read_used(self.devices)
        except Exception:
            return
        for label, n in used.items():
            if n > self.max.get(label, -1):
                self.max[label] = n

    def run(self) -> None:
        wait = self.interval
        while not self._stop_event.wait(wait):
            began = time.perf_counter()
            self.sample()
            # With many live arrays a reading takes milliseconds: keep the sampler's share of the
            # GIL under about a quarter, whatever the interval.
            wait = max(self.interval, 3 * (time.perf_counter() - began))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.sample()


class _FrameGrab:
    """Keeps the frame of one function call alive, so its locals can be read after it returned.

    A profile function is installed only until that function is entered, then removes itself:
    the code between here and the test body pays for a few calls, the test body for none. Where
    another profiler is already installed, nothing is done (``frame`` stays None).
    """

    def __init__(self, code: Any):
        self.code = code
        self.frame: Any = None
        self.installed = code is not None and sys.getprofile() is None
        if self.installed:
            sys.setprofile(self._on_event)

    def _on_event(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self.code:
            self.frame = frame
            self._uninstall()

    def _uninstall(self) -> None:
        if self.installed and sys.getprofile() == self._on_event:
            sys.setprofile(None)
        self.installed = False

    def release(self) -> None:
        """Drop our reference: the locals go with the frame, unless a traceback (a failed test,
        kept for --showlocals and --pdb) still holds it."""
        self._uninstall()
        self.frame = None


class PeakTracker:
    """Measure the peak device memory between ``start()`` and ``stop()``.

    Usable without pytest::

        tracker = PeakTracker().start()
        run_model()
        report = tracker.stop()
    """

    def __init__(
        self,
        devices: list[Any] | None = None,
        sample_interval: float = defaults.SAMPLE_MS / 1000,
        body: Any = None,
        profile: bool = False,
        floor: int = defaults.READ_FLOOR,
    ):
        """``body``: the function (the test) whose locals are read after it returns: ``body-end``.
        ``profile``: take jax's device-memory profile at the body's end (while its locals are held),
        for a file. ``floor``: the programs and transfers between two readings add up to at least
        this many bytes (the peak is never more than this below the exact one; readings.executions)."""
        self.devices = device_readings.local_devices() if devices is None else list(devices)
        self.sample_interval = sample_interval
        self.profile = profile
        self.floor = floor
        try:  # the test's own code, not a decorator's wrapper around it
            self.body_code = getattr(inspect.unwrap(body), "__code__", None) if body is not None else None
        except ValueError:  # a wrapper cycle
            self.body_code = None
        self._sampler: _Sampler | None = None
        self._grab: _FrameGrab | None = None
        self._watch: Any = None
        self._report: PeakReport | None = None
        self._ran: list[Any] = []

    def program_buffers(self) -> tuple[Any, ...]:
        """After stop(): what the programs the code ran materialize (their optimized HLO read now;
        call it only where it is wanted, a failed budget), then let go of them."""
        from ..readings import programs as program_readings

        ran, self._ran = self._ran, []
        return program_readings.program_buffers(ran)

    def release(self) -> None:
        """Let go of the programs the code ran (held for program_buffers())."""
        self._ran = []

    def start(self) -> PeakTracker:
        from ..readings.executions import ExecutionWatch
        from ..readings.jaxcompat import Unavailable

        self._reset = {device_readings.device_label(d): device_readings.reset_peak(d) for d in self.devices}
        self._start = device_readings.read_devices(self.devices)
        self._host_reset = host.reset_host_peak()
        try:
            self._watch = ExecutionWatch(self.devices, self.floor).__enter__()
        except Unavailable:
            self._watch = None
        if self.sample_interval > 0:
            self._sampler = _Sampler(self.devices, self.sample_interval)
            # Its first value is the start reading: no second walk of the live arrays.
            self._sampler.max = {label: mem.used for label, mem in self._start.items()}
            self._sampler.start()
        self._grab = _FrameGrab(self.body_code)
        return self

    def stop(self) -> PeakReport:
        """The report; called again, the same report (a leak check stops its tracker after the first run)."""
        if self._report is None:
            if not hasattr(self, "_start"):
                raise RuntimeError("PeakTracker.stop() before start(): call tracker = PeakTracker().start() first")
            self._report = self._stop()
        return self._report

    def _stop(self) -> PeakReport:
        body_end: dict[str, int] = {}
        profile = None
        if self._grab is not None:
            if self._grab.frame is not None:
                body_end = device_readings.read_used(self.devices)
            if self.profile:
                profile = device_readings.memory_profile()
            self._grab.release()
            self._grab = None
        elif self.profile:
            profile = device_readings.memory_profile()
        sampled: dict[str, int] = {}
        if self._sampler is not None:
            self._sampler.stop()
            sampled = self._sampler.max
            self._sampler = None
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(None, None, None)
        end = device_readings.read_devices(self.devices)
        needs: list[Need] = []
        if watch is not None:
            self._ran = list(watch.executables.values())
            needs = sorted(watch.needs.values(), key=lambda n: -n.peak)
        devices = {}
        for label, first in self._start.items():
            last = end.get(label, first)
            witnesses = {"start": first.used, "end": last.used}
            if label in body_end:
                witnesses["body-end"] = body_end[label]
            moment = watch.highest.get(label) if watch is not None else None
            if moment is not None:
                witnesses["transfer" if moment.what == "transfer" else "program"] = moment.bytes
            if last.peak is not None and (self._reset.get(label) or first.peak is None or last.peak > first.peak):
                witnesses["runtime-peak"] = last.peak
            witness = choose_witness(witnesses)
            devices[label] = DevicePeak(
                device=label,
                start=first.used,
                peak=witnesses[witness],
                witness=witness,
                witnesses=witnesses,
                limit=last.limit,
                stand_in=first.in_use is None,
                free=last.limit - last.in_use if last.limit is not None and last.in_use is not None else None,
                largest_free=last.largest_free,
                sampler=sampled.get(label),
                program=moment.what.removeprefix("program ")
                if moment is not None and moment.what != "transfer"
                else "",
            )
        host_peak = host.host_peak() if self._host_reset else None
        return PeakReport(devices, host_peak, tuple(needs), profile, "" if watch is not None else "unavailable")
