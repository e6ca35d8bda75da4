"""What tpumem does with one test, decided once at setup from its markers and the settings, and
kept frozen in the item's stash: the call hook and the judgement read it from there."""

from __future__ import annotations

import inspect
import sys
import unittest
from dataclasses import dataclass

import pytest

from .. import defaults
from ..decisions.budget import Budget
from ..decisions.leakoptions import LeakOptions
from ..targets import parse_target
from ..telling.run import cannot_rerun
from . import markers
from .options import Settings


@dataclass(frozen=True)
class TestPlan:
    """Budget, leak check and cache clearing of one test; ``error`` where its markers are wrong."""

    budget: Budget | None = None
    leak: LeakOptions | None = None
    recompile: bool = False  # clear jax's caches when it starts: every program it runs is compiled inside it
    error: str | None = None
    benchmark: bool = False  # uses pytest-benchmark's fixture: its peak goes into benchmark.extra_info
    unswept: bool = False  # --tpumem-leak-check=all cannot re-run it (a doctest, an async test, a benchmark)
    swept: bool = False  # its leak check is --tpumem-leak-check=all's, not a marker's

    __test__ = False  # not a test class, whatever pytest's collection thinks of the name

    @property
    def measured(self) -> bool:
        return self.budget is not None or self.leak is not None or self.benchmark


PLAN = pytest.StashKey[TestPlan]()


def plan_for(item: pytest.Item, settings: Settings) -> TestPlan:
    try:
        budget, marked = _budget(item, settings)
        leak, swept = _leak(item, settings)
    except markers.MarkerError as e:
        return TestPlan(error=str(e))
    benchmark = "benchmark" in getattr(item, "fixturenames", ()) and "jax" in sys.modules  # a benchmark of jax code
    why = "" if leak is None else cannot_rerun_why(item, benchmark)
    unswept = False
    if why and leak is not None:
        if swept:  # the sweep checks what it can re-run; the summary counts the rest
            leak, unswept = None, True
        else:
            return TestPlan(error=cannot_rerun(item.name, why))
    recompile = budget is not None and (
        budget.target is not None or settings.recompile == "all" or (settings.recompile == "marked" and marked)
    )
    return TestPlan(budget, leak, recompile, benchmark=benchmark, unswept=unswept, swept=swept)


def _budget(item: pytest.Item, settings: Settings) -> tuple[Budget | None, bool]:
    """The test's budget, and whether a marker set it."""
    default_target = parse_target(settings.target) if settings.target else None
    mark = markers.closest(item, "max_hbm")
    if mark is not None:
        parsed = markers.parse(markers.max_hbm, mark)
        spelled = "max_hbm" + markers.spell(mark)
        target = parsed["target"] or default_target
        if parsed["limit"] is not None:
            return Budget(parsed["limit"], spelled, target), True
        if target is None:
            raise markers.MarkerError(
                f'@pytest.mark.{spelled}: give a limit ("16GB") or a TPU target (target="v5e", or --tpumem-target)'
            )
        return Budget(target.hbm_per_device, f"{spelled}: {target.generation}'s usable HBM", target), True
    if settings.max_hbm is not None:
        return Budget(settings.max_hbm, "--tpumem-max-hbm / ini tpumem_max_hbm", default_target), False
    return None, False


def _leak(item: pytest.Item, settings: Settings) -> tuple[LeakOptions | None, bool]:
    """A marker's leak check; else, under --tpumem-leak-check=all, the sweep's (its own defaults:
    fewer runs, for every test pays them); and whether it is the sweep's. None for a test exempted
    with leak_check(False), and for a test that calls the leak_check fixture (its own check judges
    what it checks: run again by the sweep, the check inside would run its code 2-4 times over and
    judge a different state each time)."""
    mark = markers.closest(item, "leak_check")
    if mark is None:
        if settings.leak_check != "all" or "leak_check" in getattr(item, "fixturenames", ()):
            return None, False  # a test that calls the leak_check fixture is judged by its own check, not swept
        sweep = LeakOptions(
            defaults.SWEEP_ITERATIONS,
            defaults.SWEEP_WARMUP,
            settings.leak_threshold,
            defaults.SWEEP_CLEAR_CACHES,
            settings.leak_host,
            confirm_cleared=not defaults.SWEEP_CLEAR_CACHES,
        )
        return sweep, True
    return markers.leak_options(mark, LeakOptions(threshold=settings.leak_threshold, host=settings.leak_host)), False


def is_unittest(item: pytest.Item) -> bool:
    cls = getattr(item, "cls", None)
    return cls is not None and issubclass(cls, unittest.TestCase)


def cannot_rerun_why(item: pytest.Item, benchmark: bool = False) -> str:
    """ "" for a test whose body can be run again on its own: a test function (its fixtures kept),
    or a unittest.TestCase method (on its instance). "async" for async ones, "benchmark" for a
    pytest-benchmark test (its fixture runs once a test), "other" for doctests and other items."""
    if not isinstance(item, pytest.Function):
        return "other"
    if benchmark:
        return "benchmark"
    fn = getattr(item, "obj", None)
    return "async" if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) else ""
