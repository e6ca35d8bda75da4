"""Peak device memory of a stretch of code, judged from several witnesses.

jax cannot reset ``peak_bytes_in_use`` and on TPU it under-reports, so no single figure is
trusted. For every local device we keep:

- ``runtime-peak``: the runtime high-water mark, when it rose during the measurement (or always,
  where the installed jax can reset it at the start);
- ``sampler``: the highest bytes-in-use a background thread saw (live arrays on CPU);
- ``compiled``: what was in use at the start plus, for each program compiled during the
  measurement, XLA's peak beyond its arguments (the arguments are already on the device);
- ``body-end``: bytes in use just after the test function returned, read while its frame (and so
  its local arrays) is still held: the moment most tests are at their largest;
- ``end``: bytes in use at the end.

The peak is the largest witness, and the report says which one it was.
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
from ..readings import host, programs as program_readings
from ..readings.programs import CompiledProgram


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

    @property
    def fragmented(self) -> bool:
        """The largest free block is under half of what is free: a large allocation can fail with room to spare."""
        return self.free is not None and self.largest_free is not None and self.largest_free * 2 < self.free


@dataclass(frozen=True)
class PeakReport:
    """Peak memory per device of one measurement, plus the host peak where it could be read."""

    devices: dict[str, DevicePeak]
    host_peak: int | None
    programs: tuple[CompiledProgram, ...] = field(default=())
    profile: bytes | None = None  # jax's device-memory profile (gzipped pprof) at the body's end, where asked for
    uncounted: str = ""  # why programs compiled during the measurement were not counted (no "compiled" witness):
    # "caches kept", "leak check" or "unavailable" (telling.text.UNCOUNTED says it in words); "" where counted

    @property
    def worst(self) -> DevicePeak | None:
        return max(self.devices.values(), key=lambda d: d.peak, default=None)

    def over(self, budget: int) -> list[DevicePeak]:
        """Devices whose peak is above ``budget`` bytes."""
        return [d for d in self.devices.values() if d.peak > budget]


# Ties go to the first named: the runtime's own figure, then the deterministic body-end reading.
WITNESSES = ("runtime-peak", "body-end", "sampler", "compiled", "end")


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
        uncounted: str = "",
        profile: bool = False,
    ):
        """``body``: the function (the test) whose locals are read after it returns: ``body-end``.
        ``uncounted``: why the programs compiled during the measurement are not to be counted (the
        ``compiled`` witness), or "" to count them. Count them only where jax's caches were cleared
        at the start ("caches kept" otherwise: a program compiled earlier and run again would not
        be seen, and the peak would depend on what ran before), and where they stay alive until
        the end ("leak check": a leak check clears the caches after every run). ``profile``: take
        jax's device-memory profile at the body's end (while its locals are held), for a file."""
        self.devices = device_readings.local_devices() if devices is None else list(devices)
        self.sample_interval = sample_interval
        self.uncounted = uncounted
        self.profile = profile
        try:  # the test's own code, not a decorator's wrapper around it
            self.body_code = getattr(inspect.unwrap(body), "__code__", None) if body is not None else None
        except ValueError:  # a wrapper cycle
            self.body_code = None
        self._sampler: _Sampler | None = None
        self._grab: _FrameGrab | None = None

    def program_buffers(self) -> tuple[Any, ...]:
        """After stop(): what the programs compiled during the measurement materialize (their
        optimized HLO read now; call it only where it is wanted, a failed budget), then let go of them."""
        made, self._made = getattr(self, "_made", []), []
        return program_readings.program_buffers(made)

    def start(self) -> PeakTracker:
        self._reset = {device_readings.device_label(d): device_readings.reset_peak(d) for d in self.devices}
        self._start = device_readings.read_devices(self.devices)
        self._executables = None if self.uncounted else program_readings.executable_ids(self.devices)
        self._host_reset = host.reset_host_peak()
        if self.sample_interval > 0:
            self._sampler = _Sampler(self.devices, self.sample_interval)
            # Its first value is the start reading: no second walk of the live arrays.
            self._sampler.max = {label: mem.used for label, mem in self._start.items()}
            self._sampler.start()
        self._grab = _FrameGrab(self.body_code)
        return self

    def stop(self) -> PeakReport:
        sampled: dict[str, int] = {}
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
        if self._sampler is not None:
            self._sampler.stop()
            sampled = self._sampler.max
            self._sampler = None
        end = device_readings.read_devices(self.devices)
        self._made = program_readings.new_executables(self.devices, self._executables)
        programs = program_readings.new_programs(self._made)
        devices = {}
        for label, first in self._start.items():
            last = end.get(label, first)
            witnesses = {"end": last.used}
            if label in sampled:
                witnesses["sampler"] = sampled[label]
            if label in body_end:
                witnesses["body-end"] = body_end[label]
            if last.peak is not None and (self._reset.get(label) or first.peak is None or last.peak > first.peak):
                witnesses["runtime-peak"] = last.peak
            compiled = [p.beyond_arguments for p in programs if label in p.devices]
            if compiled:
                witnesses["compiled"] = first.used + max(compiled)
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
            )
        host_peak = host.host_peak() if self._host_reset else None
        uncounted = self.uncounted or ("unavailable" if self._executables is None else "")
        return PeakReport(devices, host_peak, tuple(programs), profile, uncounted)
