"""The active part of the plugin, registered only under --tpumem / ini tpumem = true: plans each
test at setup, measures the planned ones around their call, turns the results into failures,
report sections and rows, and prints the summary."""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
from typing import Any, Iterator

import pytest

from ..errors import first_line
from ..telling.budget import sampled_over
from ..telling.header import XDIST_CONTROLLER_LINE, backend_lines, settings_line, versions_line, worker_backend_lines
from ..telling.leak import progress
from ..telling.results import message, row, section
from ..telling.run import COMPARE_NOT_ENFORCED, backend_failed, baseline_not_saved, no_baseline_yet, not_judged, not_rerunnable_swept, not_swept, plugin_error, regressed, report_not_written, report_written
from ..telling.target import capacity_source, no_libtpu, target_line
from .failures import LeakFailure, PluginError, fail
from .pytestcompat import expected_error
from ..telling.files import save_budget
from .fixtures import record, run_leak_check, with_files
from .options import Settings
from .plan import PLAN, TestPlan, is_unittest, plan_for
from .rerun import Reruns, unittest_between

_LEAK_REPORT = pytest.StashKey[Any]()
_TRACKER = pytest.StashKey[Any]()  # the test's PeakTracker, for its leak check to stop after the first run
PROGRESS_AFTER_S = 2.0  # a leak check says how far it is once it has run this long


def _read_baseline(path: str | None, missing: str = "error") -> dict[str, Any] | None:
    """The baseline --tpumem-compare names, read and checked when the run starts: a missing,
    unreadable or corrupt one is a usage error naming the file (which is left as it is); a missing
    one is None under --tpumem-compare-missing=warn (the summary says so)."""
    import os

    if path is None or (missing == "warn" and not os.path.lexists(path)):
        return None
    from ..telling.report import ReportError, read

    try:
        return read(path)
    except ReportError as e:
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


def _fail_on_oom(item: pytest.Item, error: BaseException, during: str) -> None:
    """Where ``error`` is jax running out of device memory (and no xfail expects it): free what the
    failed code held and fail the test saying so. Any other error is left to the caller to raise."""
    from ..decisions.oom import OomResult, free, is_oom

    if not is_oom(error) or expected_error(item, error):  # an xfail expects the OOM
        return
    result = OomResult.of(error, during)
    free(error)
    record(item, row(result))
    fail(message(result))


