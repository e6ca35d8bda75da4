"""The suite ledger's decisions (docs/design/ledger.md): from the readings taken between
tests, each test's line (what it left behind, what changed, what it compiled), which lines are
named and why, and the session's account at the end. Nothing here reads memory: the readings come
from readings.between, the explanations from measuring.ledger."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

from ..measuring.ledger import RAISED, Explanation, Holder, HostExplanation
from ..readings.between import Between


def fixture_owner(scope: str, name: str, baseid: str) -> str:
    """The ledger's owner key of a wider-scope fixture (never a test id: it has no "::" first)."""
    return f"{scope} fixture {name}" + (f" ({baseid})" if baseid else "")


def owner_of_fixture(scope: str, name: str, baseid: str) -> str | None:
    """Who owns what a fixture makes while it is set up: a fixture of a wider scope itself
    (fixture_owner); None for a function-scoped one, whose arrays are the test's."""
    return None if scope == "function" else fixture_owner(scope, name, baseid)


def outcome_after(outcome: str, when: str, failed: bool, skipped: bool, xfail: bool) -> str:
    """A test's outcome in the ledger after one more of its reports (``outcome``: after the reports
    before it; ``when``: "setup", "call" or "teardown"; ``xfail``: the report has ``wasxfail``): a
    call that raised as expected is xfailed (pytest keeps its traceback as a failure's), a call that
    failed failed, a setup or teardown that failed an error; skipped, or passed at its call, where
    no report before said otherwise."""
    if xfail and when == "call" and skipped:
        return "xfailed"
    if failed:
        return "failed" if when == "call" else "error"
    if skipped and not outcome:
        return "skipped"
    if when == "call" and not outcome:
        return "passed"
    return outcome


@dataclass(frozen=True)
class Line:
    """One test's line: what memory looked like after its teardown and what it left behind."""

    test: str
    index: int  # 1 for the first test of this process
    outcome: str  # passed, failed, skipped, error ("" where no report said)
    started: bool  # a backend was running after it; False: no device figures
    devices: dict[str, int] = field(default_factory=dict)  # device figure after it (bytes in use, or live arrays')
    stand_in: bool = False
    change: dict[str, int] = field(default_factory=dict)  # device figure less the last line's
    residue: int = 0  # bytes of live arrays the test made, alive after its teardown
    executables: int | None = None
    compiled: int = 0  # programs jax holds that were first seen after it
    rss: int | None = None
    fixtures: tuple[tuple[str, int], ...] = ()  # wider-scope fixtures it set up: (owner, bytes they made, alive)
    ended: tuple[tuple[str, int], ...] = ()  # wider-scope fixtures whose scope ended in it: (owner, bytes still alive)
    explanation: Explanation | None = None
    cleared: tuple[int, int] | None = None  # jax.clear_caches() after it: (programs, bytes on the devices) it freed
    # host memory (RSS) each step of the remedy then freed: jax.clear_caches(), gc.collect(), malloc_trim(0)
    cleared_host: tuple[int, int, int] | None = None
    peaks: dict[str, int] = field(default_factory=dict)  # where it raised the runtime's high-water mark: its peak
    outside: int = 0  # growth of device memory no live array holds (programs, the runtime's own); 0 on CPU
    # host memory (RSS) after it less before it (after the test before, or the remedy), less what fixtures_grew
    grew: int | None = None
    fixtures_grew: int = 0  # host memory the wider-scope fixtures it set up grew while set up: theirs
    kept_free: int | None = None  # for a test named for host memory: what glibc's allocator holds freed after it
    host_arrays: int = 0  # of its residue, the bytes on CPU devices: host memory
    host: HostExplanation | None = None  # why it grew host memory, for a test named for it
    backend_started: bool = False  # jax's backend started in it: its host growth is the runtime's own, once a process

    @property
    def left(self) -> int:
        """The residue a test is named for: what it made and left alive, less what only its failed
        traceback holds (pytest drops that when the next test starts)."""
        held = self.explanation.traceback if self.explanation is not None and self.outcome in RAISED else 0
        return max(0, self.residue - held)


def over(residue: int, threshold: int) -> bool:
    """Whether a residue is worth explaining (and, explained, naming): at or over the threshold; a
    threshold of 0 names nothing."""
    return threshold > 0 and residue >= threshold


