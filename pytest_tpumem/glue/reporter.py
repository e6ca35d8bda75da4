"""The run's part of the active plugin (registered only under --tpumem / ini tpumem = true): the
rows every measured test recorded, collected from its reports (in a pytest-xdist controller too),
the baseline read at the start and matched with the run's tests, the JSON report and baseline
written at the end, and the terminal summary. Reached through ``config.stash[REPORTER]``; the
Measurer (glue/measure.py) tells it the backend and counts what it could not check."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from .. import defaults
from ..decisions.compare import compare, match_tests
from ..decisions.entry import Entry, LedgerTests, Report
from ..decisions.partial import Selection, kept, kept_because
from ..readings import context as context_readings
from ..telling import github
from ..telling import report as reports
from ..telling.comparison import comparison_lines
from ..telling.files import append_text, write_atomic
from ..telling.header import worker_backend_lines
from ..telling.html import page
from ..telling.rows import records_of, summary_lines
from ..telling.run import (
    COMPARE_NOT_ENFORCED,
    baseline_not_saved,
    no_baseline_yet,
    not_rerunnable_swept,
    not_swept,
    page_written,
    report_not_written,
    report_written,
    summary_not_written,
    summary_written,
)
from . import outputs
from .ledger import LEDGER, Ledger
from .options import Settings
from .pytestcompat import last_failed_narrows

if TYPE_CHECKING:
    from ..decisions.compare import Comparison

REPORTER: pytest.StashKey[Reporter] = pytest.StashKey()  # config.stash[REPORTER]: the run's Reporter, under --tpumem


class Gateway(Protocol):
    """execnet's gateway to a pytest-xdist worker."""

    id: str  # names the worker ("gw1")


class Worker(Protocol):
    """pytest-xdist's WorkerController, as its controller's hooks hand it (xdist/workermanage.py)."""

    gateway: Gateway
    workerinput: dict[str, Any]  # what the worker is given as it starts
    workeroutput: dict[str, Any]  # what the worker sent as it finished (absent where it crashed)


def _read_baseline(path: str | None, missing: str = "error") -> Report | None:
    """The baseline --tpumem-compare names, read and checked when the run starts: a missing,
    unreadable or corrupt one is a usage error naming the file (which is left as it is); a missing
    one is None under --tpumem-compare-missing=warn (the summary says so)."""
    if path is None or (missing == "warn" and not os.path.lexists(path)):
        return None

    try:
        return reports.read(path)
    except reports.ReportError as e:
        raise pytest.UsageError(f"pytest-tpumem: --tpumem-compare {e}") from None


def _cut_short(session: pytest.Session) -> str:
    """Why the run measured only part of what it was asked to ("" where it ran whole): a baseline
    is then not saved over the last one."""
    if session.config.option.collectonly:
        return "--collect-only ran no test"
    if session.shouldstop or session.shouldfail:
        return f"the run stopped early ({session.shouldstop or session.shouldfail})"
    if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        return "the run selected no test"
    if session.exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return f"the run ended with {pytest.ExitCode(session.exitstatus).name.lower().replace('_', ' ')}"
    return ""


