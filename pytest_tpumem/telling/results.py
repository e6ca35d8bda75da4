"""What a check's result is, told: ``message`` (the failure text at pytest's verbosity; empty where
the check passed, one line saying so for a clean leak check), ``section`` (the long form, for the
test's report section) and ``row`` (a JSON-able record: bytes as integers, the verdict as its text).

Each check's result (decisions/) is plain frozen data; its words are in the module of its own
check here (budget, target, leak, oom), found by the result's type."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..decisions.budget import BudgetResult
from ..decisions.leak import LeakReport
from ..decisions.oom import OomResult
from ..decisions.target import TargetResult
from . import budget, leak, oom, target
from .words import escaped

Result = BudgetResult | TargetResult | LeakReport | OomResult  # a check's result


@functools.singledispatch
def message(result: Result, verbosity: int = 0) -> str:
    """The failure text of ``result``; ``verbosity`` as pytest's (-q below 0 shorter, -v above 0 longer)."""
    raise TypeError(f"not a pytest-tpumem result: {result!r}")


@functools.singledispatch
def section(result: Result) -> str:
    """The long form of ``result``, for the test's report section."""
    raise TypeError(f"not a pytest-tpumem result: {result!r}")


@functools.singledispatch
def row(result: Result) -> dict[str, Any]:
    """``result`` as a JSON-able record for the summary and the JSON report."""
    raise TypeError(f"not a pytest-tpumem result: {result!r}")


def _shown(words: Callable[..., str]) -> Callable[..., str]:
    """``words`` (a check's message or section) with its text escaped for the terminal (a test id,
    a file name or an error's text may hold control characters): lines stay lines."""

    @functools.wraps(words)
    def shown(result: Result, *args: int) -> str:
        return escaped(words(result, *args), keep="\n")

    return shown


for _type, _module in ((BudgetResult, budget), (TargetResult, target), (LeakReport, leak), (OomResult, oom)):
    message.register(_type, _shown(_module.message))
    section.register(_type, _shown(_module.section))
    row.register(_type, _module.row)
