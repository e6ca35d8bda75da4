"""Out of device memory: which errors are one, and freeing what the failed code held."""

from __future__ import annotations

import gc
import sys
import traceback
from dataclasses import dataclass, field

from ..errors import first_line
from .peak import PeakReport
from .verdict import Verdict


def is_oom(error: BaseException) -> bool:
    """jax's runtime error for an allocation that did not fit (not any text that mentions it)."""
    jax = sys.modules.get("jax")
    runtime_error = getattr(getattr(jax, "errors", None), "JaxRuntimeError", None)
    if runtime_error is None or not isinstance(error, runtime_error):
        return False
    return str(error).lstrip().startswith("RESOURCE_EXHAUSTED")


def free(error: BaseException) -> None:
    """After an out-of-memory: drop the failed code's frames (and the arrays they hold) and jax's caches."""
    traceback.clear_frames(error.__traceback__)
    error.__traceback__ = None
    gc.collect()
    import jax

    jax.clear_caches()
    gc.collect()


@dataclass(frozen=True)
class OomResult:
    """A test (or its setup) that ran out of device memory."""

    error: str  # the first line of jax's error
    during: str  # "in this test", "while setting up this test"
    limit: int | None  # the test's budget, if it had one
    peak: PeakReport | None  # what was measured until then, where the test was measured (its first run)
    run: tuple[int, int] | None = None  # where a leak check's later run ran out: (that run, the runs in all)
    at_failure: dict[str, int] = field(default_factory=dict)  # that run's bytes in use per device when it ran out

    @classmethod
    def of(
        cls,
        error: BaseException,
        during: str,
        limit: int | None = None,
        peak: PeakReport | None = None,
        run: tuple[int, int] | None = None,
        at_failure: dict[str, int] | None = None,
    ) -> OomResult:
        return cls(first_line(error), during, limit, peak, run, dict(at_failure or {}))

    @property
    def figures(self) -> dict[str, int]:
        """Per device, the figure of the run that ran out: its bytes in use when it did (a leak
        check's later run), else the measured peak; {} where nothing was measured."""
        if self.run is not None:
            return dict(self.at_failure)
        return {d.device: d.peak for d in self.peak.devices.values()} if self.peak is not None else {}

    failed = True
    verdict = Verdict.OOM
