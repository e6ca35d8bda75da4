"""The suite ledger's part of the active plugin (docs/design/ledger.md): one reading
after every test's teardown (and its function-scoped fixtures' release), two around the setup of
each fixture of a wider scope, the line of each test kept and appended to the flight recorder, the
lines at or over the residue threshold explained, and the session told at the end. In a
pytest-xdist worker the ledger is told by the controller; when a worker crashes, the controller
adds the test it died in and that worker's last readings, from its flight recorder, to the report."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .. import defaults
from ..decisions.entry import LedgerTests
from ..decisions.ledger import (
    Line,
    Session,
    clear_now,
    end_look_wanted,
    host_named,
    host_share,
    line_of,
    outcome_after,
    over,
    owner_of_fixture,
    patterns,
    remedy_freed,
    worker_order,
)
from ..measuring.ledger import BEFORE_TESTS, NumpyLooks, explain, fixture_holds, made_at_end, module_values
from ..readings.between import Between, BetweenTests
from ..readings.host import host_rss, malloc_figures, oom_kills, runner_limit, trim_host
from ..readings.keepers import Budget
from ..telling.files import Appended, write_atomic
from ..telling.ledger import (
    account_lines,
    account_of,
    another_runs,
    crash_lines,
    end_record,
    line_record,
    picture_beside,
    picture_not_written,
    picture_written,
    read_recorder,
    recorded_tests,
    recorder_header,
    recorder_not_written,
    recorder_replaced,
    report_record,
    session_lines,
    session_record,
)
from ..telling.svg import session_picture
from ..telling.words import escaped
from .active import devices
from .options import Settings
from .pytestcompat import fixture_location, fixture_value, fixture_value_of

if TYPE_CHECKING:
    from ..decisions.ledger import Account
    from ..measuring.ledger import Holder
    from ..readings.frames import Frame

LEDGER_SESSION = "tpumem_ledger_session"  # pytest-xdist workeroutput key: the worker's session (session_record)
LEDGER_SAID = "tpumem_ledger_said"  # pytest-xdist workeroutput key: the worker's picture and write errors
LEDGER_TESTS = "tpumem_ledger_tests"  # pytest-xdist workeroutput key: the worker's tests (report_record)


def recorder_path(config: pytest.Config, settings: Settings) -> str | None:
    """This process's flight recorder: --tpumem-ledger (a pytest-xdist worker's named with its id),
    else in pytest's cache directory (.pytest_cache/d/tpumem/ledger.jsonl), else, where pytest's
    cache is off (-p no:cacheprovider), in the system's temporary directory, one per rootdir
    (default_recorder); None where it is off, or no directory can be had."""
    path = settings.ledger_path
    if path == "off":
        return None
    if path is None:
        path = default_recorder(config)
        if path is None:
            return None
    worker = worker_id(config)
    return worker_path(path, worker) if worker else path


def default_recorder(config: pytest.Config) -> str | None:
    """The flight recorder where --tpumem-ledger names none: in pytest's cache, else
    ``$TMPDIR/pytest-tpumem-of-UID/ROOT/ledger.jsonl`` (ROOT: 12 hex digits of the rootdir's
    hash, so that each project has its own; the directory is this user's alone, as pytest's
    basetemp is). None where neither can be made."""
    cache = getattr(config, "cache", None)
    try:
        if cache is not None:
            return str(cache.mkdir("tpumem") / "ledger.jsonl")
        return os.path.join(_private_temp(str(config.rootpath)), "ledger.jsonl")
    except OSError:
        return None


def _private_temp(rootdir: str) -> str:
    """This user's directory of the rootdir's recorder under the system's temporary directory;
    OSError where the user's directory is not theirs alone (another user could plant a link)."""
    uid = os.getuid()
    mine = os.path.join(tempfile.gettempdir(), f"pytest-tpumem-of-{uid}")
    os.makedirs(mine, mode=0o700, exist_ok=True)
    st = os.lstat(mine)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise NotADirectoryError(f"{mine} is not this user's directory")
    where = os.path.join(mine, hashlib.sha1(rootdir.encode()).hexdigest()[:12])
    os.makedirs(where, mode=0o700, exist_ok=True)
    return where


def worker_id(config: pytest.Config) -> str:
    """The pytest-xdist worker's id ("gw1"), "" outside a worker."""
    return str(getattr(config, "workerinput", {}).get("workerid", ""))


def run_id(config: pytest.Config) -> str | None:
    """pytest-xdist's id of the run, which the controller and its workers share (None outside a
    worker): a worker's recorder says it, so that the controller reads its own run's."""
    run = getattr(config, "workerinput", {}).get("testrunuid")
    return str(run) if run else None