class Reporter:
    """Rows, reports, the baseline and the summary of one run."""

    def __init__(self, config: pytest.Config, settings: Settings):
        outputs.check(config, settings)  # before any test runs: a test source is never overwritten
        self.config = config
        self.settings = settings
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.outcomes: dict[str, str] = {}  # measured test -> the outcome of its call
        self.failures: dict[str, str] = {}  # test -> pytest's text of why it failed (setup, call or teardown)
        self.backend: dict[str, Any] | None = None  # as the Measurer read it (readings.devices.backend_summary)
        self.worker_backends: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: per worker
        self.skipped_without_libtpu = 0
        self.not_swept: set[str] = set()  # --tpumem-leak-check=all: tests it cannot re-run (doctests, async)
        self.unrerunnable: set[str] = set()  # --tpumem-leak-check=all: passed, but a later run raised
        self._report: Report | None = None  # this run's report, made once at the end
        self.written: list[str] = []  # the reports written at the end, for the summary
        self.page: str | None = None  # of those, the HTML page (--tpumem-html)
        self.write_errors: list[str] = []
        self.locations: dict[str, tuple[str, int | None]] = {}  # measured test -> its file (absolute), line from 1
        self.annotations: list[str] = []  # GitHub's workflow commands, printed with the summary
        self.summary: str | None = None  # where the job summary was appended

        self.started = context_readings.now()
        self.baseline = _read_baseline(settings.compare_path, settings.compare_missing)
        self.baseline_ids: dict[str, str] = {}  # this run's test id -> the baseline's (decisions.compare.match_tests)
        self._comparison: Comparison | None = None  # the run against the baseline, made once at the end
        self.deselected: set[str] = set()  # tests -k, -m, --deselect, --lf, --sw deselected (in the workers too)
        self.collected_ids: set[str] = set()  # the tests collected, deselected ones included
        self.partial_files = ""  # why the run collected only some tests of a file (decisions.partial.Selection)
        self.kept = ""  # what the saved baseline kept of the last one, said in the summary

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.update(i.nodeid for i in items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Worker, ids: list[str]) -> None:
        """pytest-xdist controller: the tests a worker collected (it collects, the controller does not)."""
        self.collected_ids.update(ids)

    def _partial_files(self) -> str:
        """Why this process's run collected only some tests of a file: test ids given as arguments,
        or --lf rerunning last failures ("" where neither)."""
        config = self.config
        if any("::" in a for a in config.args):
            return "test ids given as arguments"
        if last_failed_narrows(config):
            return "--lf"
        return self.partial_files

    def _selection(self, session: pytest.Session) -> Selection:
        """What the run selected of what it collected (decisions.partial.Selection)."""
        config = self.config
        narrowing = [
            f"{flag} {value!r}" if isinstance(value, str) else flag
            for flag, value in (
                ("-k", config.getoption("keyword", "")),
                ("-m", config.getoption("markexpr", "")),
                ("--deselect", bool(config.getoption("deselect", None))),
                ("--lf", bool(config.getoption("lf", False))),
                ("--sw", bool(config.getoption("stepwise", False))),
            )
            if value
        ]
        collected = {i.nodeid for i in session.items} | self.collected_ids | self.deselected
        return Selection(frozenset(collected), frozenset(self.deselected), tuple(narrowing), self._partial_files())

    def _baseline(self, session: pytest.Session, path: str) -> Report:
        """The report --tpumem-save writes: this run's tests, and those of the last baseline at the
        path that the run did not run but are still in the suite (decisions.partial.kept). A last
        baseline that cannot be read, or was taken from another rootdir, is replaced whole."""
        data = self.report()
        if not os.path.isfile(path):
            return data
        try:
            last = reports.read(path)
        except reports.ReportError:
            return data
        root = self.config.rootpath
        if last.rootdir and os.path.realpath(last.rootdir) != os.path.realpath(root):
            return data
        selection = self._selection(session)

        def exists(file: str) -> bool:
            return (root / file).exists()

        tests = kept(last.tests, set(data.tests), selection, exists)
        ledger = data.ledger
        lines: tuple[str, ...] = ()
        if ledger is not None and last.ledger is not None:
            lines = kept(last.ledger.tests, set(ledger.tests), selection, exists)
            ledger = LedgerTests(
                ledger.threshold,
                {**{t: last.ledger.tests[t] for t in lines}, **ledger.tests},
                ledger.crashed,
                ledger.host_threshold,
            )
        if not tests and not lines:
            return data
        self.kept = reports.baseline_kept(path, len(set(tests) | set(lines)), kept_because(selection))
        merged = {**{t: last.tests[t] for t in tests}, **data.tests}
        return reports.build(merged, data.context, data.processes, ledger)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Which baseline test each collected test is, whatever rootdir either run had."""
        if self.baseline is not None:
            self.baseline_ids = match_tests(
                self.baseline.tests,
                [i.nodeid for i in session.items],
                self.baseline.rootdir or None,
                str(self.config.rootpath),
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        records = records_of(report.user_properties)
        if report.failed and (records or report.nodeid in self.rows):  # a test the report keeps: measured
            self.failures[report.nodeid] = reports.failure_text(self.failures.get(report.nodeid, ""), report)
        # A unittest.TestCase skip is recorded by pytest's unittest support and raised only when the
        # report is made, so the call hook saw a test that returned: its row is dropped here.
        # A setup that failed (an out-of-memory in a fixture) has the only report of the test with a row.
        if records and (report.when == "call" and not report.skipped or report.when == "setup" and report.failed):
            self.rows[report.nodeid] = records  # a test run again (pytest-rerunfailures): its last run
            self.outcomes[report.nodeid] = report.outcome
            path, line, _ = report.location  # relative to the rootdir; the line from 0 (None: not known)
            self.locations[report.nodeid] = (str(self.config.rootpath / path), None if line is None else line + 1)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workeroutput"):
            return  # a pytest-xdist worker: the controller writes the reports
        comparison = self.comparison()
        if comparison is not None and comparison.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a gate that compared no test (matching_lines says why)
        self._write_reports(session)
        self._tell_github()

    def _tell_github(self) -> None:
        """GitHub's annotations of the tests that failed a memory check (where GITHUB_ACTIONS=true,
        printed with the summary), and the job summary appended to its file (telling.github)."""
        report = self.report()
        if self.settings.annotations == "auto" and os.environ.get("GITHUB_ACTIONS") == "true":
            workspace = os.environ.get("GITHUB_WORKSPACE")
            self.annotations = github.annotation_lines(github.failed_tests(report), self.locations, workspace)
        ours = self.settings.summary_path
        given = os.environ.get("GITHUB_STEP_SUMMARY") or None
        path = given if ours is None else None if ours == "off" else ours
        if path is None:
            return
        baseline = os.path.basename(self.settings.compare_path or "")
        page = (
            None if self.page is None else github.within(self.page, os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
        )
        text = github.summary(report, self.comparison(), baseline, page, len(self.annotations))
        try:
            append_text(path, text, checked=path != given)
        except OSError as e:
            self.write_errors.append(summary_not_written(path, e))
        else:
            self.summary = path

    def comparison(self) -> Comparison | None:
        """This run against the baseline (decisions.compare.Comparison), None without one."""
        if self.baseline is not None and self._comparison is None:
            self._comparison = compare(self.baseline, self.report(), self.settings.compare_fail)
        return self._comparison

    def report(self) -> Report:
        """This run's report (decisions.entry), made once the run has ended."""
        if self._report is None:
            tests = {
                nodeid: Entry.of(records, self.outcomes.get(nodeid, ""), self.failures.get(nodeid, ""))
                for nodeid, records in self.rows.items()
            }
            ledger = self.config.stash.get(LEDGER, None)  # None where -p no:tpumem-ledger blocked it
            self._report = reports.build(
                tests, self._context(), (), ledger.report_part() if ledger is not None else None
            )
        return self._report

    def _any_backend(self) -> dict[str, Any]:
        """The backend as read here, or by the first pytest-xdist worker ({} before either read it)."""
        return self.backend or next(iter(self.worker_backends.values()), None) or {}

    def platform(self) -> dict[str, Any]:
        """The run's platform and device kind, as a report's context says them (each None before the backend is read)."""
        backend = self._any_backend()
        return {"platform": backend.get("backend"), "device_kind": backend.get("device_kind")}

    def _context(self) -> dict[str, Any]:
        backend = self._any_backend()
        index, count = context_readings.process()
        devices = backend.get("devices", [])
        known = backend.get("known_stats")
        s = self.settings
        return {
            "started": self.started,
            "finished": context_readings.now(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            **self.platform(),
            "devices": devices,
            "device_count": len(devices),
            "bytes_limit": backend.get("bytes_limit"),
            "stand_in": None if known is None else "bytes_in_use" not in known,
            "process_index": index,
            "process_count": count,
            "xdist_workers": len(self.worker_backends) or None,
            "versions": context_readings.versions(),
            "env": context_readings.memory_env(),
            "rootdir": str(self.config.rootpath),  # test ids are relative to it (decisions.compare.match_tests)
            "git": context_readings.git(str(self.config.rootpath)),
            "settings": {
                "max_hbm": s.max_hbm,
                "leak_threshold": s.leak_threshold,
                "leak_host": s.leak_host,
                "leak_check": s.leak_check,
                "target": s.target,
                "recompile": s.recompile,
                "sample_ms": s.sample_ms,
                "residue": s.residue,
                "host_residue": s.host_residue,
                "clear_caches": s.clear_caches if isinstance(s.clear_caches, (str, int)) else str(s.clear_caches),
            },
        }

    def _write_reports(self, session: pytest.Session) -> None:
        """--tpumem-json, --tpumem-save and --tpumem-html, each written whole; under jax.distributed
        each process writes its own file, named with its index. A run cut short, or that measured
        nothing, saves no baseline (the summary says why)."""
        paths = [p for p in (self.settings.json_path, self.settings.save_path) if p is not None]
        ledger = self.report().ledger
        # a ledger whose tests all ran before any jax backend started has host figures alone: no jax memory to keep
        read = bool(self.rows) or (
            ledger is not None and any(line.get("started") is not False for line in ledger.tests.values())
        )
        cut_short = _cut_short(session) or (not read and "it measured no test")
        if self.settings.save_path is not None and cut_short:
            paths.remove(self.settings.save_path)
            self.write_errors.append(baseline_not_saved(self.settings.save_path, cut_short))
        if self.settings.html_path is not None:
            paths.append(self.settings.html_path)
        if not paths:
            return

        data = self.report()
        context = data.context
        for path in paths:
            html, saved = path == self.settings.html_path, path == self.settings.save_path
            path = reports.process_path(path, context["process_index"], context["process_count"])
            try:
                if html:
                    self._write_page(path)
                else:
                    reports.write(self._baseline(session, path) if saved else data, path)
            except OSError as e:
                self.write_errors.append(report_not_written(path, e))
                if session.exitstatus == 0:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
            else:
                self.written.append(path)
                if html:
                    self.page = path

    def _write_page(self, path: str) -> None:
        """--tpumem-html: the run's page (telling.html), with the baseline comparison where there is one."""
        baseline = os.path.basename(self.settings.compare_path or "")
        write_atomic(path, page(self.report(), self.comparison(), baseline).encode())

    # --- pytest-xdist: what a worker sends its controller, for every active part -----------------

    def _parts(self) -> list[Reporter | Ledger]:
        ledger = self.config.stash.get(LEDGER, None)
        return [self] if ledger is None else [self, ledger]

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_to_controller(self, session: pytest.Session) -> Iterator[None]:
        """pytest-xdist worker: what each part sends the controller, written once every part has
        finished (the ledger's end is trylast), inside pytest-xdist's own wrapper, which sends it
        (pytest takes a hook's implementations from names that start with ``pytest_``)."""
        result = yield
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            for part in self._parts():
                workeroutput.update(part.to_controller())
        return result

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Worker, error: object) -> None:
        """pytest-xdist controller: each part takes its share of what the worker sent."""
        output = getattr(node, "workeroutput", None) or {}
        worker = str(getattr(node.gateway, "id", "?"))
        for part in self._parts():
            part.from_worker(worker, output)

    def to_controller(self) -> dict[str, Any]:
        """A worker's backend and counts, for the controller's summary."""
        return {
            **({"tpumem_backend": self.backend} if self.backend is not None else {}),
            "tpumem_skipped_without_libtpu": self.skipped_without_libtpu,
            "tpumem_not_swept": sorted(self.not_swept),
            "tpumem_unrerunnable": sorted(self.unrerunnable),
            "tpumem_deselected": sorted(self.deselected),
            "tpumem_partial_files": self._partial_files(),
        }

    def from_worker(self, worker: str, output: Mapping[str, Any]) -> None:
        """The controller's side of to_controller."""
        backend = output.get("tpumem_backend")
        if isinstance(backend, dict):
            self.worker_backends[worker] = backend
        self.skipped_without_libtpu += int(output.get("tpumem_skipped_without_libtpu", 0))
        self.not_swept.update(output.get("tpumem_not_swept", ()))
        self.unrerunnable.update(output.get("tpumem_unrerunnable", ()))
        self.deselected.update(output.get("tpumem_deselected", ()))
        self.partial_files = self.partial_files or str(output.get("tpumem_partial_files") or "")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in self.annotations:  # GitHub reads them from anywhere in the output
            terminalreporter.write_line(line)
        extra = self._report_lines()
        if (not self.rows and not self.skipped_without_libtpu and not extra) or self.settings.top == 0:
            for line in self.write_errors:  # never hidden
                terminalreporter.write_line(line, red=True)
            return
        quiet = self.config.get_verbosity() < 0
        terminalreporter.write_sep("=", "tpumem")
        for line in self._backend_lines():
            if not quiet or " unavailable on this jax" in line:  # -q keeps what cannot be measured
                terminalreporter.write_line(line)
        for line in summary_lines(self.report().tests, self.settings.top, quiet, self.skipped_without_libtpu):
            terminalreporter.write_line(line)
        if self.not_swept:
            terminalreporter.write_line(not_swept(len(self.not_swept)))
        if self.unrerunnable:
            terminalreporter.write_line(not_rerunnable_swept(len(self.unrerunnable)), yellow=True)
        for line in extra:
            terminalreporter.write_line(line)
        for line in self.write_errors:
            terminalreporter.write_line(line, red=True)

    def _report_lines(self) -> list[str]:
        """The comparison with the baseline, and the reports written."""
        lines = []
        if self.baseline is None and self.settings.compare_path is not None:
            lines.append(no_baseline_yet(self.settings.compare_path, self.settings.save_path, self.written))
        comparison = self.comparison()  # None without a baseline
        if comparison is not None:
            name = os.path.basename(self.settings.compare_path or "")
            lines += comparison_lines(comparison, name, top=self.settings.top, floor=defaults.COMPARE_FLOOR)
            if not self.settings.compare_fail:
                lines.append(COMPARE_NOT_ENFORCED)
        lines += [page_written(p) if p == self.page else report_written(p) for p in self.written]
        if self.summary is not None:
            lines.append(summary_written(self.summary))
        return lines + ([self.kept] if self.kept else [])

    def _backend_lines(self) -> list[str]:
        backends = dict(self.worker_backends)
        if self.backend is not None:
            backends[""] = self.backend
        return worker_backend_lines(backends)
