"""A budget on the run's own devices: the peak of every local device against the limit."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .. import defaults
from .peak import DevicePeak, PeakReport
from .verdict import Verdict


@dataclass(frozen=True)
class Budget:
    """A test's budget: bytes per device, where it came from, and the TPU target it is also judged on."""

    limit: int
    spelled: str  # where it came from, as the user wrote it: "max_hbm('20GB')", "--tpumem-max-hbm / ini tpumem_max_hbm"
    target: Any = None  # targets.Target, or None


@dataclass(frozen=True)
class BudgetResult:
    """The peak of a measured test, judged against its budget (None: measured for a leak check only)."""

    peak: PeakReport
    budget: Budget | None
    buffers: tuple[
        Any, ...
    ] = ()  # where it failed: the largest arrays its compiled programs make (readings.buffers.Buffer)
    upcasts: tuple[Any, ...] = ()  # where it failed: float32 arrays converted from bf16/f16, the largest first
    files: tuple[str, ...] = ()  # files written for it (its device-memory profile), where a directory was given

    @property
    def over(self) -> list[DevicePeak]:
        """Devices over the budget, the highest peak first."""
        if self.budget is None:
            return []
        return sorted(self.peak.over(self.budget.limit), key=lambda d: -d.peak)

    @property
    def failed(self) -> bool:
        return bool(self.over)

    @property
    def sampled_over(self) -> list[DevicePeak]:
        """Devices within the budget where only the sampler saw more (timing-dependent: warned of, not judged)."""
        return [] if self.budget is None else self.peak.sampled_over(self.budget.limit)

    def explained(self, buffers: tuple[Any, ...], top: int = defaults.TOP_BUFFERS) -> BudgetResult:
        """This result with why the peak is what it is: the largest of ``buffers`` (what the test's
        programs make) and the silent upcasts among them, each upcast at least defaults.UPCAST_MIN bytes."""
        ordered = sorted(buffers, key=lambda b: (-b.size, b.kind, b.instruction))
        upcasts = [b for b in ordered if b.converted_from and b.size >= defaults.UPCAST_MIN]
        return replace(self, buffers=tuple(ordered[:top]), upcasts=tuple(upcasts[:top]))

    @property
    def verdict(self) -> Verdict:
        return Verdict.OVER_BUDGET if self.failed else Verdict.OK