def worker_path(path: str, worker: str) -> str:
    """``ledger.jsonl`` -> ``ledger.gw1.jsonl``."""
    root, ext = os.path.splitext(path)
    return f"{root}.{worker}{ext or '.jsonl'}"


def picture_path(config: pytest.Config, settings: Settings) -> str | None:
    """The session's picture: beside --tpumem-json (``report.json`` -> ``report.ledger.svg``),
    else beside the flight recorder (``ledger.svg``); a pytest-xdist worker's named with its id
    (each process's memory is its own). None where neither is written."""
    recorder = recorder_path(config, settings) if settings.json_path is None else None
    return picture_beside(settings.json_path, recorder, worker_id(config))


LEDGER: pytest.StashKey[Ledger] = pytest.StashKey()  # config.stash[LEDGER]: the run's suite ledger, where not blocked


class FlightRecorder:
    """The ledger appended to a file, a JSON object a line, flushed after each (no fsync: a process
    killed by the kernel or os._exit keeps what was flushed, a machine that loses power may not).
    The file is this run's own (telling.files.Appended): two runs of one project at once never
    write into one file; the path names the last to start, and the other says so at its end."""

    def __init__(self, path: str, header: dict[str, Any]):
        self.path = path
        self._dumps = json.dumps
        self._file = Appended(path, self._line(header))

    def _line(self, record: dict[str, Any]) -> bytes:
        return (self._dumps(record, separators=(",", ":")) + "\n").encode()

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(self._line(record))

    def replaced(self) -> bool:
        return self._file.replaced()

    def close(self) -> None:
        self._file.close()


