"""How the glue fails a test: one clean line, no traceback, no chained "During handling" block."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, NoReturn

import pytest

from ..telling.results import message

if TYPE_CHECKING:
    from ..decisions.leak import LeakReport


def fail(message: str) -> NoReturn:
    """Fail the current test with ``message`` alone; safe to call inside an except block."""
    raise pytest.fail.Exception(message, pytrace=False) from None


class LeakFailure(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """The failure a leak check raises; ``.report`` is the LeakReport."""

    def __init__(self, report: LeakReport, verbosity: int = 0):
        super().__init__(message(report, verbosity), pytrace=False)
        self.report = report


LeakFailure.__module__ = "builtins"  # as pytest does for Failed: "LeakFailure: ..." in the short summary


class PluginError(RuntimeError):
    """An exception raised by the plugin's own measuring, chained to it: the test fails saying so,
    never as if its code had raised (telling.run.plugin_error)."""


class TpumemWarning(pytest.PytestWarning):
    """What the plugin says of a test without failing it: a test the sweep could not re-run, a
    moment only the sampler saw. ``filterwarnings = ignore::pytest_tpumem.TpumemWarning`` hides them."""

    __module__ = "pytest_tpumem"


def warn(item: pytest.Item, message: str) -> None:
    """Say ``message`` of ``item`` as a warning in pytest's summary, never as the test's failure:
    where ``filterwarnings = error`` (or ``-W error``) turns warnings into errors, it is shown
    instead of raised (the verdict is the plugin's to give, and it gave none); where the filters
    ignore it, it is ignored."""
    warning = TpumemWarning(message)
    try:
        item.warn(warning)
    except Warning:
        with warnings.catch_warnings():
            warnings.simplefilter("always", TpumemWarning)
            item.warn(warning)
