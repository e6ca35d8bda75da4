"""The verdict of a check, worst first."""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    """What a check decided. A str, so a row carries it as plain text (``Verdict.LEAK.value == "leak"``)."""

    OOM = "oom"  # the test ran out of device memory
    LEAK = "leak"  # memory grew by the threshold or more per iteration
    OVER_BUDGET = "over budget"  # the peak (on the run's devices or compiled for a TPU target) is over the budget
    REGRESSED = "regressed"  # a figure grew beyond a tolerance against the baseline (--tpumem-compare-fail)
    # a budget that could not be checked (no libtpu for the target, a program that cannot be moved)
    NOT_JUDGED = "not judged"
    OK = "ok"

    @property
    def failed(self) -> bool:
        return self is not Verdict.OK

    @property
    def rank(self) -> int:
        """0 for the worst; the summary lists tests in this order."""
        return list(Verdict).index(self)

    @classmethod
    def worst(cls, verdicts: list[Verdict]) -> Verdict:
        return min(verdicts, key=lambda v: v.rank, default=cls.OK)


def rank_of(text: str) -> int:
    """A verdict as a row or a report carries it (its text) in Verdict's order, worst first;
    unknown text last."""
    try:
        return Verdict(text).rank
    except ValueError:
        return len(Verdict)