class Ledger:
    """Reads between tests and keeps each test's line (registered under --tpumem); reached through
    ``config.stash[LEDGER]``."""

    def __init__(self, config: pytest.Config, settings: Settings):
        self.config = config
        self.settings = settings
        self.threshold = settings.residue
        self.host_threshold = settings.host_residue

        # the numpy arrays seen alive at the last look (a test named for host memory is explained with the new ones)
        self.looks = NumpyLooks(defaults.HOST_ARRAY_MIN) if self.host_threshold else None

        self.walks = Budget()  # the run's time for walks of the heap and of referrers
        self.reader = BetweenTests(lambda: devices(config))  # asked only once a backend runs
        self.first: Between | None = None  # the reading before the first test
        self.last: Between | None = None  # the last reading
        self.lines: list[Line] = []
        self.current: str | None = None  # the test running now
        self.outcome = ""
        self.set_up: list[str] = []  # wider-scope fixtures the running test set up
        self.fixtures_grew = 0  # host memory the wider-scope fixtures it set up grew while set up
        self.ended: list[str] = []  # wider-scope fixtures whose scope ended in the running test
        self.active: dict[str, pytest.FixtureDef[Any]] = {}  # wider-scope fixtures alive: owner -> FixtureDef
        self.fixture_bytes: dict[str, int] = {}  # owner -> bytes of arrays it made, alive after its setup
        # owner -> what its value holds, by path (over the threshold)
        self.fixture_holds: dict[str, tuple[Holder, ...]] = {}
        self.fixtures_ended: dict[str, int] = {}  # owner -> bytes of what it made alive after its scope ended
        self.compiled_sites: dict[Frame | None, set[str]] = {}  # site -> the tests that compiled programs there
        self._compiled_now: dict[Frame | None, int] = {}  # programs the running test compiled, seen at its readings
        self.session: Session | None = None
        self._benchmark: Any = None  # the running test's pytest-benchmark fixture
        self.recorder: FlightRecorder | None = None
        self.write_errors: list[str] = []  # the flight recorder's or the picture's: said, never a test's failure
        self.picture: str | None = None  # the session's picture, where it was written
        self.crashed: list[dict[str, Any]] = []  # the same, for the JSON report
        self.worker_sessions: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: each worker's session
        self.worker_said: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: each worker's picture, errors
        self.worker_tests: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: the workers' tests
        self._ingredients: tuple[Any, ...] = ([], {}, {})  # the patterns': made at the end, compiled, held
        self._limits: dict[str, int] | None = None  # each device's bytes_limit, read once where needed
        self.host_share = _host_share(
            bool(worker_id(config))
        )  # this process's share of the runner's memory limit, where read from

        # the kernel's OOM kills in this cgroup so far: a crashed worker is told by those after them
        self.oom_at_start = oom_kills()

    # --- the flight recorder ---------------------------------------------------------------------

    def _open_recorder(self) -> None:
        """At the first test (a run that runs none, --collect-only, leaves the last run's file as it is)."""
        path = recorder_path(self.config, self.settings)
        if path is None:
            return

        try:
            header = recorder_header(os.getpid(), worker_id(self.config), run_id(self.config))
            self.recorder = FlightRecorder(path, header)
        except OSError as e:
            self.write_errors.append(recorder_not_written(path, e))

    def _record(self, record: dict[str, Any]) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.write(record)
        except (OSError, ValueError) as e:  # a full disk; never the test's failure
            self.write_errors.append(recorder_not_written(self.recorder.path, e))
            self.recorder = None

    # --- around each test ------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[Any]:
        if self.last is None:
            self._open_recorder()
            self.first = self.last = self.reader.read(BEFORE_TESTS)
            if self.looks is not None:
                self.looks.start()
        self.current, self.outcome, self._benchmark = item.nodeid, "", None
        self.set_up, self.ended, self._compiled_now = [], [], {}
        self.fixtures_grew = 0

        self._record({"start": item.nodeid, "rss": host_rss()})  # a killed test's trail ends inside it
        try:
            return (yield)
        finally:
            self._after(item, nextitem)
            self.current = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """pytest-benchmark's fixture, kept to add the residue to its ``extra_info`` once it is read
        (pytest-benchmark saves extra_info at the end of the run)."""
        bench = fixture_value_of(item, "benchmark")
        self._benchmark = bench if isinstance(getattr(bench, "extra_info", None), dict) else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid != self.current:
            return
        xfail = hasattr(report, "wasxfail")
        self.outcome = outcome_after(self.outcome, report.when, report.failed, report.skipped, xfail)

    def _take(self, owner: str) -> Between:
        """A reading for ``owner``; the programs first seen in it are the running test's."""
        reading = self.reader.read(owner)
        if owner == self.current:
            for site, n in reading.compiled.items():
                self._compiled_now[site] = self._compiled_now.get(site, 0) + n
        return reading

    def take(self, owner: str) -> Between:
        """A reading now, for ``owner`` (the running test: glue/left.py reads what others left at its call's start)."""
        return self._take(owner)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
        """A fixture of a wider scope: what it makes while set up is its own, not the test's."""
        owner = owner_of_fixture(fixturedef.scope, fixturedef.argname, fixture_location(fixturedef))
        if owner is None or self.current is None:
            return (yield)
        before = self._take(self.current)  # what the test made so far is the test's
        try:
            result = yield
        except BaseException:
            self._take(owner)  # what it made before it raised is its own, not the test's
            raise
        reading = self._take(owner)
        if reading.rss is not None and before.rss is not None:  # its host growth is its own too
            self.fixtures_grew += reading.rss - before.rss
        self.active[owner] = fixturedef
        self.set_up.append(owner)
        held = self.fixture_bytes[owner] = reading.owned.get(owner, 0)
        if over(held, self.threshold):
            self.fixture_holds[owner] = fixture_holds(self.reader, owner, fixture_value(fixturedef))
        return result

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
        owner = owner_of_fixture(fixturedef.scope, fixturedef.argname, fixture_location(fixturedef))
        if owner is not None and self.active.pop(owner, None) is not None:
            self.ended.append(owner)

    def _after(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """After the test's protocol (its teardown done, its fixtures' values dropped): its line."""
        test = item.nodeid
        last = self.last
        reading = self._take(test)
        compiled = dict(self._compiled_now)
        explanation = None
        if reading.started and over(reading.owned.get(test, 0), self.threshold):
            values = {f"{owner}'s value": fixture_value(fixturedef) for owner, fixturedef in self.active.items()}
            values.update(module_values(getattr(item, "module", None)))
            walk = self.walks.walk()
            reading, explanation = explain(self.reader, test, reading, self.outcome, values, compiled, walk)
            walk.spend()
        for site in compiled:
            self.compiled_sites.setdefault(site, set()).add(test)
        ended = tuple((owner, reading.owned.get(owner, 0)) for owner in self.ended)
        self.fixtures_ended.update(ended)
        fixtures = tuple((owner, self.fixture_bytes.get(owner, 0)) for owner in self.set_up)
        line = line_of(test, len(self.lines) + 1, self.outcome, reading, last, fixtures, ended, explanation, compiled)
        if line.grew is not None and self.fixtures_grew:
            line = dataclasses.replace(line, grew=line.grew - self.fixtures_grew, fixtures_grew=self.fixtures_grew)
        if self.looks is not None and host_named(line, self.host_threshold):
            previous = self.lines[-1].test if self.lines else ""
            walk = self.walks.walk()
            host = self.looks.look(test, previous, walk, compiled)
            walk.spend()
            # what glibc holds freed and has not given back: read for a named test only (mallinfo2
            # walks its free lists, up to a few ms on a fragmented heap)
            figures = malloc_figures()
            kept_free = figures[1] - figures[0] if figures is not None else None
            line = dataclasses.replace(line, host=host, kept_free=kept_free)
        module_ends = nextitem is None or nextitem.path != item.path
        if reading.started and clear_now(
            self.settings.clear_caches,
            module_ends,
            reading.executables,
            reading.rss,
            self.host_share[0] if self.host_share is not None else None,
            reading.devices,
            self._device_limits(),
        ):
            reading, line = self._clear(test, reading, line)
        self.lines.append(line)
        self.last = reading
        if self._benchmark is not None:
            extra = self._benchmark.extra_info.setdefault("tpumem", {})
            extra["residue"] = line.residue
            if line.grew is not None:
                extra["host_grew"] = line.grew
            self._benchmark = None

        self._record(line_record(line))

    def _device_limits(self) -> dict[str, int]:
        """Each device's bytes_limit, read once (for --tpumem-clear-caches=device:N%)."""
        if self._limits is None:
            self._limits = self.reader.bytes_limits()
        return self._limits

    def _clear(self, test: str, before: Between, line: Line) -> tuple[Between, Line]:
        """--tpumem-clear-caches: jax.clear_caches(), gc.collect() and malloc_trim(0) now, and what
        each freed (the programs jax held, the devices' bytes, host memory); the reading after them
        is the next test's start."""
        import jax

        rss = [before.rss]
        for step in (jax.clear_caches, gc.collect, trim_host):
            step()
            rss.append(host_rss())
        after = self._take(test)
        freed, host = remedy_freed(before, after, rss)
        cleared = dataclasses.replace(
            line,
            devices=dict(after.devices),
            executables=after.executables,
            rss=after.rss,
            cleared=freed,
            cleared_host=host,
        )
        return after, cleared

    # --- the end ---------------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.first is not None:
            self.session = self._session()
            self._draw()
        if self.recorder is not None:
            self._record(end_record(self.session))
            if self.recorder is not None:
                if self.recorder.replaced():
                    self.write_errors.append(recorder_replaced(self.recorder.path))
                self.recorder.close()

    def to_controller(self) -> dict[str, Any]:
        """A pytest-xdist worker's session, picture, write errors and tests, for the controller."""
        output = {
            LEDGER_SAID: {"picture": self.picture, "errors": self.write_errors},
            LEDGER_TESTS: self.report_tests(),
        }
        if self.session is not None:
            output[LEDGER_SESSION] = session_record(self.session, len(self.lines), *self._ingredients)
        return output

    def from_worker(self, worker: str, output: Mapping[str, Any]) -> None:
        """The controller's side of to_controller."""
        session = output.get(LEDGER_SESSION)
        if isinstance(session, dict):
            self.worker_sessions[worker] = session
        said = output.get(LEDGER_SAID)
        if isinstance(said, dict):
            self.worker_said[worker] = said
        tests = output.get(LEDGER_TESTS)
        if isinstance(tests, dict):
            self.worker_tests.update(tests)

    def report_tests(self) -> dict[str, dict[str, Any]]:
        """Each test's figures for the JSON report (the flight recorder has the whole line); a test
        read before any backend started has its host figures alone (no array can exist without one),
        and none where host memory could not be read either."""
        worker = worker_id(self.config)
        extra = {"worker": worker} if worker else {}
        return {
            line.test: {**report_record(line), **extra} for line in self.lines if line.started or line.rss is not None
        }

    def _draw(self) -> None:
        """The session's picture, written whole (telling.files.write_atomic) or said not written."""
        path = picture_path(self.config, self.settings)
        if path is None or not any(line.started for line in self.lines):
            return

        worker = worker_id(self.config)
        title = f"pytest-tpumem ledger: {len(self.lines)} tests" + (
            f" (pytest-xdist worker {worker})" if worker else ""
        )
        stand_in = bool(self.last is not None and self.last.stand_in)
        try:
            records = [{"test": test, **record} for test, record in self.report_tests().items()]
            picture = session_picture(
                records, len(self.lines), self.threshold, title, stand_in, self.host_share, self.host_threshold
            )
            write_atomic(path, picture.encode())
        except OSError as e:
            self.write_errors.append(picture_not_written(path, e))
        else:
            self.picture = path

    def _session(self) -> Session:
        end = self.reader.read("(after the last test)")
        tests = {line.test for line in self.lines}
        collected = dict(end.owned)
        if end.started and any(end.owned.get(test) for test in tests):
            gc.collect()  # once, after the last test: what only reference cycles kept is told apart
            collected = self.reader.read("(after the last test)").owned
        left = made_at_end(self.reader, [o for o in end.owned if o in tests]) if end.started else []
        held = self.reader.programs_by_site() if end.started else {}
        self._ingredients = (left, self.compiled_sites, held)
        host_end = None

        wanted = end_look_wanted(self.lines, end.executables, self.threshold, self.host_threshold)
        if self.looks is not None and wanted:
            # once, at the end: what tests each under the threshold kept in one place (a cache of datasets)
            walk = self.walks.walk()
            host_end = self.looks.look("(after the last test)", self.lines[-1].test, walk, {})
            walk.spend()
        return Session(
            self.first,
            end,
            tuple(self.lines),
            self.threshold,
            self.reader.bytes_limits() if end.started else {},
            patterns(left, self.compiled_sites, held, self.threshold),
            tuple(sorted(self.fixtures_ended.items())),
            tuple(sorted(self.fixture_holds.items())),
            collected,
            "" if self.settings.clear_caches == "off" else str(self.settings.clear_caches),
            self.host_share,
            self.host_threshold,
            host_end,
        )

    def report_part(self) -> LedgerTests:
        """The JSON report's "ledger": every test this process (or its pytest-xdist workers) read."""
        tests = {**self.worker_tests, **self.report_tests()}
        return LedgerTests(self.threshold, tests, tuple(self.crashed), self.host_threshold)

    def summary_lines(self) -> list[str]:
        lines = session_lines(self.session, self.settings.top) if self.session is not None else []
        if self.picture is not None:
            lines.append(picture_written(self.picture))
        return lines + self.write_errors

    # --- pytest-xdist controller -----------------------------------------------------------------

    def account_lines(self, account: Account) -> list[str]:
        """The account over every worker, each worker's picture, and what could not be written."""
        crashes = {c["worker"]: c["said"] for c in self.crashed}
        lines = account_lines(account, self.settings.top, crashes, runner_limit())
        workers = sorted(self.worker_said, key=worker_order)
        lines += [picture_written(p, w) for w in workers if (p := self.worker_said[w].get("picture"))]
        errors = [str(e) for w in workers for e in self.worker_said[w].get("errors") or ()]
        return lines + errors + self.write_errors

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died in ``crashitem``: its flight recorder's last readings join the report."""
        node = getattr(report, "node", None)
        worker = str(getattr(getattr(node, "gateway", None), "id", ""))
        path = recorder_path(self.config, self.settings)
        if not worker or path is None:
            return

        try:
            records: list[dict[str, Any]] | None = read_recorder(worker_path(path, worker))
        except OSError:
            records = None
        run = getattr(node, "workerinput", {}).get("testrunuid")
        if records is not None and another_runs(records, run):
            said = crash_lines(worker, crashitem, worker_path(path, worker), records, another_run=True)
            records = None
        else:
            said = crash_lines(
                worker, crashitem, worker_path(path, worker), records, oom=(self.oom_at_start, oom_kills())
            )
        self.worker_tests.update(recorded_tests(records or [], worker))
        self.crashed.append({"worker": worker, "test": crashitem, "said": said})

        report.longrepr = f"{report.longrepr}\n" + "\n".join(escaped(line) for line in said)

    def account(self) -> Account | None:
        """pytest-xdist controller: one account over every worker (decisions.ledger.Account), None
        where no worker sent a session and none crashed."""
        if not self.worker_sessions and not self.crashed:
            return None

        return account_of(self.worker_sessions, self.worker_tests, self.crashed, self.threshold, self.host_threshold)

    @pytest.hookimpl(trylast=True)  # after the measured tests' summary
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.settings.top == 0:
            return
        account = self.account()
        lines = self.summary_lines() if account is None else self.account_lines(account)
        if not lines:
            return

        terminalreporter.write_sep("-", "tpumem ledger")
        for line in lines:
            terminalreporter.write_line(escaped(line))  # test ids, files and holders' names may hold control characters


def _host_share(worker: bool) -> tuple[int, str] | None:
    """This process's share of the runner's memory limit (the kernel counts a cgroup's processes
    together: each pytest-xdist worker gets its share; ``worker``: this process is one, not a
    pytest run started from one, which inherits its environment), and where the limit was read;
    None where no limit can be read. A few small files, read once."""
    found = runner_limit()
    if found is None:
        return None
    limit, source = found
    return host_share(limit, source, os.environ.get("PYTEST_XDIST_WORKER_COUNT", "") if worker else "")
