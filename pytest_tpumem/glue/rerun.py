"""Running a test's body again for its leak check, as pytest would run it once.

Two things differ from a plain run and are set right here:

- pytest's log capture keeps every record of the call phase (for ``caplog`` and for the report).
  Across re-runs those records pile up -- a test that logs an exception with its traceback on each
  run would "grow" by them. Before each run the capture is put back as it was when the call began,
  so each run sees (and the report shows) one run's records, the last one's.
- A test that passes its first run and raises on a later one is not re-runnable (state kept
  between runs); it fails with one line saying so, and how to exempt it, not with its later error.
"""

from __future__ import annotations

import unittest
from typing import Any, Callable

import pytest

from ..telling import text
from .failures import fail

_PASSED_THROUGH = (pytest.skip.Exception, pytest.xfail.Exception, unittest.SkipTest)


class _LogCapture:
    """pytest's call-phase log handlers (the logging plugin's), marked where the call began."""

    def __init__(self, config: pytest.Config):
        plugin = config.pluginmanager.get_plugin("logging-plugin")
        self.handlers = []
        for name in ("caplog_handler", "report_handler"):
            handler = getattr(plugin, name, None)
            records, stream = getattr(handler, "records", None), getattr(handler, "stream", None)
            if isinstance(records, list) and hasattr(stream, "truncate"):
                self.handlers.append((records, len(records), stream, stream.tell()))

    def reset(self) -> None:
        for records, length, stream, position in self.handlers:
            del records[length:]
            stream.seek(position)
            stream.truncate()


class Reruns:
    """``call`` wrapped for check_leaks: counts the runs, resets the log capture before each run
    after the first, and turns an error of a later run into the not-re-runnable failure (via
    ``failure()``, called by the caller in its except block)."""

    def __init__(self, item: pytest.Item, call: Callable[[], Any], total: int):
        self.item, self.call, self.total = item, call, total
        self.runs = 0
        self.logs = _LogCapture(item.config)

    def __call__(self) -> Any:
        self.runs += 1
        if self.runs > 1:
            self.logs.reset()
        return self.call()

    def failure(self, error: BaseException) -> None:
        """Where ``error`` came from a run after a passed first one, fail the test saying it is not
        re-runnable; otherwise return (the caller re-raises: the test's own failure, a skip, an
        out-of-memory)."""
        from ..decisions.oom import is_oom

        if self.runs <= 1 or not isinstance(error, (Exception, pytest.fail.Exception)) or isinstance(error, _PASSED_THROUGH) or is_oom(error):
            return
        fail(text.not_rerunnable(self.item.name, self.runs, self.total, error))