@dataclass(frozen=True)
class MemoryTrigger:
    """--tpumem-clear-caches on memory: ``host:600MB``, ``host:60%`` (of the runner's limit, each
    pytest-xdist worker its share), ``device:80%`` (of a device's bytes_limit)."""

    what: str  # "host" or "device"
    size: int = 0  # bytes, or 0 where a share of a limit is given
    percent: int = 0  # 1 to 100, of the limit
    text: str = ""  # as it was spelled

    def __str__(self) -> str:
        return self.text or f"{self.what}:{self.size}B"

    def reached(self, used: int | None, limit: int | None) -> bool:
        """Whether ``used`` bytes reach the trigger (the size, or the share of ``limit``)."""
        if used is None:
            return False
        if self.size:
            return used >= self.size
        return limit is not None and limit > 0 and used * 100 >= self.percent * limit


WORKERS_LOOKS = "(each worker's last look)"  # the merged account's numpy arrays are new since each worker's look
CLIMB_WINDOW = 50  # the last tests a host memory climb's rate is taken over
CLIMB_SHARE = 5  # a climb is told once the run grew by this percent of the runner's limit or more


@dataclass(frozen=True)
class Climb:
    """Host memory climbing towards the runner's limit: its rate, and when it would reach it."""

    rate: float  # bytes a test, over the last ``over`` tests (least squares)
    over: int
    tests_left: int  # more tests at that rate to reach the limit from the last reading


