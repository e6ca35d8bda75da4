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
    # The fixture uses the leak threshold even when off; the other options need the plugin on.
    unused = [flag for name, flag, *_ in settings_mod.OPTIONS[1:] if name in resolved.given and name != "tpumem_leak_threshold"]
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
