"""A budget on a TPU target: the programs a stretch of code lowers, compiled for the target and
judged against the budget there. Usable without pytest::

    from pytest_tpumem import TargetCheck

    with TargetCheck("v5e", budget="12GB") as check:
        train_step(state, batch)
    result = check.result()  # compiles each program for v5e:2x2 (libtpu, no TPU needed)
    if result.failed:
        print(message(result))  # from pytest_tpumem import message
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..errors import first_line
from ..readings.capture import ProgramCapture
from ..readings.retarget import NotRetargetable
from ..readings.tpu import HbmEstimate, compile_captured, topology_devices
from ..targets import Target, parse_target
from ..units import parse_size
from .verdict import Verdict

if TYPE_CHECKING:
    import jax

    from ..readings.capture import CapturedProgram
    from .upcast import PrecisionReport, Upcast


@dataclass(frozen=True)
class ProgramJudgement:
    """One captured program as compiled for the target, or why it could not be."""

    program: str
    source: str
    resident: int  # bytes of other arrays in use when the test first lowered it (the run's sizes)
    estimate: HbmEstimate | None
    reason: str = ""  # set where it could not be compiled for the target
    skipped: bool = False  # a small eager operation, not compiled (see defaults.SMALL_EAGER)

    @property
    def need(self) -> int:
        """What the device needs while it runs: its own peak plus the arrays it does not take."""
        if self.estimate is None:
            return 0
        return self.estimate.peak + self.resident


def judge_programs(programs: list[CapturedProgram], target: Target) -> list[ProgramJudgement]:
    """Compile every captured program for ``target``, except eager operations on less than
    defaults.SMALL_EAGER bytes: one primitive on that little data cannot move a budget, and each
    distinct shape would cost a TPU compile (~50 ms)."""
    out = []
    for program in programs:
        if program.eager and program.data_bytes < defaults.SMALL_EAGER:
            out.append(ProgramJudgement(program.name, program.source, program.resident, None, skipped=True))
            continue
        try:
            estimate = compile_captured(program, target)
        except NotRetargetable as e:
            reason = str(e)
        except Exception as e:
            reason = f"{type(e).__name__}: {first_line(e)}"
        else:
            out.append(ProgramJudgement(program.name, program.source, program.resident, estimate))
            continue
        out.append(ProgramJudgement(program.name, program.source, program.resident, None, reason))
    return out


@dataclass(frozen=True)
class TargetResult:
    """What a test's programs need compiled for a TPU target, against the budget there.

    A program that could not be compiled for the target (or recorded) fails the check too: the
    code is then not judged there, and saying nothing would pass it unchecked."""

    check: str  # "max_hbm" or "hbm_estimate": who asked, for the failure text
    target: Target
    limit: int
    spelled: str  # where the budget came from
    judgements: tuple[ProgramJudgement, ...]
    errors: tuple[str, ...] = ()  # recordings or judgements that failed
    precision: PrecisionReport | None = None  # where it was read (a failure)
    upcasts: tuple[Upcast, ...] = ()  # the upcasts worth naming (decisions.budget.costly), the costliest first

    @property
    def judged(self) -> list[ProgramJudgement]:
        """Programs compiled for the target, the largest need first."""
        return sorted((j for j in self.judgements if j.estimate is not None), key=lambda j: -j.need)

    @property
    def unjudged(self) -> list[ProgramJudgement]:
        return [j for j in self.judgements if j.estimate is None and not j.skipped]

    @property
    def over(self) -> list[ProgramJudgement]:
        return [j for j in self.judged if j.estimate is not None and (j.estimate.refused or j.need > self.limit)]

    @property
    def need(self) -> int:
        """The largest need per device among the programs compiled for the target."""
        judged = self.judged
        return judged[0].need if judged else 0

    @property
    def failed(self) -> bool:
        return bool(self.over or self.unjudged or self.errors)

    @property
    def verdict(self) -> Verdict:
        if self.over:
            return Verdict.OVER_BUDGET
        return Verdict.NOT_JUDGED if self.failed else Verdict.OK


class TargetCheck:
    """``with TargetCheck("v5e", budget="12GB") as check: ...`` then ``check.result()``.

    When made, the topology is built (libtpu; readings.tpu.LibtpuMissing or TopologyError where it
    cannot be) and the hook is found (jaxcompat.Unavailable where this jax has none). On entering,
    jax's caches are cleared so every program the code runs is lowered inside, and the lowering is
    recorded. ``budget``
    defaults to the target's usable HBM per device. ``devices``: where the other arrays in use are
    read (default: every local device)."""

    def __init__(
        self,
        target: Target | str,
        budget: int | str | None = None,
        *,
        spelled: str = "",
        check: str = "TargetCheck",
        devices: list[jax.Device] | None = None,
    ):
        self.target = target if isinstance(target, Target) else parse_target(target)
        self.limit = self.target.hbm_per_device if budget is None else parse_size(budget, what="budget")
        self.spelled = spelled or f"{check}({self.target.topology!r}, budget={budget!r})"
        self.check = check

        topology_devices(self.target.topology)  # a topology libtpu cannot build fails before the code runs
        self.capture = ProgramCapture(devices)  # jaxcompat.Unavailable where this jax has no hook

    def __enter__(self) -> TargetCheck:
        import jax

        jax.clear_caches()  # programs in jit's cache would not be lowered again, so not seen
        self.capture.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.capture.__exit__(*exc)

    def result(self, left: int = 0) -> TargetResult:
        """Compile what was recorded for the target and judge it (a compile per distinct program).
        ``left``: bytes of the arrays in use that other tests left alive, not counted in what each
        program needs beside its own (decisions.peak.own_use)."""
        errors = list(self.capture.errors)
        try:
            judgements = [
                replace(j, resident=max(0, j.resident - left))
                for j in judge_programs(self.capture.programs, self.target)
            ]
        except Exception as e:  # never an INTERNALERROR, never a silent pass: the code is not judged
            judgements = []
            errors.append(f"judging for {self.target.topology} failed: {type(e).__name__}: {e}")
        return TargetResult(self.check, self.target, self.limit, self.spelled, tuple(judgements), tuple(errors))
