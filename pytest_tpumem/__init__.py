"""pytest-tpumem: device-memory leak checks and HBM budgets for JAX test suites.

Where each part lives, and which way imports run: docs/architecture.md.

The core works without pytest::

    from pytest_tpumem import check_leaks, message, PeakTracker, TargetCheck
    report = check_leaks(train_step, state, batch, iterations=3, threshold="100MB")
    print(message(report))

Nothing here imports jax until a measurement runs.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "check_leaks": "checks",
    "message": "checks",
    "section": "checks",
    "LeakReport": "decisions.leak",
    "LeakError": "checks",
    "Series": "decisions.leak",
    "PeakTracker": "checks",
    "PeakReport": "decisions.peak",
    "Budget": "decisions.budget",
    "BudgetResult": "decisions.budget",
    "TargetCheck": "decisions.target",
    "TargetResult": "decisions.target",
    "Verdict": "decisions.verdict",
    "estimate_hbm": "readings.tpu",
    "target_mesh": "readings.tpu",
    "HbmEstimate": "readings.tpu",
    "parse_size": "units",
    "format_size": "units",
    "TpumemWarning": "glue.failures",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
