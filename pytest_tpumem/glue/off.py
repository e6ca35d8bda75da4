"""While pytest-tpumem is off: one line where the suite has markers that then do nothing.

A CI job that lost ``--tpumem`` disables every budget and leak gate; without this it would say
nothing. Reads the marker names each test's report carries (no jax)."""

from __future__ import annotations

from typing import Any

import pytest

MARKERS = ("max_hbm", "leak_check")


class Off:
    """Registered by the plugin only when it is off."""

    def __init__(self) -> None:
        self.marked: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A report's keywords hold its markers' names, under pytest-xdist's controller too.
        if report.when == "call" and any(m in report.keywords for m in MARKERS):
            self.marked.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.marked:
            from ..telling.run import markers_inert

            terminalreporter.write_line(markers_inert(len(self.marked)), yellow=True)
