"""The readings of one measurement, for decisions.peak to choose the peak from.

Between ``start()`` and ``stop()`` a ``PeakWatch`` reads, per local device: the bytes in use at
the start and at the end; at the moment each program the code ran started, and after each
transfer (readings.executions); just after the test body returned, while its frame still holds
its locals (``body-end``); the runtime's high-water mark where it has one. A background
``sampler`` also reads bytes in use every few milliseconds: what it sees depends on when it looks,
so it is evidence, never a witness.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..readings import devices as device_readings
from ..readings import host
from ..readings.devices import DeviceMemory
from ..readings.executions import ExecutionWatch, Moment, Need
from ..readings.jaxcompat import Unavailable

if TYPE_CHECKING:
    import types
    from collections.abc import Callable

    import jax


@dataclass(frozen=True)
class PeakReadings:
    """What a PeakWatch read between start() and stop(), per device label."""

    start: dict[str, DeviceMemory]
    end: dict[str, DeviceMemory]
    reset: dict[str, bool]  # the runtime's peak was reset at the start (its high-water mark is this measurement's)
    body_end: dict[str, int] = field(default_factory=dict)  # bytes in use just after the body returned
    highest: dict[str, Moment] = field(default_factory=dict)  # the highest program start or transfer
    sampled: dict[str, int] = field(default_factory=dict)  # the most the sampler saw (timing-dependent)
    needs: tuple[Need, ...] = ()  # the programs the code ran, once each, the largest first
    host_peak: int | None = None
    profile: bytes | None = None  # jax's device-memory profile at the body's end, where asked for
    watched: bool = True  # False on a jax without the hooks: the programs the code ran were not read
    floor: int = 0  # the programs and transfers between two readings added up to at least this (readings.executions)


class Sampler(threading.Thread):
    """Reads bytes in use every ``interval`` seconds (or less often where a reading is slow) and
    keeps the maximum per device."""

    def __init__(self, devices: list[jax.Device], interval: float, first: dict[str, int]):
        super().__init__(name="tpumem-sampler", daemon=True)
        self.devices = devices
        self.interval = interval
        self.max: dict[str, int] = dict(first)  # the start reading: no second walk of the live arrays
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

    def stop(self) -> dict[str, int]:
        self._stop_event.set()
        self.join()
        self.sample()
        return self.max


class FrameGrab:
    """Keeps the frame of one function call alive, so its locals can be read after it returned.

    A profile function is installed only until that function is entered, then removes itself:
    the code between here and the test body pays for a few calls, the test body for none. Where
    another profiler is already installed, nothing is done (``frame`` stays None).
    """

    def __init__(self, code: types.CodeType | None):
        self.code = code
        self.frame: types.FrameType | None = None
        self.installed = code is not None and sys.getprofile() is None
        if self.installed:
            sys.setprofile(self._on_event)

    def _on_event(self, frame: types.FrameType, event: str, arg: Any) -> None:
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


def body_code(body: Callable[..., Any] | None) -> types.CodeType | None:
    """The code object of ``body``'s own function, not a decorator's wrapper around it (None where there is none)."""
    if body is None:
        return None
    try:
        return getattr(inspect.unwrap(body), "__code__", None)
    except ValueError:  # a wrapper cycle
        return None


class PeakWatch:
    """Reads one measurement: ``watch = PeakWatch(devices).start()``, the code, ``watch.stop()``."""

    def __init__(
        self,
        devices: list[jax.Device],
        sample_interval: float = defaults.SAMPLE_MS / 1000,
        body: Callable[..., Any] | None = None,
        profile: bool = False,
        floor: int = defaults.READ_FLOOR,
    ):
        self.devices = devices
        self.sample_interval = sample_interval
        self.body_code = body_code(body)
        self.profile = profile
        self.floor = floor
        self.ran: list[Any] = []  # after stop(): the executables the code ran
        self._sampler: Sampler | None = None
        self._grab: FrameGrab | None = None
        self._watch: ExecutionWatch | None = None

    def start(self) -> PeakWatch:
        self._reset = {device_readings.device_label(d): device_readings.reset_peak(d) for d in self.devices}
        self._start = device_readings.read_devices(self.devices)
        self._host_reset = host.reset_host_peak()
        try:
            self._watch = ExecutionWatch(self.devices, self.floor).__enter__()
        except Unavailable:
            self._watch = None
        if self.sample_interval > 0:
            self._sampler = Sampler(self.devices, self.sample_interval, {k: m.used for k, m in self._start.items()})
            self._sampler.start()
        self._grab = FrameGrab(self.body_code)
        return self

    @property
    def started(self) -> bool:
        return hasattr(self, "_start")

    def stop(self) -> PeakReadings:
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
            sampled = self._sampler.stop()
            self._sampler = None
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(None, None, None)
        end = device_readings.read_devices(self.devices)
        if watch is not None:
            self.ran = list(watch.executables.values())
        return PeakReadings(
            start=self._start,
            end=end,
            reset=self._reset,
            body_end=body_end,
            highest=dict(watch.highest) if watch is not None else {},
            sampled=sampled,
            needs=tuple(sorted(watch.needs.values(), key=lambda n: -n.peak)) if watch is not None else (),
            host_peak=host.host_peak() if self._host_reset else None,
            profile=profile,
            watched=watch is not None,
            floor=self.floor,
        )
