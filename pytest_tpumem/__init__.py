"""pytest-tpumem: device-memory leak checks and HBM budgets for JAX test suites.

The package is laid out by role, in the order of one measurement:

- ``readings/``: where the numbers come from. ``devices`` (memory_stats, live arrays), ``programs``
  (executables compiled during a test), ``host`` (RSS, VmHWM), ``capture`` (the programs a test
  lowers), ``retarget`` and ``tpu`` (a program compiled for a TPU target with libtpu), ``buffers``
  (that compile's buffer assignment), ``jaxcompat`` (every private jax API, one check per feature).
- ``measuring/``: readings taken over a stretch of code. ``peak`` (one measurement: the programs it
  runs, a sampler, the body's frame kept to its end) and ``leak`` (a leak check's runs, each read).
- ``decisions/``: what is decided from them. ``peak`` (witnesses and the peak), ``budget`` (the
  peak against a budget), ``leak`` (the leak rule), ``target`` (the budget on a TPU target),
  ``oom`` (out of device memory), ``verdict``, ``compare``, ``entry`` (the wire format: a test's
  Entry and a run's Report, to and from JSON). Each check gives one result: plain frozen data that
  knows whether it failed and its verdict, and nothing of words.
- ``telling/``: how it is told. A module per check (``budget``, ``target``, ``leak``, ``oom``)
  writes its failure text, report section and row, found by the result's type in ``results``;
  ``header``, ``run``, ``words``, ``rows`` (the summary), ``report`` (the JSON report),
  ``comparison``, ``files``, ``svg``.
- ``checks``: the checks as a user calls them without pytest, each measuring then deciding
  (``check_leaks``, ``PeakTracker``, ``message``).
- ``glue/`` and ``plugin.py``: pytest. ``plugin.py`` is the entry point (options, markers,
  fixtures; it imports nothing else), ``glue/options`` and ``glue/markers`` (one source for each
  option and marker signature), ``glue/plan`` (a test's markers parsed once, at setup),
  ``glue/fixtures``, ``glue/failures`` (one clean line), and the active part,
  registered only under --tpumem: ``glue/measure`` (per test) and ``glue/reporter`` (per run:
  rows, reports, baseline, summary), found through ``glue/active``'s stash keys; ``glue/hookspecs``.
- ``units`` (sizes), ``targets`` (TPU generations), ``defaults`` (every default).

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
