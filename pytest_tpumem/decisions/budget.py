"""A budget on the run's own devices: the peak of every local device against the limit."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .. import defaults
from .peak import DevicePeak, PeakReport
from .verdict import Verdict

if TYPE_CHECKING:
    from ..readings.buffers import Buffer
    from ..targets import Target
    from .upcast import PrecisionReport, Upcast


@dataclass(frozen=True)
class Budget:
    """A test's budget: bytes per device, where it came from, and the TPU target it is also judged on."""

    limit: int
    spelled: str  # where it came from, as the user wrote it: "max_hbm('20GB')", "--tpumem-max-hbm / ini tpumem_max_hbm"
    target: Target | None = None


@dataclass(frozen=True)
class BudgetResult:
    """The peak of a measured test, judged against its budget (None: measured for a leak check only)."""

    peak: PeakReport
    budget: Budget | None
    buffers: tuple[Buffer, ...] = ()  # where it failed: the largest arrays its compiled programs make
    upcasts: tuple[Upcast, ...] = ()  # where it failed: the upcasts the code asked for
    files: tuple[str, ...] = ()  # files written for it (its device-memory profile), where a directory was given
    judged_on: str = ""  # a TPU target's topology where the budget is judged there: this peak is then shown only
    precision: PrecisionReport | None = None  # where it was read (a failure)

    @property
    def over(self) -> list[DevicePeak]:
        """Devices over the budget, the highest peak first."""
        if self.budget is None:
            return []
        return sorted(self.peak.over(self.budget.limit), key=lambda d: -d.peak)

    @property
    def failed(self) -> bool:
        """Over the budget on the run's devices, where they judge it (a test with a TPU target is
        judged on the target's compile: the run's own figure, a CPU's above all, is shown only)."""
        return bool(self.over) and not self.judged_on

    @property
    def sampled_over(self) -> list[DevicePeak]:
        """Devices within the budget where only the sampler saw more (timing-dependent: warned of, not judged)."""
        return [] if self.budget is None else self.peak.sampled_over(self.budget.limit)

    def explained(
        self, buffers: tuple[Buffer, ...], precision: PrecisionReport | None = None, top: int = defaults.TOP_BUFFERS
    ) -> BudgetResult:
        """This result with why the peak is what it is: the largest of ``buffers`` (what the test's
        programs make, an argument that several programs take once) and the upcasts the code asked
        for (``precision``, a decisions.upcast.PrecisionReport), each costing at least
        defaults.UPCAST_MIN bytes beyond the narrow type somewhere, or making one that large."""
        ordered = sorted(once_each(buffers), key=lambda b: (-b.size, b.kind, b.instruction))
        upcasts = [] if precision is None else [u for u in precision.named if costly(u)]
        return replace(self, buffers=tuple(ordered[:top]), upcasts=tuple(upcasts[:top]), precision=precision)

    @property
    def verdict(self) -> Verdict:
        return Verdict.OVER_BUDGET if self.failed else Verdict.OK


def costly(upcast: Upcast) -> bool:
    """An upcast worth a line: its wider arrays cost defaults.UPCAST_MIN beyond the narrow type on
    some backend or target, or its wide value is that large (where a compiler fused it away)."""
    return upcast.root.nbytes >= defaults.UPCAST_MIN or any(c.beyond >= defaults.UPCAST_MIN for c in upcast.costs)


def once_each(buffers: tuple[Buffer, ...]) -> list[Buffer]:
    """``buffers`` (readings.buffers.Buffer, each of one program) with an argument that several
    programs take listed once, with every program that takes it (and each name they give it). An
    HLO module does not say which array an argument is: arguments of different programs with the
    same size, shape and line are taken for one array; two of one program's never are."""
    out: list[Buffer] = []
    for b in buffers:
        at = _same_array(out, b) if b.kind.startswith("argument") else None
        if at is None:
            out.append(b)
        else:
            out[at] = _joined(out[at], b)
    return out


def _same_array(out: list[Buffer], b: Buffer) -> int | None:
    """Where in ``out`` an argument of other programs is taken for the same array as argument ``b``."""
    key = (b.size, b.shape, b.source, b.converted_from)
    return next(
        (
            i
            for i, o in enumerate(out)
            if o.kind.startswith("argument")
            and (o.size, o.shape, o.source, o.converted_from) == key
            and not set(o.programs) & set(b.programs)
        ),
        None,
    )


def _joined(first: Buffer, b: Buffer) -> Buffer:
    """One argument of the programs of both, with every name they give it."""
    names = first.op.split(", ") + [n for n in [b.op] if n and n not in first.op.split(", ")]
    kind = first.kind if first.kind == b.kind else "argument"
    return replace(first, kind=kind, op=", ".join(n for n in names if n), programs=first.programs + b.programs)
