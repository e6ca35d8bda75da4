"""How the glue fails a test: one clean line, no traceback, no chained "During handling" block."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest


def fail(message: str) -> NoReturn:
    """Fail the current test with ``message`` alone; safe to call inside an except block."""
    raise pytest.fail.Exception(message, pytrace=False) from None


class LeakFailure(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """The failure a leak check raises; ``.report`` is the LeakReport."""

    def __init__(self, report: Any, verbosity: int = 0):
        from ..telling.results import message

        super().__init__(message(report, verbosity), pytrace=False)
        self.report = report


LeakFailure.__module__ = "builtins"  # as pytest does for Failed: "LeakFailure: ..." in the short summary


class PluginError(RuntimeError):
    """An exception raised by the plugin's own measuring, chained to it: the test fails saying so,
    never as if its code had raised (telling.run.plugin_error)."""