def climb(rss: list[int], limit: int | None) -> Climb | None:
    """Whether host memory (``rss`` after each test, in run order) climbs towards ``limit``: it grew
    by CLIMB_SHARE% of the limit or more from the first test to the last, and still rises over the
    last CLIMB_WINDOW tests (the least-squares rate); None otherwise, or where no limit is known."""
    if not limit or len(rss) < 3 or (rss[-1] - rss[0]) * 100 < CLIMB_SHARE * limit:
        return None
    tail = rss[-CLIMB_WINDOW:]
    n = len(tail)
    mean_x, mean_y = (n - 1) / 2, sum(tail) / n
    rate = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(tail)) / sum((i - mean_x) ** 2 for i in range(n))
    if rate <= 0:
        return None
    return Climb(rate, n, max(0, int((limit - rss[-1]) // rate)))


def clear_now(
    setting: str | int | MemoryTrigger,
    module_ends: bool,
    programs: int | None,
    rss: int | None = None,
    host_limit: int | None = None,
    devices: dict[str, int] | None = None,
    device_limits: dict[str, int] | None = None,
) -> bool:
    """Whether --tpumem-clear-caches clears jax's caches after this test: every test, a module's
    last, when jax holds the setting's number of programs or more (never where none are listed),
    or when the process's host memory (``rss``) or a device's bytes in use reach the trigger."""
    if setting == "test":
        return True
    if setting == "module":
        return module_ends
    if isinstance(setting, MemoryTrigger):
        if setting.what == "host":
            return setting.reached(rss, host_limit)
        limits = device_limits or {}
        return any(setting.reached(n, limits.get(label)) for label, n in (devices or {}).items())
    return isinstance(setting, int) and programs is not None and programs >= setting


def remedy_freed(before: Any, after: Any, rss: list[int | None]) -> tuple[tuple[int, int], tuple[int, int, int] | None]:
    """What --tpumem-clear-caches freed, from the readings before and after it
    (readings.between.Between): the programs jax held and the devices' bytes; and the host memory
    each of its steps freed (``rss``: before it, then after each of jax.clear_caches(),
    gc.collect() and malloc_trim(0)), None where one of those was not read."""
    programs = (before.executables or 0) - (after.executables or 0)
    freed = sum(before.devices.values()) - sum(after.devices.values())
    read = [r for r in rss if r is not None]
    host = (read[0] - read[1], read[1] - read[2], read[2] - read[3]) if len(read) == len(rss) else None
    return (programs, freed), host


def host_share(limit: int, source: str, workers: str) -> tuple[int, str]:
    """A process's share of the runner's memory ``limit`` (read from ``source``): the kernel counts
    a cgroup's processes together, so each of ``workers`` pytest-xdist workers (their count as
    PYTEST_XDIST_WORKER_COUNT says it; "" outside a worker) gets its part."""
    if workers.isdecimal() and int(workers) > 1:
        return limit // int(workers), f"{source}, shared by {workers} pytest-xdist workers"
    return limit, source


def named(line: Line, threshold: int) -> bool:
    """Whether the summary names the test for what it left behind."""
    return over(line.left, threshold)


def host_named(line: Line, threshold: int) -> bool:
    """Whether the summary names the test for the host memory it grew (--tpumem-host-residue); not
    the test in which jax's backend started (the runtime and its compiler load once a process:
    told with the session's host memory instead)."""
    return line.grew is not None and not line.backend_started and over(line.grew, threshold)


PROGRAM_COST_TESTS = 3  # the tests a measured host cost of a program takes at least


def program_cost(lines: tuple[Line, ...] | list[Line], threshold: int) -> tuple[int, int] | None:
    """What a program jax compiled cost the process's host memory in this run, measured: the median
    over the tests that compiled programs and left neither arrays at the residue threshold nor
    numpy arrays a look found, of their host growth (less their jax arrays on CPU devices) a program; and how many tests it is taken
    over. None where fewer than PROGRAM_COST_TESTS such tests ran (the runtime does not say)."""
    each = [
        (line.grew - line.host_arrays) / line.compiled
        for line in lines
        if line.compiled > 0
        and line.grew is not None
        and not line.backend_started
        and not over(line.left, threshold)
        and not (line.host is not None and line.host.numpy)
    ]
    if len(each) < PROGRAM_COST_TESTS:
        return None
    return max(0, int(statistics.median(each))), len(each)


def unexplained_growth(lines: tuple[Line, ...] | list[Line], programs_held: int | None, threshold: int) -> int | None:
    """How much the process's host memory grew over the run beyond what explains it without a look
    at the heap: the backend's start and the programs jax holds at the end, at their measured cost
    (program_cost); None where the cost cannot be measured (a look decides)."""
    grew = [line.grew for line in lines if line.grew is not None]
    cost = program_cost(lines, threshold)
    if not grew or cost is None:
        return None
    started = sum(line.grew or 0 for line in lines if line.backend_started)
    return sum(grew) - started - cost[0] * (programs_held or 0)


def end_look_wanted(
    lines: tuple[Line, ...] | list[Line], programs_held: int | None, threshold: int, host_threshold: int
) -> bool:
    """Whether the end's look at the heap for numpy arrays the run left may find what
    --tpumem-host-residue names: the run grew host memory by the threshold beyond what the backend's
    start and its programs explain, or that cannot be said. About 0.1 s per 100,000 objects,
    spared where it cannot find anything to name."""
    if host_threshold <= 0 or not lines:
        return False
    rest = unexplained_growth(lines, programs_held, threshold)
    return rest is None or rest >= host_threshold


def line_of(
    test: str,
    index: int,
    outcome: str,
    reading: Any,
    last: Any,
    fixtures: tuple[tuple[str, int], ...] = (),
    ended: tuple[tuple[str, int], ...] = (),
    explanation: Explanation | None = None,
    compiled: dict[Any, int] | None = None,
    host: HostExplanation | None = None,
) -> Line:
    """The line of ``test`` from the reading after it (readings.between.Between) and the one before;
    ``compiled``: the programs first seen at its readings, by line (else the reading's)."""
    change, peaks, outside = _since(reading, last)
    return Line(
        test=test,
        index=index,
        outcome=outcome,
        started=reading.started,
        devices=dict(reading.devices),
        stand_in=reading.stand_in,
        change=change,
        residue=reading.owned.get(test, 0),
        executables=reading.executables,
        compiled=sum((reading.compiled if compiled is None else compiled).values()),
        rss=reading.rss,
        fixtures=fixtures,
        ended=ended,
        explanation=explanation,
        peaks=peaks,
        outside=outside,
        grew=_change(reading.rss, last.rss if last is not None else None),
        host_arrays=sum(n for label, n in reading.owned_on.get(test, {}).items() if label.split(":")[0] == "cpu"),
        host=host,
        backend_started=reading.started and not (last is not None and last.started),
    )


def _since(reading: Any, last: Any) -> tuple[dict[str, int], dict[str, int], int]:
    """What ``reading`` says changed since ``last``, where the backend has started (else nothing):
    each device's bytes, the peaks of the devices whose high-water mark rose, and the bytes outside."""
    if not reading.started:
        return {}, {}, 0
    before, marks, outside = (
        (last.devices, last.peaks, last.outside) if last is not None and last.started else ({}, {}, 0)
    )
    change = {label: n - before.get(label, 0) for label, n in reading.devices.items()}
    # the high-water mark rose while it ran (setup and teardown included): the new mark is its peak, exactly
    peaks = {label: n for label, n in reading.peaks.items() if n > marks.get(label, -1)}
    return change, peaks, reading.outside - outside


def _change(now: int | None, before: int | None) -> int | None:
    return now - before if now is not None and before is not None else None


@dataclass(frozen=True)
class Pattern:
    """Arrays, or programs, alive at the end that several tests left from one line of code."""

    site: Any  # readings.frames.Frame
    tests: int  # how many tests left them
    nbytes: int = 0  # arrays: their bytes alive at the end
    programs: int = 0  # programs: how many jax holds at the end


@dataclass(frozen=True)
class Session:
    """The ledger of one process's run, told at the end."""

    first: Any  # the reading before the first test (readings.between.Between), None where no test ran
    last: Any  # the reading at the end
    lines: tuple[Line, ...]
    threshold: int
    bytes_limit: dict[str, int] = field(default_factory=dict)  # per device, where the runtime reports it
    patterns: tuple[Pattern, ...] = ()
    fixtures_ended: tuple[tuple[str, int], ...] = ()  # wider-scope fixtures whose scope ended: bytes still alive
    fixture_holds: tuple[tuple[str, tuple[Holder, ...]], ...] = ()  # fixtures holding the threshold or more, by path
    after_gc: dict[str, int] = field(default_factory=dict)  # owner -> bytes alive at the end after gc.collect()
    remedy: str = ""  # --tpumem-clear-caches as set ("host:60%"), "" where off
    host_limit: tuple[int, str] | None = None  # the process's share of the runner's memory limit, where read from
    host_threshold: int = 0  # --tpumem-host-residue: a test that grew host memory this much is named
    host_end: HostExplanation | None = None  # the numpy arrays alive at the end that no look saw, by keeper

    def host_kept(self) -> list[Any]:
        """The keepers of numpy arrays the run made (since the last look) holding --tpumem-host-residue
        or more at the end: what many tests, each under the threshold, kept in one place."""
        if self.host_end is None:
            return []
        return [a for a in self.host_end.numpy if over(a.nbytes, self.host_threshold)]

    def host_worst(self, top: int) -> list[Line]:
        """The tests named for the host memory they grew, the most first (run order among equals)."""
        lines = [line for line in self.lines if host_named(line, self.host_threshold)]
        return sorted(lines, key=lambda line: -(line.grew or 0))[: max(top, 0)]

    def host_named_count(self) -> int:
        return sum(1 for line in self.lines if host_named(line, self.host_threshold))

    def backend_start(self) -> Line | None:
        """The test in which jax's backend started, where one did and its host growth was read."""
        return next((line for line in self.lines if line.backend_started and line.grew is not None), None)

    def worst(self, top: int) -> list[Line]:
        """The named lines, the most left behind first (run order among equals)."""
        lines = [line for line in self.lines if named(line, self.threshold)]
        return sorted(lines, key=lambda line: -line.left)[: max(top, 0)]

    def named_count(self) -> int:
        return sum(1 for line in self.lines if named(line, self.threshold))

    def cleared(self) -> tuple[int, int, int]:
        """How often jax.clear_caches() ran between tests, and the programs and device bytes it freed."""
        done = [line.cleared for line in self.lines if line.cleared is not None]
        return len(done), sum(c[0] for c in done), sum(c[1] for c in done)

    def cleared_host(self) -> tuple[int, int, int] | None:
        """The host memory each step of the remedy freed, over the run (clear_caches, gc, trim)."""
        done = [line.cleared_host for line in self.lines if line.cleared_host is not None]
        if not done:
            return None
        return sum(c[0] for c in done), sum(c[1] for c in done), sum(c[2] for c in done)

    def grew_outside(self, top: int) -> list[Line]:
        """The tests after which device memory that no live array holds grew by the threshold or more."""
        lines = [line for line in self.lines if over(line.outside, self.threshold)]
        return sorted(lines, key=lambda line: -line.outside)[: max(top, 0)]

    def highest(self, top: int) -> list[Line]:
        """The tests whose peak is known (they raised the runtime's high-water mark), the highest first."""
        known = [line for line in self.lines if line.peaks]
        return sorted(known, key=lambda line: -max(line.peaks.values()))[: max(top, 0)]

    def kept_by_tracebacks(self) -> list[Line]:
        """Failed tests whose traceback kept the threshold or more of their arrays after their teardown."""
        return [
            line
            for line in self.lines
            if line.outcome in RAISED
            and line.explanation is not None
            and over(line.explanation.traceback, self.threshold)
        ]

    def alive_at_end(self, test: str) -> int:
        """Bytes of the arrays ``test`` made that were still alive at the end."""
        return self.last.owned.get(test, 0) if self.last is not None else 0


PATTERN_SHARE = 0.25  # a line whose programs are this share of all jax holds at the end is a pattern


def patterns(
    made_at_end: list[tuple[Any, str, int]],
    programs_by_test: dict[Any, set[str]],
    held_programs: dict[Any, int],
    threshold: int,
) -> tuple[Pattern, ...]:
    """Lines of code that several tests left arrays or programs from, alive at the end: from
    ``made_at_end`` ((site, test, bytes) of each test-made array alive at the end),
    ``programs_by_test`` (site -> the tests that compiled programs there) and ``held_programs``
    (site -> programs held at the end). Arrays: a line two tests or more left, whose arrays add up
    to ``threshold`` (the residue that names a test) or more. Programs: a line two tests or more
    compiled at, holding a quarter or more of all the programs jax holds (a suite's parametrized
    tests each compile a few; a line that fills the caches is the one to name). The arrays'
    patterns first, then the programs', each largest first."""
    by_site: dict[Any, tuple[set[str], int]] = {}
    for site, test, nbytes in made_at_end:
        tests, total = by_site.get(site, (set(), 0))
        tests.add(test)
        by_site[site] = (tests, total + nbytes)
    arrays = [
        Pattern(site, len(t), nbytes)
        for site, (t, nbytes) in by_site.items()
        if site is not None and len(t) >= 2 and over(nbytes, threshold)
    ]
    held = sum(held_programs.values())
    programs = [
        Pattern(site, len(programs_by_test[site]), programs=n)
        for site, n in held_programs.items()
        if site is not None and n and len(programs_by_test.get(site, ())) >= 2 and n >= PATTERN_SHARE * held
    ]
    return tuple(sorted(arrays, key=lambda p: (-p.nbytes, str(p.site)))) + tuple(
        sorted(programs, key=lambda p: (-p.programs, str(p.site)))
    )


@dataclass(frozen=True)
class Account:
    """The ledger of a pytest-xdist run, told once by the controller (account()): each worker's
    session (a crashed worker's rebuilt from its flight recorder), and one session of every
    worker's lines (``merged``), whose named tests, peaks, patterns and fixtures are over all."""

    workers: dict[str, Session]  # worker id -> its session
    counts: dict[str, int]  # worker id -> tests it read (those read before any backend started included)
    crashed: dict[str, str]  # worker id -> the test it died in
    merged: Session
    worker_of: dict[str, str]  # test id -> the worker that ran it

    def fate(self, test: str) -> str | None:
        """The crashed worker of ``test``, whose end was never read (None: its worker ended)."""
        worker = self.worker_of.get(test)
        return worker if worker in self.crashed else None


def account(
    workers: dict[str, Session],
    counts: dict[str, int],
    crashed: dict[str, str],
    made_at_end: list[tuple[Any, str, int]],
    programs_by_test: dict[Any, set[str]],
    held_programs: dict[Any, int],
    threshold: int,
    host_threshold: int = 0,
) -> Account:
    """One account of the workers' sessions: their lines in one session, each worker's in the order
    it ran them (workers by id); the patterns decided over the ingredients of every worker
    (patterns(): a line of code two tests left arrays from counts whichever worker ran them); a
    wider-scope fixture named with its worker (each worker sets up its own); what is alive at the
    end, each test's own."""
    lines: list[Line] = []
    worker_of: dict[str, str] = {}
    alive: dict[str, int] = {}
    after_gc: dict[str, int] = {}
    ended: list[tuple[str, int]] = []
    holds: list[tuple[str, tuple[Holder, ...]]] = []
    kept: list[Any] = []
    for worker in sorted(workers, key=worker_order):
        session = workers[worker]
        if session.host_end is not None:
            kept += [
                dataclasses.replace(a, keeper=f"{a.keeper or 'a keeper not found'} on {worker}")
                for a in session.host_end.numpy
            ]
        lines += session.lines
        worker_of.update((line.test, worker) for line in session.lines)
        if session.last is not None:
            alive.update((test, n) for test, n in session.last.owned.items() if n)
        after_gc.update(session.after_gc)
        ended += [(f"{owner} on {worker}", n) for owner, n in session.fixtures_ended]
        holds += [(f"{owner} on {worker}", h) for owner, h in session.fixture_holds]

    merged = Session(
        first=None,
        last=Between(True, owned=alive),
        lines=tuple(lines),
        threshold=threshold,
        patterns=patterns(made_at_end, programs_by_test, held_programs, threshold),
        fixtures_ended=tuple(ended),
        fixture_holds=tuple(holds),
        after_gc=after_gc,
        host_threshold=host_threshold,
        host_end=HostExplanation(tuple(sorted(kept, key=lambda a: -a.nbytes)), WORKERS_LOOKS) if kept else None,
    )
    return Account(dict(workers), dict(counts), dict(crashed), merged, worker_of)


def worker_order(worker: str) -> tuple[int, str]:
    """gw2 before gw10."""
    digits = worker.lstrip("gw")
    return (int(digits), worker) if digits.isdecimal() else (-1, worker)
