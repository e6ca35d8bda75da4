"""One reading between two tests, cheap enough to take after every test: the suite ledger's
(issue 18; docs/design/ledger.md). Per local device the runtime's bytes in use where it reports
them (GPU, TPU), else the bytes of live arrays (the CPU stand-in, each array's layout read once);
the programs jax holds compiled; host RSS. No backend is started for it: before the suite has
started one, a reading says so and has no device figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import devices as device_readings
from . import jaxcompat
from .host import host_rss


@dataclass(frozen=True)
class Between:
    """A reading between tests."""

    started: bool  # a jax backend was running; False: no device figures
    devices: dict[str, int] = field(default_factory=dict)  # label -> bytes in use, or live arrays' bytes
    stand_in: bool = False  # the device figures are live arrays' bytes (no runtime figure)
    executables: int | None = None  # programs compiled and held by jax's caches; None where not listed
    rss: int | None = None


class BetweenTests:
    """Takes the readings: ``reader = BetweenTests()``, then ``reader.read()`` after each test."""

    def __init__(self) -> None:
        self._live = device_readings.LiveBytesKept()
        self._devices: list[Any] | None = None

    def read(self) -> Between:
        rss = host_rss()
        if not jaxcompat.backends_started():
            return Between(False, rss=rss)
        if self._devices is None:
            self._devices = device_readings.local_devices()  # the backend runs: this starts nothing
        devices = self._devices
        in_use = device_readings.read_in_use(devices)
        stand_in = len(in_use) < len(devices)
        figures = self._live() if stand_in else in_use
        listed = jaxcompat.live_executables(devices[0].client) if devices else None
        return Between(
            True,
            {device_readings.device_label(d): figures.get(device_readings.device_label(d), 0) for d in devices},
            stand_in,
            len(listed) if listed is not None else None,
            rss,
        )
