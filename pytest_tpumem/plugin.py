"""The pytest entry point (``pytest11: tpumem``): hook specs, options, markers and fixtures, and nothing else.

pytest imports this module on every run of every suite, so it imports nothing of the plugin at
import time (and never jax): the options are declared from glue/options.py when pytest asks, and
the active part (glue/measure.py's Measurer, per test, glue/reporter.py's Reporter, per run, and
glue/ledger.py's suite ledger) is registered only under --tpumem / ini tpumem = true, and
unregistered when the run ends; while the plugin is off, glue/off.py's Off is registered instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .decisions.leak import LeakReport
    from .readings.tpu import HbmEstimate


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from .glue import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from .glue.options import OPTIONS

    group = parser.getgroup("tpumem", "device-memory leak checks and HBM budgets (pytest-tpumem)")
    for option in OPTIONS:
        help_text = option.help.replace("%", "%%")  # argparse formats a flag's help with %: "peak:10%" broke --help
        if option.action == "store_true":
            group.addoption(option.flag, dest=option.name, action="store_true", default=None, help=help_text)
        else:
            metavar = "FIGURE:TOLERANCE" if option.action == "append" else "VALUE"
            group.addoption(
                option.flag, dest=option.name, action=option.action, default=None, metavar=metavar, help=help_text
            )
        # Typed, so pytest 9's native TOML table accepts `tpumem = true` and `tpumem_top = 5`; sizes stay strings.
        try:
            parser.addini(option.name, option.help, type=option.ini_type, default=None)  # type: ignore[arg-type]
        except (AssertionError, ValueError, TypeError):  # an older pytest without int and float ini types
            parser.addini(option.name, option.help, default=None)


def pytest_configure(config: pytest.Config) -> None:
    from .glue import markers, options

    for marker in markers.MARKERS:
        config.addinivalue_line("markers", markers.help_line(marker))
    try:
        ini_dir = str(config.inipath.parent) if config.inipath is not None else None
        settings = options.resolve(config.getoption, config.getini, str(config.invocation_params.dir), ini_dir)
    except options.SettingError as e:
        raise pytest.UsageError(f"pytest-tpumem: {e}") from None
    config.stash[options.SETTINGS] = settings
    if settings.enabled:
        from .glue import sharing
        from .glue.active import NAMES
        from .glue.ledger import LEDGER, Ledger
        from .glue.measure import MEASURER, Measurer
        from .glue.reporter import REPORTER, Reporter

        try:  # pytest-xdist on a TPU or GPU host: chips or GPUs of its own for each worker
            shared = sharing.share_out(config, settings)
        except options.SettingError as e:
            raise pytest.UsageError(f"pytest-tpumem: {e}") from None
        config.stash[REPORTER] = Reporter(config, settings)
        config.stash[MEASURER] = Measurer(config, settings, shared)
        config.pluginmanager.register(config.stash[REPORTER], NAMES[0])
        config.pluginmanager.register(config.stash[MEASURER], NAMES[1])
        if not config.pluginmanager.is_blocked(NAMES[2]):  # -p no:tpumem-ledger
            config.stash[LEDGER] = Ledger(config, settings)
            config.pluginmanager.register(config.stash[LEDGER], NAMES[2])
        return
    from .glue.off import Off

    config.pluginmanager.register(Off(), "tpumem-off")  # says when the suite's markers do nothing
    unused = options.unused_when_off(settings)
    if unused:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"pytest-tpumem is off, so {', '.join(unused)} (or its ini twin) has no effect: "
                "pass --tpumem or set tpumem = true"
            ),
            stacklevel=2,
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    """The active part goes with its run (a config made again in-process, as pytester's, starts clean)."""
    from .glue import options

    settings = config.stash.get(options.SETTINGS, None)
    if settings is None or not settings.enabled:
        return  # off (or never configured): nothing was registered or stashed, and nothing more is imported
    from .glue.active import NAMES
    from .glue.ledger import LEDGER
    from .glue.measure import MEASURER
    from .glue.reporter import REPORTER

    for name in NAMES:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    keys: tuple[pytest.StashKey[Any], ...] = (REPORTER, MEASURER, LEDGER)
    for key in keys:
        if key in config.stash:
            del config.stash[key]


@pytest.fixture
def leak_check(request: pytest.FixtureRequest) -> Callable[..., LeakReport]:
    """``leak_check(fn, *args, iterations=, warmup=, threshold=, clear_caches=, host=, **kwargs)``.

    Runs ``fn`` repeatedly with ``jax.clear_caches()`` in between, returns the frozen LeakReport,
    and fails the test when any device or the host grows by ``threshold`` (default
    --tpumem-leak-threshold) or more per iteration. The options and their defaults are the
    leak_check marker's (``pytest --markers``). Works with or without --tpumem.
    """
    from .glue.fixtures import make_leak_check

    return make_leak_check(request)


@pytest.fixture
def hbm_estimate(request: pytest.FixtureRequest) -> Callable[..., HbmEstimate]:
    """``hbm_estimate(fn, *args, target=None, budget=None, mesh=None, in_shardings=None, out_shardings=None, **kwargs)``.

    Compiles ``fn`` for a TPU target (no TPU needed; libtpu is) and returns the per-device
    HbmEstimate; fails the test when the program needs more than ``budget`` (default: the
    target's usable HBM) or the TPU compiler refuses it. ``target`` defaults to --tpumem-target.
    """
    from .glue.fixtures import make_hbm_estimate

    return make_hbm_estimate(request)
