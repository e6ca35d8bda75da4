"""One reading between two tests, cheap enough to take after every test: the suite ledger's
(docs/design/ledger.md). Per local device the runtime's bytes in use where it reports
them (GPU, TPU), else the bytes of live arrays (the CPU stand-in, each array's layout read once);
the programs jax holds compiled; host RSS. No backend is started for it: before the suite has
started one, a reading says so and has no device figures.

Each reading is taken for an owner (the test that just ended, or a wider-scope fixture just set
up): the live arrays and programs it sees for the first time are that owner's, and each reading
says the bytes alive per owner, so what a test left behind is told apart from what fixtures and
other tests hold, whatever was freed meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import devices as device_readings
from . import jaxcompat
from .host import host_rss
from .programs import count_by_site, held_by_site


@dataclass(frozen=True)
class Between:
    """A reading between tests."""

    started: bool  # a jax backend was running; False: no device figures
    devices: dict[str, int] = field(default_factory=dict)  # label -> bytes in use, or live arrays' bytes
    stand_in: bool = False  # the device figures are live arrays' bytes (no runtime figure)
    executables: int | None = None  # programs compiled and held by jax's caches; None where not listed
    rss: int | None = None
    owned: dict[str, int] = field(default_factory=dict)  # owner -> bytes of live arrays it made (each buffer once)
    # programs first seen now, by the user's line (Frame or None)
    compiled: dict[Any, int] = field(default_factory=dict)
    peaks: dict[str, int] = field(default_factory=dict)  # the runtime's high-water mark per device (GPU, TPU)
    arrays: dict[str, int] = field(default_factory=dict)  # live arrays' bytes per device (the devices' figure on CPU)
    owned_on: dict[str, dict[str, int]] = field(default_factory=dict)  # owner -> device -> bytes of its arrays

    @property
    def outside(self) -> int:
        """Bytes in use on the devices that no live array holds (programs, the runtime's own); 0 on
        the CPU stand-in, where the figure is the arrays'."""
        if self.stand_in:
            return 0
        return sum(n - self.arrays.get(label, 0) for label, n in self.devices.items())


class BetweenTests:
    """Takes the readings: ``reader = BetweenTests()``, then ``reader.read()`` after each test."""

    def __init__(self, devices: Callable[[], list[Any]] | None = None) -> None:
        self._live = device_readings.LiveBytesKept()
        self._devices: list[Any] | None = None
        self._devices_of = devices or device_readings.local_devices  # asked once a backend runs, never before
        self._programs: set[int] | None = None  # ids of the executables held at the last reading

    def arrays_of(self, owner: str) -> list[Any]:
        """The live arrays (at the last reading) that ``owner`` made."""
        return self._live.arrays_of(owner)

    def programs_by_site(self) -> dict[Any, int]:
        """The programs jax holds now, by the user's line that compiled them (about 10 us each)."""
        return held_by_site(self._devices or [])

    def bytes_limits(self) -> dict[str, int]:
        """Each device's bytes_limit where the runtime reports one (none on CPU)."""
        out = {}
        for dev in self._devices or []:
            limit = device_readings.memory_stats(dev) or {}
            if isinstance(limit.get("bytes_limit"), int):
                out[device_readings.device_label(dev)] = limit["bytes_limit"]
        return out

    def read(self, owner: str = "") -> Between:
        """The reading now; arrays and programs not seen before are ``owner``'s."""
        rss = host_rss()
        if not jaxcompat.backends_started():
            self._programs = set()  # nothing is compiled without a backend: what comes next is new
            return Between(False, rss=rss)
        if self._devices is None:
            self._devices = list(self._devices_of())  # the backend runs: this starts nothing
        devices = self._devices
        in_use, peaks = device_readings.read_in_use_and_peaks(devices)
        stand_in = len(in_use) < len(devices)
        live = self._live(owner)  # walked on every platform: who made what is still alive
        figures = live if stand_in else in_use
        listed = jaxcompat.live_executables(devices[0].client) if devices else None
        return Between(
            True,
            {device_readings.device_label(d): figures.get(device_readings.device_label(d), 0) for d in devices},
            stand_in,
            len(listed) if listed is not None else None,
            rss,
            dict(self._live.owned),
            self._compiled(listed),
            peaks,
            live,
            {owner: {label: n for label, n in on.items() if n} for owner, on in self._live.owned_on.items()},
        )

    def _compiled(self, listed: list[Any] | None) -> dict[Any, int]:
        """The programs in ``listed`` not held at the last reading, by the user's line that compiled
        them (told by identity: jax's executables take no weak reference, and none is kept here)."""
        if listed is None:
            return {}
        ids = {id(e) for e in listed}
        before, self._programs = self._programs, ids
        if before is None:
            return {}  # the first reading: what was compiled before it is no owner's
        return count_by_site([e for e in listed if id(e) not in before])
