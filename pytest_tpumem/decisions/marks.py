"""A run's high-water marks, from its report: each device's largest peak over its tests, and the
most host memory (RSS) the runner's process held. Told in the job summary (telling.github) and
charted over commits (telling.benchmark), with each leak-checked test's device growth."""

from __future__ import annotations

from dataclasses import dataclass

from .entry import Entry, Report


@dataclass(frozen=True)
class Mark:
    """The most a device (or the host) held, and the test it was read in or after."""

    where: str  # "cpu:0", "host RSS"
    bytes: int
    nodeid: str
    after: bool = False  # read after the test (the suite ledger), not during it


def device_marks(report: Report) -> list[Mark]:
    """Each device's largest peak over the report's tests, by device; a tie goes to the test first
    by id. A device no test used (every peak 0: a leak check's second CPU device) has none."""
    best: dict[str, Mark] = {}
    for nodeid, entry in sorted(report.tests.items()):
        for device, peak in entry.peaks.items():
            if peak > 0 and (device not in best or peak > best[device].bytes):
                best[device] = Mark(device, peak, nodeid)
    return [best[device] for device in sorted(best)]


def host_mark(report: Report) -> Mark | None:
    """The most host RSS read: after a test, where the suite ledger read it, else during a test
    (the largest host peak a check read); None where neither was read. A tie goes to the test
    first by id."""
    lines = report.ledger.tests if report.ledger is not None else {}
    after = [
        Mark("host RSS", line["host"]["rss"], nodeid, after=True)
        for nodeid, line in sorted(lines.items())
        if isinstance(line.get("host"), dict) and type(line["host"].get("rss")) is int
    ]
    during = [
        Mark("host RSS", entry.host_peak, nodeid)
        for nodeid, entry in sorted(report.tests.items())
        if entry.host_peak is not None
    ]
    found = after or during
    return max(found, key=lambda m: m.bytes) if found else None


def device_growth(entry: Entry) -> int | None:
    """The largest growth per iteration among a test's leak checks' device series (live arrays or
    the runtime's bytes in use), 0 at the least; None where it had no leak check. Host series are
    left out: what the process's heap grows by moves from run to run (tens of kB), where a
    device's series of the same code does not."""
    growths = [
        series.get("growth")
        for check in entry.checks
        if check.get("check") == "leak"
        for series in (check.get("series") or {}).values()
        if isinstance(series, dict) and series.get("device") != "host"
    ]
    found = [g for g in growths if type(g) is int]
    if not found:
        return None
    return max(0, *found)
