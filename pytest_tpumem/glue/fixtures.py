"""The fixtures' work: ``leak_check`` and ``hbm_estimate`` (declared in plugin.py, which stays cheap to import)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from .. import defaults
from ..decisions.budget import costly
from ..decisions.leakoptions import LeakOptions, check_callable
from ..decisions.target import ProgramJudgement, TargetResult
from ..decisions.upcast import classify
from ..readings.precision import read_precision
from ..readings.tpu import LibtpuMissing, TopologyError, estimate_hbm
from ..targets import TargetError, parse_target
from ..telling.results import message, row
from ..telling.run import about
from ..telling.target import NO_TARGET_HINT, no_libtpu_fixture
from ..units import SizeError, parse_size
from .failures import LeakFailure, fail
from .measure import MEASURER
from .options import SETTINGS
from .recording import record, run_leak_check
from .reporter import REPORTER

if TYPE_CHECKING:
    from ..decisions.leak import LeakReport
    from ..readings.tpu import HbmEstimate


def make_leak_check(request: pytest.FixtureRequest) -> Callable[..., LeakReport]:
    settings = request.config.stash[SETTINGS]
    run = LeakOptions(threshold=settings.leak_threshold, host=settings.leak_host)

    def leak_check(
        fn: Callable[..., Any],
        /,  # fn's own keywords (fn=, args=) go to fn
        *args: Any,
        iterations: int = defaults.ITERATIONS,
        warmup: int = defaults.WARMUP,
        threshold: int | str | None = None,
        clear_caches: bool = defaults.CLEAR_CACHES,
        host: bool | int | str | None = None,
        **kwargs: Any,
    ) -> LeakReport:
        try:
            check_callable(fn)
            options = LeakOptions.parse(iterations, warmup, threshold, clear_caches, host, run=run)
        except ValueError as e:
            fail(about("leak_check(...)", e))
        # fn's own keywords go through partial, so none can collide with check_leaks' options.
        call = functools.partial(fn, *args, **kwargs)
        measurer = request.config.stash.get(MEASURER, None)  # None without --tpumem
        report = run_leak_check(request.node, call, measurer, options)
        if report.leaking:
            raise LeakFailure(report, request.config.get_verbosity())
        return report

    return leak_check


def make_hbm_estimate(request: pytest.FixtureRequest) -> Callable[..., HbmEstimate]:
    settings = request.config.stash[SETTINGS]
    default_target = settings.target

    def hbm_estimate(
        fn: Callable[..., Any],
        *args: Any,
        target: str | None = None,
        budget: int | str | None = None,
        mesh: Any = None,
        in_shardings: Any = None,
        out_shardings: Any = None,
        **kwargs: Any,
    ) -> HbmEstimate:
        try:
            chosen = parse_target(
                target if target is not None else default_target or "", what="hbm_estimate(target=...)"
            )
            limit = chosen.hbm_per_device if budget is None else parse_size(budget, what="hbm_estimate(budget=...)")
        except (TargetError, SizeError) as e:
            fail(str(e) + (NO_TARGET_HINT if target is None and default_target is None else ""))
        try:
            estimate = estimate_hbm(
                fn, *args, target=chosen, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings, **kwargs
            )
        except LibtpuMissing as e:
            skip = settings.no_libtpu == "skip"
            if not skip:
                fail(no_libtpu_fixture(e, skipped=False))
            reporter = request.config.stash.get(REPORTER, None)
            if reporter is not None:
                reporter.skipped_without_libtpu += 1
            pytest.skip(no_libtpu_fixture(e, skipped=True))
        except TopologyError as e:
            fail(about(f"hbm_estimate(target={chosen.topology!r})", e))
        judgement = ProgramJudgement(estimate.program, "", 0, estimate)
        spelled = f"hbm_estimate(budget={budget!r})" if budget is not None else f"{chosen.generation}'s usable HBM"
        result = TargetResult("hbm_estimate", chosen, limit, spelled, (judgement,))
        if result.failed:
            result = _with_upcasts(result, fn, args, kwargs, estimate)
        record(request.node, row(result))
        if result.failed:
            fail(message(result))
        return estimate

    return hbm_estimate


def _with_upcasts(
    result: TargetResult, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], estimate: HbmEstimate
) -> TargetResult:
    """A failed estimate with the upcasts its program asked for, costed from the target's compile
    (the float32 arrays of its optimized module); the result unchanged where the program could not be read."""
    import jax

    try:
        traced = (fn if hasattr(fn, "trace") else jax.jit(fn)).trace(*args, **kwargs)  # a jitted fn: its own jaxpr
        report = classify([read_precision(estimate.program, traced.jaxpr)], {estimate.target: estimate.wide})
    except Exception:  # a reading that explains a failure never replaces it
        return result
    upcasts = tuple(u for u in report.named if costly(u))[: defaults.TOP_BUFFERS]
    return replace(result, precision=report, upcasts=upcasts)
