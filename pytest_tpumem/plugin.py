"""pytest hooks: a thin adapter between pytest and the measurement core.

Importing this module must stay cheap and must not import jax: pytest loads every installed
plugin on every run. jax is imported only once --tpumem is on or the leak_check fixture is used.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import pytest

from . import markers, settings as settings_mod
from .units import SizeError, parse_size

SETTINGS = pytest.StashKey["settings_mod.Settings"]()


class LeakFailure(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """The failure a leak_check raises; ``.report`` is the LeakReport."""

    def __init__(self, report: Any):
        super().__init__(report.message(), pytrace=False)
        self.report = report


LeakFailure.__module__ = "builtins"  # as pytest does for Failed: "LeakFailure: ..." in the short summary


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tpumem", "device-memory leak checks and HBM budgets (pytest-tpumem)")
    for name, flag, help_text, kind in settings_mod.OPTIONS:
        if kind == "bool":
            group.addoption(flag, dest=name, action="store_true", default=None, help=help_text)
        else:
            group.addoption(flag, dest=name, default=None, metavar="VALUE", help=help_text)
        _addini(parser, name, help_text, kind)


def _addini(parser: pytest.Parser, name: str, help_text: str, kind: str) -> None:
    """Declare the ini value with its type, so pytest's native TOML table accepts `tpumem = true`
    and `tpumem_top = 5`; sizes stay strings ("16GB"). Older pytest lacks int and float types."""
    ini_type = {"bool": "bool", "int": "int", "float": "float"}.get(kind, "string")
    try:
        parser.addini(name, help_text, type=ini_type, default=None)  # type: ignore[arg-type]
    except (AssertionError, ValueError, TypeError):
        parser.addini(name, help_text, default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", markers.MAX_HBM_HELP)
    config.addinivalue_line("markers", markers.LEAK_CHECK_HELP)
    try:
        resolved = settings_mod.resolve(config.getoption, config.getini)
    except settings_mod.SettingError as e:
        raise pytest.UsageError(f"pytest-tpumem: {e}") from None
    config.stash[SETTINGS] = resolved
    if resolved.enabled:
        from .session import TpuMem  # the active part, and only then

        config.pluginmanager.register(TpuMem(config, resolved), "tpumem-session")
        return
    # The fixtures use the leak threshold and the target even when off; the other options need the plugin on.
    unused = [
        flag
        for name, flag, *_ in settings_mod.OPTIONS[1:]
        if name in resolved.given and name not in ("tpumem_leak_threshold", "tpumem_target")
    ]
    if unused:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"pytest-tpumem is off, so {', '.join(unused)} (or its ini twin) has no effect: "
                "pass --tpumem or set tpumem = true"
            ),
            stacklevel=2,
        )


def fail(message: str) -> None:
    """Fail the current test with one clean line and no traceback."""
    pytest.fail(message, pytrace=False)


def record(item: pytest.Item, row: dict[str, Any]) -> None:
    """Attach a summary row to the test's report (user_properties travel to the xdist controller)."""
    if item.config.stash[SETTINGS].enabled:
        from .report import PROPERTY

        item.user_properties.append((PROPERTY, row))


@pytest.fixture
def leak_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``leak_check(fn, *args, iterations=3, warmup=1, threshold=None, clear_caches=True, **kwargs)``.

    Runs ``fn`` repeatedly with ``jax.clear_caches()`` in between, returns the frozen LeakReport,
    and fails the test when any device or the host grows by ``threshold`` or more per iteration.
    Works with or without --tpumem.
    """
    default = request.config.stash[SETTINGS].leak_threshold

    def run(
        fn: Callable[..., Any],
        *args: Any,
        iterations: int = 3,
        warmup: int = 1,
        threshold: Any = None,
        clear_caches: bool = True,
        **kwargs: Any,
    ) -> Any:
        from .leak import check_leaks, validate
        from .report import row

        try:
            validate(iterations, warmup)
            limit = default if threshold is None else parse_size(threshold, what="threshold")
        except (SizeError, ValueError) as e:
            error = f"leak_check(...): {e}"
        else:
            error = None
        if error is not None:
            fail(error)
        # fn's own keywords go through partial, so none can collide with check_leaks' options.
        call = functools.partial(fn, *args, **kwargs)
        report = check_leaks(call, iterations=iterations, warmup=warmup, threshold=limit, clear_caches=clear_caches)
        record(request.node, row(leak=report, verdict=report.verdict))
        if report.leaked:
            raise LeakFailure(report)
        return report

    return run


@pytest.fixture
def hbm_estimate(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``hbm_estimate(fn, *args, target=None, budget=None, mesh=None, in_shardings=None, out_shardings=None, **kwargs)``.

    Compiles ``fn`` for a TPU target (no TPU needed; libtpu is) and returns the per-device
    HbmEstimate; fails the test when the program needs more than ``budget`` (default: the
    target's usable HBM) or the TPU compiler refuses it. ``target`` defaults to --tpumem-target.
    """
    default_target = request.config.stash[SETTINGS].target

    def run(
        fn: Callable[..., Any],
        *args: Any,
        target: Any = None,
        budget: Any = None,
        mesh: Any = None,
        in_shardings: Any = None,
        out_shardings: Any = None,
        **kwargs: Any,
    ) -> Any:
        from .estimate import estimate_hbm
        from .targets import LibtpuMissing, TargetError, parse_target

        error = None
        try:
            chosen = parse_target(target if target is not None else default_target or "", what="hbm_estimate(target=...)")
            limit = chosen.hbm_per_device if budget is None else parse_size(budget, what="hbm_estimate(budget=...)")
        except (TargetError, SizeError) as e:
            error = str(e) + ("; or set --tpumem-target" if target is None and default_target is None else "")
        if error is not None:
            fail(error)
        try:
            report = estimate_hbm(
                fn, *args, target=chosen, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings, **kwargs
            )
        except LibtpuMissing as e:
            missing, bad = str(e), None
        except TargetError as e:  # a topology libtpu cannot lay out
            missing, bad = None, f"hbm_estimate(target={chosen.topology!r}): {e}"
        else:
            missing = bad = None
        if missing is not None:
            pytest.skip(missing)
        if bad is not None:
            fail(bad)
        over = report.refused or report.peak > limit
        record(
            request.node,
            {
                "verdict": "over budget" if over else "ok",
                "budget": limit,
                "peaks": {report.target: report.peak},
                "witness": "compiled for " + report.target,
            },
        )
        if over:
            from .units import format_size

            fail(f"hbm_estimate: over the budget of {format_size(limit)}: {report.describe()}")
        return report

    return run