class TpuMem:
    """The active part, registered only under --tpumem / ini tpumem = true."""

    def __init__(self, config: pytest.Config, settings: Settings):
        self.config = config
        self.settings = settings
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.collect_first: str | bool = False  # a test raised: its traceback's cycle may hold arrays until the
        # collector runs; "full" after a failure or an xfail, "young" (generations 0 and 1) after a skip
        self.skipped_without_libtpu = 0
        self._devices: list[Any] | None = None  # see devices(): read lazily, never before the first measured test
        self._backend: dict[str, Any] | None = None  # see backend()
        self.worker_backends: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: per worker
        self.outcomes: dict[str, str] = {}  # measured test -> the outcome of its call
        self.not_swept: set[str] = set()  # --tpumem-leak-check=all: tests it cannot re-run (doctests, async)
        self.unrerunnable: set[str] = set()  # --tpumem-leak-check=all: passed, but a later run raised
        self._report: dict[str, Any] | None = None  # this run's report, made once at the end
        self.written: list[str] = []  # the reports written at the end, for the summary
        self.write_errors: list[str] = []
        from ..readings.context import now

        self.started = now()
        self.baseline = _read_baseline(settings.compare_path, settings.compare_missing)
        self.baseline_ids: dict[str, str] = {}  # this run's test id -> the baseline's (decisions.compare.match_tests)
        self._comparison: Any = None  # the run against the baseline, made once at the end

    # --- what is read, and when ------------------------------------------------------------------

    def devices(self) -> list[Any]:
        """The devices to read: what a ``pytest_tpumem_devices`` hook returns, else every local
        device. Starts jax's backend: called when the first measured test starts."""
        if self._devices is None:
            chosen = self.config.hook.pytest_tpumem_devices(config=self.config)
            if chosen is None:
                from ..readings.devices import local_devices

                chosen = local_devices()
            self._devices = list(chosen)
        return self._devices

    def backend(self) -> dict[str, Any]:
        """The backend, its devices and which sources they offer, read once (with the backend started)."""
        if self._backend is None:
            from ..readings.devices import backend_summary

            try:
                self._backend = backend_summary(self.devices())
            except Exception as e:  # no backend could start (JAX_PLATFORMS naming a missing one, a busy TPU)
                self._backend = {"error": first_line(e, 200)}
        return self._backend

    def pytest_report_header(self) -> list[str]:
        """What is known before any test module is imported, without starting jax's backend: the
        suite's modules may still configure it (``jax_num_cpu_devices``, ``XLA_FLAGS`` at import)."""
        from ..readings.jaxcompat import backends_started

        lines = [target_line(self._target())] if self.settings.target else []
        if self.config.pluginmanager.has_plugin("dsession"):
            # pytest-xdist controller: the workers measure. Opening the backend here would take a
            # TPU chip away from them, so the devices are not read in this process.
            lines.append(XDIST_CONTROLLER_LINE)
        elif backends_started():  # the suite's conftest started it already: reading it changes nothing
            lines += backend_lines(self.backend())
        else:
            from ..readings.devices import installed_versions

            lines.append(versions_line(installed_versions()))
        return lines + [settings_line(self.settings.max_hbm, self.settings.leak_threshold, self.settings.leak_host)]

    def capacity(self, target: Any = None) -> tuple[int, str] | None:
        """For a leak forecast where the device reports no limit: the usable HBM of the test's TPU
        target (or --tpumem-target's), and what it is."""
        target = target or (self._target() if self.settings.target else None)
        if target is None:
            return None
        return target.hbm_per_device, capacity_source(target)

    def _target(self) -> Any:
        from ..targets import parse_target

        return parse_target(self.settings.target)

    # --- each test -------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        """Plan the test from its markers once its fixtures are set up (a fixture may add a marker:
        ``request.applymarker``); a fixture that runs out of device memory is reported as such,
        and what it held is freed."""
        try:
            result = yield
        except BaseException as e:
            _fail_on_oom(item, e, "while setting up this test")
            raise
        item.stash[PLAN] = plan_for(item, self.settings)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        plan = item.stash.get(PLAN, None) or TestPlan()
        if plan.error is not None:
            fail(plan.error)
        if plan.unswept:
            self.not_swept.add(item.nodeid)
        original = getattr(item, "obj", None)
        wrapped = plan.leak is not None and is_unittest(item)
        if wrapped:  # unittest calls the method it finds on the item
            item.obj = self._leak_checked_method(item, plan, original)
        try:
            result = yield from self._call(item, plan)
        finally:
            if wrapped:
                item.obj = original
            self._to_benchmark(item, plan)
        self._gate(item)
        return result

    def _call(self, item: pytest.Item, plan: TestPlan) -> Iterator[None]:
        if not plan.measured:  # run as without the plugin, except that an out-of-memory is said and freed
            try:
                return (yield)
            except BaseException as e:
                _fail_on_oom(item, e, "in this test")
                raise
        problem = self.backend().get("error")
        if problem is not None:
            fail(backend_failed(item.name, problem))
        from ..decisions.peak import PeakTracker

        target = self._start_target(item, plan)
        self._forget_last_failure()
        if plan.recompile:
            import jax

            jax.clear_caches()  # every program the test runs is compiled inside it
        tracker = PeakTracker(
            self.devices(),
            sample_interval=self.settings.sample_interval,
            body=getattr(item, "obj", None),
            profile=self.settings.profile_dir is not None,
        ).start()
        item.stash[_TRACKER] = tracker
        oom: BaseException | None = None
        outcome = "failed"
        try:
            with target if target is not None else contextlib.nullcontext():
                result = yield
            outcome = "passed"
            return result
        except pytest.skip.Exception:
            outcome = "skipped"
            raise
        except BaseException as e:
            from ..decisions.oom import is_oom

            if not is_oom(e) or expected_error(item, e):
                raise
            oom = e
        finally:
            self._judge(item, plan, tracker, target, oom, outcome)
            del oom

    def _forget_last_failure(self) -> None:
        """Before a measurement starts: what an earlier failed test left reachable no longer holds
        its arrays. ``sys.last_traceback`` and its kin (which pytest itself deletes when the call
        begins, a moment later) hold the failed test's frames and their locals, and its traceback
        may hold them in a cycle until the collector runs."""
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        if self.collect_first:
            gc.collect(2 if self.collect_first == "full" else 1)
            self.collect_first = False

    def _start_target(self, item: pytest.Item, plan: TestPlan) -> Any:
        """For a test judged on a TPU target: a TargetCheck to enter around the call (it clears
        jax's caches and records what is lowered); None for any other test."""
        budget = plan.budget
        if budget is None or budget.target is None:
            return None
        import importlib.util

        if importlib.util.find_spec("libtpu") is None:
            skip = self.settings.no_libtpu == "skip"
            said = no_libtpu(budget.target.topology, budget.spelled, skipped=skip)
            if skip:
                self.skipped_without_libtpu += 1
                pytest.skip(said)
            fail(said)
        from ..decisions.target import TargetCheck
        from ..readings.jaxcompat import Unavailable
        from ..readings.tpu import TopologyError

        try:  # a topology libtpu cannot build, or a jax without the capture hook, fails before the test runs
            return TargetCheck(budget.target, budget.limit, spelled=budget.spelled, check="max_hbm", devices=self.devices())
        except (Unavailable, TopologyError) as e:
            fail(not_judged(budget.spelled, str(e)))

    def _judge(self, item: pytest.Item, plan: TestPlan, tracker: Any, target: Any, oom: BaseException | None, outcome: str) -> None:
        """After the call: each check's result gives the report section and the row; an
        out-of-memory fails the test, and so does a failed check where the test has not already
        failed for its own reason (its own error stays the one shown; the check goes in the section)."""
        peak = tracker.stop()
        if _TRACKER in item.stash:
            del item.stash[_TRACKER]
        try:
            self._judge_peak(item, plan, peak, tracker, target, oom, outcome)
        finally:
            tracker.release()

    def _judge_peak(self, item: pytest.Item, plan: TestPlan, peak: Any, tracker: Any, target: Any, oom: BaseException | None, outcome: str) -> None:
        from ..decisions.budget import BudgetResult
        from ..decisions.oom import OomResult, free

        if outcome == "skipped":
            return
        limit = plan.budget.limit if plan.budget else None
        if oom is not None:
            result = OomResult.of(oom, "in this test", limit, peak)
            free(oom)
            item.add_report_section("call", "tpumem", section(result))
            record(item, row(result))
            fail(message(result))
        budget = BudgetResult(peak, plan.budget)
        if budget.failed:  # why the peak is what it is: what the test's own programs make
            budget = budget.explained(tracker.program_buffers())
            if self.settings.profile_dir is not None:
                budget = with_files(budget, save_budget, self.settings.profile_dir, item.nodeid)
        results: list[Any] = [budget]
        if target is not None:
            results.append(target.result())
        leak = item.stash.get(_LEAK_REPORT, None)
        sections = [section(r) for r in results] + ([section(leak)] if leak is not None else [])
        failed = [r for r in results if r.failed]
        text = "\n".join(message(r, self.config.get_verbosity()) for r in failed)
        if text and outcome == "failed":
            sections.insert(0, text)
        item.add_report_section("call", "tpumem", "\n".join(s for s in sections if s))
        for r in results:
            record(item, row(r))
        if budget.sampled_over and not budget.failed:  # timing-dependent: said, never judged
            item.warn(pytest.PytestWarning(sampled_over(budget)))
        if text and outcome == "passed":
            fail(text)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        plan = pyfuncitem.stash.get(PLAN, None)
        if plan is None or plan.leak is None:
            return None
        fn = pyfuncitem.obj
        kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        self._leak_check(pyfuncitem, plan, functools.partial(fn, **kwargs))  # fixtures named like check_leaks' options stay the test's
        return True

    def _leak_checked_method(self, item: pytest.Item, plan: TestPlan, method: Any) -> Any:
        """A unittest.TestCase method, leak-checked on its instance when unittest calls it (unittest
        runs setUp before the first run and tearDown after the last; rerun.unittest_between runs
        tearDown, the cleanups and setUp between runs)."""

        @functools.wraps(method)
        def leak_checked(*args: Any, **kwargs: Any) -> None:
            self._leak_check(item, plan, functools.partial(method, *args, **kwargs), unittest_between(method))

        return leak_checked

    def _leak_check(self, item: pytest.Item, plan: TestPlan, call: Any, between: Any = None) -> None:
        """Run the test's body for its leak check; raise LeakFailure where it leaks. A test that
        cannot be run again fails saying so under a marker, and passes with a warning under the sweep."""
        opts = plan.leak
        tracker = item.stash.get(_TRACKER, None)
        runs = Reruns(item, call, opts.warmup + opts.iterations, between, tracker.stop if tracker is not None else None)
        try:
            report = run_leak_check(
                item,
                runs,
                target=plan.budget.target if plan.budget else None,
                iterations=opts.iterations,
                warmup=opts.warmup,
                threshold=opts.threshold,
                clear_caches=opts.clear_caches,
                host=opts.host,
                confirm_cleared=opts.swept and not opts.clear_caches,
            )
        except BaseException as e:
            if runs.by_the_plugin(e):
                raise PluginError(plugin_error("leak-checking", item.name, e)) from e
            line = runs.not_rerunnable(e)
            if line is None:
                raise
            if not opts.swept:
                fail(line)
            self.unrerunnable.add(item.nodeid)
            item.warn(pytest.PytestWarning(line))
            return
        item.stash[_LEAK_REPORT] = report
        if report.leaking:
            raise LeakFailure(report, self.config.get_verbosity())

    # --- after the call: the baseline, pytest-benchmark ------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Which baseline test each collected test is, whatever rootdir either run had."""
        if self.baseline is not None:
            from ..decisions.compare import match_tests

            old_root = (self.baseline.get("context") or {}).get("rootdir")
            self.baseline_ids = match_tests(
                self.baseline["tests"], [i.nodeid for i in session.items], old_root, str(self.config.rootpath)
            )

    def _gate(self, item: pytest.Item) -> None:
        """Fail a passed test whose figures regressed against the baseline beyond a tolerance of
        --tpumem-compare-fail (a baseline from another platform or device kind fails nothing)."""
        if self.baseline is None or not self.settings.compare_fail:
            return
        from ..telling.rows import records_of

        old = self.baseline["tests"].get(self.baseline_ids.get(item.nodeid, ""))
        records = records_of(item.user_properties)
        if old is None or not records:
            return
        from ..decisions.compare import compare_entry, foreign
        from ..telling.report import entry_of

        if foreign(self.baseline["context"], self._platform(), int(self.baseline.get("version", 1))):
            return
        changes = compare_entry(item.nodeid, old, entry_of(records), self.settings.compare_fail)
        worse = [c for c in changes if c.regressed]
        if worse:
            import os

            from ..telling.comparison import change_line
            from ..telling.rows import regressed_row

            name = os.path.basename(self.settings.compare_path or "")
            record(item, regressed_row(worse))
            fail("\n".join(regressed(change_line(c, name)) for c in worse))

    def _to_benchmark(self, item: pytest.Item, plan: TestPlan) -> None:
        """pytest-benchmark: the test's peak per device, witness and leak figures in
        ``benchmark.extra_info["tpumem"]``, saved with its times (--benchmark-json, --benchmark-autosave)."""
        if not plan.benchmark:
            return
        from ..telling.rows import records_of

        bench = getattr(item, "funcargs", {}).get("benchmark")
        extra = getattr(bench, "extra_info", None)
        records = records_of(item.user_properties)
        if not isinstance(extra, dict) or not records:
            return
        from ..telling.report import entry_of

        entry = entry_of(records)
        extra["tpumem"] = {k: v for k, v in entry.items() if k != "checks" and v not in (None, "", {})}

    def _any_backend(self) -> dict[str, Any]:
        """The backend as read here, or by the first pytest-xdist worker ({} before either read it)."""
        return self._backend or next(iter(self.worker_backends.values()), None) or {}

    def _platform(self) -> dict[str, Any]:
        """The run's platform and device kind, as a report's context says them (None before the backend is read)."""
        backend = self._any_backend()
        return {"platform": backend.get("backend"), "device_kind": backend.get("device_kind")}

    def progress(self) -> Any:
        """Under -v, a leak check that has run for a few seconds says how far it is on the test's
        line ("[run 3/4]"), through the terminal reporter: it does not look hung. None otherwise
        (and in pytest-xdist workers, which have no terminal)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if self.config.get_verbosity() < 1 or reporter is None or hasattr(self.config, "workerinput"):
            return None
        import time

        began = time.monotonic()

        def show(done: int, total: int) -> None:
            if time.monotonic() - began < PROGRESS_AFTER_S:
                return
            with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
                reporter.write(progress(done, total), flush=True)

        return show

    # --- the run ---------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from ..telling.rows import records_of

        if report.failed or hasattr(report, "wasxfail"):  # its traceback may hold its frames in a cycle
            self.collect_first = "full"
        elif report.skipped and not self.collect_first:  # a skip raised too, mostly before its test made anything
            self.collect_first = "young"
        records = records_of(report.user_properties)
        # A unittest.TestCase skip is recorded by pytest's unittest support and raised only when the
        # report is made, so the call hook saw a test that returned: its row is dropped here.
        # A setup that failed (an out-of-memory in a fixture) has the only report of the test with a row.
        if records and (report.when == "call" and not report.skipped or report.when == "setup" and report.failed):
            self.rows[report.nodeid] = records  # a test run again (pytest-rerunfailures): its last run
            self.outcomes[report.nodeid] = report.outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from ..readings.jaxcompat import backends_started

        if self._backend is None and backends_started():  # the suite (or a leak_check fixture) started it
            self.backend()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: what the controller's summary needs
            if self._backend is not None:
                workeroutput["tpumem_backend"] = self._backend
            workeroutput["tpumem_skipped_without_libtpu"] = self.skipped_without_libtpu
            workeroutput["tpumem_not_swept"] = sorted(self.not_swept)
            workeroutput["tpumem_unrerunnable"] = sorted(self.unrerunnable)
            return  # the controller writes the reports
        comparison = self.comparison()
        if comparison is not None and comparison.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a gate that compared no test (matching_lines says why)
        self._write_reports(session)

    def comparison(self) -> Any:
        """This run against the baseline (decisions.compare.Comparison), None without one."""
        if self.baseline is not None and self._comparison is None:
            from ..decisions.compare import compare

            self._comparison = compare(self.baseline, self.report(), self.settings.compare_fail)
        return self._comparison

    def report(self) -> dict[str, Any]:
        """This run's report (telling/report.py's schema), made once the run has ended."""
        if self._report is None:
            from ..telling import report

            tests = {nodeid: report.entry_of(records, self.outcomes.get(nodeid, "")) for nodeid, records in self.rows.items()}
            self._report = report.build(tests, self._context())
        return self._report

    def _context(self) -> dict[str, Any]:
        import os
        import socket

        from ..readings import context

        backend = self._any_backend()
        index, count = context.process()
        devices = backend.get("devices", [])
        known = backend.get("known_stats")
        s = self.settings
        return {
            "started": self.started,
            "finished": context.now(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            **self._platform(),
            "devices": devices,
            "device_count": len(devices),
            "bytes_limit": backend.get("bytes_limit"),
            "stand_in": None if known is None else "bytes_in_use" not in known,
            "process_index": index,
            "process_count": count,
            "xdist_workers": len(self.worker_backends) or None,
            "versions": context.versions(),
            "env": context.memory_env(),
            "rootdir": str(self.config.rootpath),  # test ids are relative to it (decisions.compare.match_tests)
            "git": context.git(str(self.config.rootpath)),
            "settings": {
                "max_hbm": s.max_hbm,
                "leak_threshold": s.leak_threshold,
                "leak_host": s.leak_host,
                "leak_check": s.leak_check,
                "target": s.target,
                "recompile": s.recompile,
                "sample_ms": s.sample_interval * 1000,
            },
        }

    def _write_reports(self, session: pytest.Session) -> None:
        """--tpumem-json and --tpumem-save, each written whole; under jax.distributed each process
        writes its own file, named with its index."""
        paths = [p for p in (self.settings.json_path, self.settings.save_path) if p is not None]
        cut_short = _cut_short(session) or (not self.rows and "it measured no test")
        if self.settings.save_path is not None and cut_short:
            paths.remove(self.settings.save_path)
            self.write_errors.append(baseline_not_saved(self.settings.save_path, cut_short))
        if not paths:
            return
        from ..telling import report as reports

        data = self.report()
        context = data["context"]
        for path in paths:
            path = reports.process_path(path, context["process_index"], context["process_count"])
            try:
                reports.write(data, path)
            except OSError as e:
                self.write_errors.append(report_not_written(path, e))
                if session.exitstatus == 0:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
            else:
                self.written.append(path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: a worker's backend and counts, for the summary."""
        output = getattr(node, "workeroutput", {})
        backend = output.get("tpumem_backend")
        if isinstance(backend, dict):
            self.worker_backends[str(getattr(node.gateway, "id", "?"))] = backend
        self.skipped_without_libtpu += int(output.get("tpumem_skipped_without_libtpu", 0))
        self.not_swept.update(output.get("tpumem_not_swept", ()))
        self.unrerunnable.update(output.get("tpumem_unrerunnable", ()))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from ..telling.rows import merge, summary_lines

        extra = self._report_lines()
        if (not self.rows and not self.skipped_without_libtpu and not extra) or self.settings.top == 0:
            for line in self.write_errors:  # never hidden
                terminalreporter.write_line(line, red=True)
            return
        quiet = self.config.get_verbosity() < 0
        rows = {nodeid: merge(records) for nodeid, records in self.rows.items()}
        terminalreporter.write_sep("=", "tpumem")
        for line in self._backend_lines():
            if not quiet or " unavailable on this jax" in line:  # -q keeps what cannot be measured
                terminalreporter.write_line(line)
        for line in summary_lines(rows, self.settings.top, quiet, self.skipped_without_libtpu):
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
        if self.baseline is not None:
            import os

            from ..telling.comparison import comparison_lines

            from .. import defaults

            comparison = self.comparison()
            name = os.path.basename(self.settings.compare_path or "")
            lines += comparison_lines(comparison, name, top=self.settings.top, floor=defaults.COMPARE_FLOOR)
            if not self.settings.compare_fail:
                lines.append(COMPARE_NOT_ENFORCED)
        lines += [report_written(p) for p in self.written]
        return lines

    def _backend_lines(self) -> list[str]:
        backends = dict(self.worker_backends)
        if self._backend is not None:
            backends[""] = self._backend
        return worker_backend_lines(backends)
