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

The readings are taken by measuring.peak; ``judge`` turns them into the peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..measuring.peak import PeakReadings
from ..readings.devices import DeviceMemory
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
    largest_free: int | None = None  # at the end: the largest block the allocator could hand out (largest_block)
    sampler: int | None = None  # the most the sampler saw: timing-dependent evidence, never the peak
    program: str = ""  # the witness "program": which program ran at that moment ("jit_step")
    floor: int = 0  # the peak may be this far below the exact one (programs and transfers read in steps of it)
    left: int = 0  # bytes of the start that other tests left alive (PeakReport.left_behind): taken off every
    # figure above where the budget counts the test's own use, in them where it counts the whole device

    @property
    def fragmented(self) -> bool:
        """The largest block the allocator could hand out (largest_block) is under half of what is
        free: a large allocation can fail with room to spare."""
        return self.free is not None and self.largest_free is not None and self.largest_free * 2 < self.free

    @property
    def unexplained(self) -> int:
        """How far the sampler saw above the peak, where that is more than the readings' floor
        explains (0 otherwise): a moment no deterministic reading explains."""
        excess = (self.sampler or 0) - self.peak
        return excess if excess > self.floor else 0


@dataclass(frozen=True)
class LeftBehind:
    """Arrays alive when a measurement began that another test made and left alive (or a fixture of
    a wider scope that the measured test does not use): not the measured test's own."""

    owner: str  # the test's id, or "module fixture params (tests/test_x.py)"
    devices: dict[str, int]  # bytes per device
    made: str = ""  # the line that made most of them ("tests/test_x.py:15 in test_x"), where known
    held: str = ""  # what keeps them alive ("global _SEEN of tests.test_x"), where the ledger found it

    @property
    def nbytes(self) -> int:
        return sum(self.devices.values())


def own_use(report: PeakReport, left_behind: tuple[LeftBehind, ...], whole_device: bool = False) -> PeakReport:
    """``report`` with what other tests left alive at its start (``left_behind``) said, and, unless
    ``whole_device``, taken off every figure: the test's own use, the same whatever ran before it.
    What others left stays alive through the test (nothing of the test's frees it), so each figure
    less it is what the test and the fixtures it uses held at that moment."""
    if not left_behind:
        return report
    devices = {}
    for label, d in report.devices.items():
        left = min(sum(b.devices.get(label, 0) for b in left_behind), d.start)
        if whole_device or not left:
            devices[label] = replace(d, left=left)
            continue
        witnesses = {k: max(0, v - left) for k, v in d.witnesses.items()}
        devices[label] = replace(
            d,
            start=max(0, d.start - left),
            peak=witnesses[d.witness],
            witnesses=witnesses,
            sampler=None if d.sampler is None else max(0, d.sampler - left),
            left=left,
        )
    return replace(report, devices=devices, left_behind=left_behind, whole_device=whole_device)


@dataclass(frozen=True)
class PeakReport:
    """Peak memory per device of one measurement, plus the host peak where it could be read."""

    devices: dict[str, DevicePeak]
    host_peak: int | None
    programs: tuple[Need, ...] = field(default=())  # the programs the measured code ran, once each
    profile: bytes | None = None  # jax's device-memory profile (gzipped pprof) at the body's end, where asked for
    uncounted: str = ""  # why the programs the code ran were not read ("unavailable" on a jax without the
    # hooks: telling.budget.UNCOUNTED says it in words); "" where they were
    left_behind: tuple[LeftBehind, ...] = ()  # what other tests left alive at the start, by who left it
    whole_device: bool = False  # the figures count what others left (--tpumem-budget-counts=device)

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


def _witnesses(readings: PeakReadings, label: str, first: DeviceMemory, last: DeviceMemory) -> dict[str, int]:
    """Every witness of one device's peak that it has (the module's docstring)."""
    witnesses = {"start": first.used, "end": last.used}
    if label in readings.body_end:
        witnesses["body-end"] = readings.body_end[label]
    moment = readings.highest.get(label)
    if moment is not None:
        witnesses["transfer" if moment.what == "transfer" else "program"] = moment.bytes
    if last.peak is not None and (readings.reset.get(label) or first.peak is None or last.peak > first.peak):
        witnesses["runtime-peak"] = last.peak
    return witnesses


def largest_block(end: DeviceMemory) -> int | None:
    """The largest block the allocator could hand out at ``end``, where its statistics tell it; None
    where they do not. largest_free_block_bytes is it only where the allocator can take no more:

    - BFC (the one allocator that reports pool_bytes) finds its largest free block among the free
      chunks of the regions taken so far (xla/tsl/framework/bfc_allocator.cc : LargestFreeChunk),
      while Extend can still take a region of up to bytes_limit - pool_bytes: without preallocation
      (--tpumem-gpus) or before the first allocation, the larger of the two;
    - an allocator that reports no pool and a largest free block of 0 has not filled it:
      cuda_async's GetStats never does (gpu_cudamallocasync_allocator.cc), and 0 is the default of
      tsl::AllocatorStats. (A full device with such a 0 loses only a line saying 0.)

    Only this allocator's view: another process on the same GPU may hold what bytes_limit counts."""
    if end.largest_free is None:
        return None
    if end.pool is not None:
        room = end.limit - end.pool if end.limit is not None else 0
        return max(end.largest_free, room)
    return end.largest_free or None


def _device_peak(readings: PeakReadings, label: str) -> DevicePeak:
    """One device's peak: the witness that judges, with the rest of what was read of the device."""
    first = readings.start[label]
    last = readings.end.get(label, first)
    moment = readings.highest.get(label)
    witnesses = _witnesses(readings, label, first, last)
    witness = choose_witness(witnesses)
    return DevicePeak(
        device=label,
        start=first.used,
        peak=witnesses[witness],
        witness=witness,
        witnesses=witnesses,
        limit=last.limit,
        stand_in=first.in_use is None,
        free=last.limit - last.in_use if last.limit is not None and last.in_use is not None else None,
        largest_free=largest_block(last),
        sampler=readings.sampled.get(label),
        program=moment.what.removeprefix("program ") if moment is not None and moment.what != "transfer" else "",
        floor=readings.floor if readings.watched else 0,
    )


def judge(readings: PeakReadings) -> PeakReport:
    """The peak per device from one measurement's readings (measuring.peak): every witness, and the largest."""
    return PeakReport(
        {label: _device_peak(readings, label) for label in readings.start},
        readings.host_peak,
        readings.needs,
        readings.profile,
        "" if readings.watched else "unavailable",
    )
