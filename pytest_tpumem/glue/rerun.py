"""Running a test's body again for its leak check, as pytest would run it once.

What pytest keeps per test would pile up across runs, and is put back before each run as it
was when the call began, so each run sees (and the report shows) one run's worth, the last one's:

- the log capture's records (``caplog`` and the report's): a test that logs an exception with its
  traceback on each run would otherwise "grow" by them;
- ``item.user_properties`` (``record_property``, and the JUnit XML properties made of them);
- the ``recwarn`` fixture's warnings.

A unittest.TestCase method gets its ``tearDown``, cleanups and ``setUp`` between runs, as unittest
runs each test: mocks and patches made in ``setUp`` are fresh for every run.

A test that passes its first run and raises on a later one is not re-runnable (state kept between
runs). Under a marker it fails with one line saying so, and how to exempt it; under the sweep it
keeps its first run's pass, with a warning saying it could not be leak-checked.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable
from typing import Any

import pytest

from ..decisions.oom import is_oom
from ..telling.run import not_rerunnable
from .pytestcompat import fixture_value_of, log_capture_handlers

_PASSED_THROUGH = (pytest.skip.Exception, pytest.xfail.Exception, unittest.SkipTest)


class _PerTest:
    """What pytest keeps for the test during its call, marked where the call began."""

    def __init__(self, item: pytest.Item):
        self.handlers = [(h, len(h.records), h.stream, h.stream.tell()) for h in log_capture_handlers(item)]
        self.item = item
        self.properties = len(item.user_properties)

    def reset(self) -> None:
        for handler, length, stream, position in self.handlers:
            del handler.records[length:]
            now = handler.stream  # caplog.clear() gives the handler a new, empty stream
            now.seek(position if now is stream else 0)
            now.truncate()
        del self.item.user_properties[self.properties :]
        recwarn = fixture_value_of(self.item, "recwarn")
        if recwarn is not None and hasattr(recwarn, "clear"):
            recwarn.clear()


class Reruns:
    """``call`` wrapped for check_leaks: counts the runs, runs ``between`` (unittest's tearDown,
    cleanups and setUp) and puts back what pytest keeps per test before each run after the first,
    and says the not-re-runnable line for an error of a later run (``not_rerunnable()``, called by
    the caller in its except block). ``after_first`` is called once the first run has returned or
    raised: the test's peak is measured on that run, as without a leak check."""

    def __init__(
        self,
        item: pytest.Item,
        call: Callable[[], Any],
        total: int,
        between: Callable[[], Any] | None = None,
        after_first: Callable[[], Any] | None = None,
    ):
        self.item, self.call, self.total, self.between, self.after_first = item, call, total, between, after_first
        self.runs = 0
        self.kept = _PerTest(item)
        self.raised: BaseException | None = None  # what the test's own code raised: anything else is the plugin's
        self._prepared = False  # before_run() ran for the next run

    def before_run(self) -> None:
        """Before a run after the first: unittest's tearDown and setUp, and what pytest keeps per
        test put back. measuring.leak calls it before it watches the run (``before_run`` of the
        function it runs), so that what they run is not taken for the body's programs."""
        if self.runs >= 1 and not self._prepared:
            if self.between is not None:
                self.between()
            self.kept.reset()
            self._prepared = True

    def __call__(self) -> Any:
        self.before_run()
        self._prepared = False
        self.runs += 1
        if self.runs == 1 and self.after_first is not None:
            try:
                return self._run()
            finally:
                self.after_first()
        return self._run()

    def _run(self) -> Any:
        try:
            return self.call()
        except BaseException as e:
            self.raised = e
            raise

    def by_the_plugin(self, error: BaseException) -> bool:
        """``error`` was raised by the plugin's own measuring, not by a run of the test."""
        return error is not self.raised and isinstance(error, Exception) and not isinstance(error, _PASSED_THROUGH)

    def not_rerunnable(self, error: BaseException) -> str | None:
        """Where ``error`` came from a run after a passed first one: the line saying the test
        cannot be re-run. None otherwise (the test's own failure, a skip, an out-of-memory: the
        caller re-raises it)."""
        if (
            error is not self.raised
            or self.runs <= 1
            or not isinstance(error, (Exception, pytest.fail.Exception))
            or isinstance(error, _PASSED_THROUGH)
            or is_oom(error)
        ):
            return None
        return not_rerunnable(self.item.name, self.runs, self.total, error)


def unittest_between(method: Any) -> Callable[[], None] | None:
    """For a unittest.TestCase method: what unittest does between two tests of its instance
    (tearDown, the cleanups, setUp), to run between two runs of it. None for anything else."""
    instance = getattr(method, "__self__", None)
    if not isinstance(instance, unittest.TestCase):
        return None

    def between() -> None:
        instance.tearDown()
        instance.doCleanups()
        instance.setUp()

    return between
