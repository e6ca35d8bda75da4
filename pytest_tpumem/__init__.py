"""pytest-tpumem: device-memory leak checks and HBM budgets for JAX test suites.

The core works without pytest::

    from pytest_tpumem import check_leaks, PeakTracker
    report = check_leaks(train_step, state, batch, iterations=3, threshold=100_000_000)

Nothing here imports jax until a measurement runs.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["check_leaks", "LeakReport", "LeakError", "PeakTracker", "PeakReport", "parse_size", "format_size"]

_LAZY = {
    "check_leaks": "leak",
    "LeakReport": "leak",
    "LeakError": "leak",
    "PeakTracker": "peak",
    "PeakReport": "peak",
    "parse_size": "units",
    "format_size": "units",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
