"""pytest's private parts the plugin uses, each behind one function here (as readings/jaxcompat.py
does for jax), with a fallback where a pytest lacks them."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import pytest

try:
    from _pytest.skipping import evaluate_xfail_marks
except ImportError:  # a pytest without it: expected_error reads the marks as pytest does
    evaluate_xfail_marks = None  # type: ignore[assignment]


def expected_error(item: pytest.Item, error: BaseException) -> bool:
    """True when an xfail marker of ``item`` whose condition holds expects ``error``: pytest's own
    evaluation of the marks (``xfail(False, ...)`` expects nothing; a string condition is evaluated
    as pytest does), and its matching of ``raises=`` (a type, a tuple, or ``pytest.RaisesExc``)."""
    if evaluate_xfail_marks is None:  # a pytest without it: conditions that are not strings, as pytest reads them
        mark = next((m for m in item.iter_markers("xfail") if _holds(m)), None)
        if mark is None:
            return False
        raises = mark.kwargs.get("raises")
    else:
        xfailed = evaluate_xfail_marks(item)
        if xfailed is None:
            return False
        raises = xfailed.raises
    if raises is None:
        return True
    if isinstance(raises, (type, tuple)):
        return isinstance(error, raises)
    matches = getattr(raises, "matches", None)  # pytest.RaisesExc / RaisesGroup (pytest 8.4+)
    return bool(matches(error)) if callable(matches) else False


def call_arguments(item: pytest.Function) -> dict[str, Any]:
    """The fixture values a test function is called with, by its own argument names (pytest's
    ``_fixtureinfo.argnames``: ``funcargs`` holds autouse fixtures' values too)."""
    return {name: item.funcargs[name] for name in item._fixtureinfo.argnames}


def fixture_value_of(item: pytest.Item, name: str) -> Any:
    """The value of the fixture ``name`` the test was given, None where it has none
    (``Function.funcargs``, filled by _pytest/fixtures.py ``TopRequest._fillfixtures``; an item
    that is not a function has none)."""
    return (getattr(item, "funcargs", None) or {}).get(name)


def fixture_defs(item: pytest.Item) -> dict[str, Sequence[pytest.FixtureDef[Any]]]:
    """The fixtures a test may use, by name (``Function._fixtureinfo.name2fixturedefs``:
    _pytest/fixtures.py ``FuncFixtureInfo``); {} for an item without them (a doctest, a custom item)."""
    info = getattr(item, "_fixtureinfo", None)
    return dict(getattr(info, "name2fixturedefs", None) or {})


def fixture_location(fixturedef: pytest.FixtureDef[Any]) -> str:
    """Where a fixture is defined, as a node id ("" for a plugin's): ``FixtureDef.node``'s node id
    where this pytest has it, else ``FixtureDef.baseid``, which it replaces (_pytest/fixtures.py
    ``FixtureDef.__init__``: the one is the other's node id)."""
    node = getattr(fixturedef, "node", None)
    if node is not None:
        return str(node.nodeid)
    return str(getattr(fixturedef, "baseid", "") or "")


def fixture_value(fixturedef: pytest.FixtureDef[Any]) -> Any:
    """A fixture's value while it is set up, None where it raised or is torn down
    (``FixtureDef.cached_result``: value, cache key, exception; _pytest/fixtures.py ``FixtureDef.execute``)."""
    cached = getattr(fixturedef, "cached_result", None)
    if not cached or cached[2] is not None:
        return None
    return cached[0]


def last_failed_narrows(config: pytest.Config) -> bool:
    """--lf narrowed this run to the last failures without deselecting the rest (the count
    _pytest/cacheprovider.py ``LFPlugin.pytest_collection_modifyitems`` keeps in
    ``_previously_failed_count``); False where this pytest keeps no such count."""
    lf = config.pluginmanager.get_plugin("lfplugin")
    return bool(config.getoption("lf", False) and getattr(lf, "_previously_failed_count", 0))


def capture_suspended(config: pytest.Config) -> contextlib.AbstractContextManager[Any]:
    """The output capture suspended, the run's and a test's ``capsys``, to write on the terminal
    while a test runs (_pytest/capture.py ``CaptureManager.global_and_fixture_disabled``); nothing
    suspended where this pytest has no such manager."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    suspend = getattr(capture, "global_and_fixture_disabled", None)
    return suspend() if callable(suspend) else contextlib.nullcontext()


def log_capture_handlers(item: pytest.Item) -> list[Any]:
    """The logging plugin's handlers that capture the current test's records (the ``caplog``
    fixture's and the report's), where this pytest has them: each a list ``records`` and a ``stream``."""
    plugin = item.config.pluginmanager.get_plugin("logging-plugin")
    handlers = [getattr(plugin, name, None) for name in ("caplog_handler", "report_handler")]
    return [
        h
        for h in handlers
        if isinstance(getattr(h, "records", None), list) and hasattr(getattr(h, "stream", None), "truncate")
    ]


def _holds(mark: Any) -> bool:
    conditions = (mark.kwargs["condition"],) if "condition" in mark.kwargs else mark.args
    return not conditions or any(bool(c) for c in conditions if not isinstance(c, str))
