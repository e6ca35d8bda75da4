"""The checks as a user calls them without pytest, each giving a result and its words::

    from pytest_tpumem import check_leaks, message
    report = check_leaks(train_step, state, batch, iterations=3, threshold="100MB")
    print(message(report))

``check_leaks`` is ``decisions.leak.check_leaks`` with ``raise_on_leak``; ``message(result,
verbosity=0)`` and ``section(result)`` are telling.results' (every result is plain data)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .decisions import leak
from .decisions.leak import LeakError, LeakReport
from .telling.results import message, section

__all__ = ["LeakError", "check_leaks", "message", "section"]


def check_leaks(fn: Callable[..., Any], *args: Any, raise_on_leak: bool = False, **kwargs: Any) -> LeakReport:
    report = leak.check_leaks(fn, *args, **kwargs)
    if raise_on_leak and report.leaking:
        raise LeakError(report, message(report))
    return report


check_leaks.__doc__ = (leak.check_leaks.__doc__ or "") + (
    "\n    ``raise_on_leak``: raise LeakError (an AssertionError carrying the report, its text the\n"
    "    failure text) where the check leaks, instead of returning the report.\n"
)
_inner = inspect.signature(leak.check_leaks)
_params = list(_inner.parameters.values())
_params.insert(-1, inspect.Parameter("raise_on_leak", inspect.Parameter.KEYWORD_ONLY, default=False, annotation="bool"))
check_leaks.__signature__ = _inner.replace(parameters=_params)  # type: ignore[attr-defined]
