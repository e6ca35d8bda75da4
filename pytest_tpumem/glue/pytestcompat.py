"""pytest's private parts the plugin uses, each behind one function here (as readings/jaxcompat.py
does for jax), with a fallback where a pytest lacks them."""

from __future__ import annotations

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
