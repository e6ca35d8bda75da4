"""The active part of the plugin, registered only under --tpumem / ini tpumem = true: plans each
test at setup, measures the planned ones around their call, turns the results into failures,
report sections and rows, and prints the summary."""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
from typing import Any, Iterator

import pytest

from ..telling import text
from .failures import LeakFailure, fail
from ..telling.files import save_budget
from .fixtures import record, run_leak_check, with_files
from .options import Settings
from .plan import PLAN, TestPlan, plan_for

_LEAK_REPORT = pytest.StashKey[Any]()
PROGRESS_AFTER_S = 2.0  # a leak check says how far it is once it has run this long


def _expects(item: pytest.Item, error: BaseException) -> bool:
    """True when an xfail marker on the item names this error: the user expects the OOM."""
    for mark in item.iter_markers("xfail"):
        raises = mark.kwargs.get("raises")
        if raises is None or isinstance(error, raises):
            return True
    return False


def _fail_on_oom(item: pytest.Item, error: BaseException, during: str) -> None:
    """Where ``error`` is jax running out of device memory (and no xfail expects it): free what the
    failed code held and fail the test saying so. Any other error is left to the caller to raise."""
    from ..decisions.oom import OomResult, free, is_oom

    if not is_oom(error) or _expects(item, error):
        return
    result = OomResult.of(error, during)
    free(error)
    record(item, result.row)
    fail(result.message)


class TpuMem:
    """The active part, registered only under --tpumem / ini tpumem = true."""

    def __init__(self, config: pytest.Config, settings: Settings):
        self.config = config
        self.settings = settings
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.collect_first = False  # a test failed: its traceback cycle may hold arrays until gc
        self.skipped_without_libtpu = 0
        self._devices: list[Any] | None = None  # see devices(): read lazily, never before the first measured test
        self._backend: dict[str, Any] | None = None  # see backend()
        self.worker_backends: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: per worker

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
                self._backend = {"error": text.first_line(e, 200)}
        return self._backend

    def pytest_report_header(self) -> list[str]:
        """What is known before any test module is imported, without starting jax's backend: the
        suite's modules may still configure it (``jax_num_cpu_devices``, ``XLA_FLAGS`` at import)."""
        from ..readings.jaxcompat import backends_started

        lines = [text.target_line(self._target())] if self.settings.target else []
        if self.config.pluginmanager.has_plugin("dsession"):
            # pytest-xdist controller: the workers measure. Opening the backend here would take a
            # TPU chip away from them, so the devices are not read in this process.
            lines.append(text.XDIST_CONTROLLER_LINE)
        elif backends_started():  # the suite's conftest started it already: reading it changes nothing
            lines += text.backend_lines(self.backend())
        else:
            from ..readings.devices import installed_versions

            lines.append(text.versions_line(installed_versions()))
        return lines + [text.settings_line(self.settings.max_hbm, self.settings.leak_threshold)]

    def capacity(self, target: Any = None) -> tuple[int, str] | None:
        """For a leak forecast where the device reports no limit: the usable HBM of the test's TPU
        target (or --tpumem-target's), and what it is."""
        target = target or (self._target() if self.settings.target else None)
        if target is None:
            return None
        return target.hbm_per_device, text.capacity_source(target)

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
        if not plan.measured:  # run as without the plugin, except that an out-of-memory is said and freed
            try:
                return (yield)
            except BaseException as e:
                _fail_on_oom(item, e, "in this test")
                raise
        problem = self.backend().get("error")
        if problem is not None:
            fail(text.backend_failed(item.name, problem))
        from ..decisions.peak import PeakTracker

        target = self._start_target(item, plan)
        if self.collect_first:
            gc.collect()  # the last failure's traceback may still hold its arrays in a cycle
            self.collect_first = False
        if plan.recompile:
            import jax

            jax.clear_caches()  # every program the test runs is compiled (and seen) inside it
        body = getattr(item, "obj", None) if plan.leak is None else None
        tracker = PeakTracker(
            self.devices(),
            sample_interval=self.settings.sample_interval,
            body=body,
            uncounted=plan.uncounted,
            profile=self.settings.profile_dir is not None,
        ).start()
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

            if not is_oom(e) or _expects(item, e):
                raise
            oom = e
        finally:
            self._judge(item, plan, tracker, target, oom, outcome)
            del oom

    def _start_target(self, item: pytest.Item, plan: TestPlan) -> Any:
        """For a test judged on a TPU target: a TargetCheck to enter around the call (it clears
        jax's caches and records what is lowered); None for any other test."""
        budget = plan.budget
        if budget is None or budget.target is None:
            return None
        import importlib.util

        if importlib.util.find_spec("libtpu") is None:
            skip = self.settings.no_libtpu == "skip"
            message = text.no_libtpu(budget.target.topology, budget.spelled, skipped=skip)
            if skip:
                self.skipped_without_libtpu += 1
                pytest.skip(message)
            fail(message)
        from ..decisions.target import TargetCheck
        from ..readings.jaxcompat import Unavailable
        from ..readings.tpu import TopologyError

        try:  # a topology libtpu cannot build, or a jax without the capture hook, fails before the test runs
            return TargetCheck(budget.target, budget.limit, spelled=budget.spelled, check="max_hbm", devices=self.devices())
        except (Unavailable, TopologyError) as e:
            fail(text.not_judged(budget.spelled, str(e)))

    def _judge(self, item: pytest.Item, plan: TestPlan, tracker: Any, target: Any, oom: BaseException | None, outcome: str) -> None:
        """After the call: each check's result gives the report section and the row; an
        out-of-memory fails the test, and so does a failed check where the test has not already
        failed for its own reason (its own error stays the one shown; the check goes in the section)."""
        from ..decisions.budget import BudgetResult
        from ..decisions.oom import OomResult, free

        peak = tracker.stop()
        if outcome == "skipped":
            return
        limit = plan.budget.limit if plan.budget else None
        if oom is not None:
            result = OomResult.of(oom, "in this test", limit, peak)
            free(oom)
            item.add_report_section("call", "tpumem", result.section)
            record(item, result.row)
            fail(result.message)
        budget = BudgetResult(peak, plan.budget)
        if budget.failed:  # why the peak is what it is: what the test's own programs make
            budget = budget.explained(tracker.program_buffers())
            if self.settings.profile_dir is not None:
                budget = with_files(budget, save_budget, self.settings.profile_dir, item.nodeid)
        results: list[Any] = [budget]
        if target is not None:
            results.append(target.result())
        leak = item.stash.get(_LEAK_REPORT, None)
        sections = [r.section for r in results] + ([leak.section] if leak is not None else [])
        failed = [r for r in results if r.failed]
        message = "\n".join(r.message_at(self.config.get_verbosity()) for r in failed)
        if message and outcome == "failed":
            sections.insert(0, message)
        item.add_report_section("call", "tpumem", "\n".join(s for s in sections if s))
        for r in results:
            record(item, r.row)
        if message and outcome == "passed":
            fail(message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        plan = pyfuncitem.stash.get(PLAN, None)
        if plan is None or plan.leak is None:
            return None
        fn = pyfuncitem.obj
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            fail(text.cannot_rerun(pyfuncitem.name, "async"))
        kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        opts = plan.leak
        report = run_leak_check(
            pyfuncitem,
            functools.partial(fn, **kwargs),  # fixtures named like check_leaks' options stay the test's
            target=plan.budget.target if plan.budget else None,
            iterations=opts.iterations,
            warmup=opts.warmup,
            threshold=opts.threshold,
            clear_caches=opts.clear_caches,
        )
        pyfuncitem.stash[_LEAK_REPORT] = report
        if report.leaking:
            raise LeakFailure(report, self.config.get_verbosity())
        return True

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
                reporter.write(text.progress(done, total), flush=True)

        return show

    # --- the run ---------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from ..telling.rows import PROPERTY

        if report.failed:
            self.collect_first = True
        records = [v for k, v in report.user_properties if k == PROPERTY and isinstance(v, dict)]
        # A unittest.TestCase skip is recorded by pytest's unittest support and raised only when the
        # report is made, so the call hook saw a test that returned: its row is dropped here.
        if records and report.when == "call" and not report.skipped:
            self.rows.setdefault(report.nodeid, []).extend(records)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from ..readings.jaxcompat import backends_started

        if self._backend is None and backends_started():  # the suite (or a leak_check fixture) started it
            self.backend()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: what the controller's summary needs
            if self._backend is not None:
                workeroutput["tpumem_backend"] = self._backend
            workeroutput["tpumem_skipped_without_libtpu"] = self.skipped_without_libtpu

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: a worker's backend and counts, for the summary."""
        output = getattr(node, "workeroutput", {})
        backend = output.get("tpumem_backend")
        if isinstance(backend, dict):
            self.worker_backends[str(getattr(node.gateway, "id", "?"))] = backend
        self.skipped_without_libtpu += int(output.get("tpumem_skipped_without_libtpu", 0))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from ..telling.rows import merge, summary_lines

        if (not self.rows and not self.skipped_without_libtpu) or self.settings.top == 0:
            return
        quiet = self.config.get_verbosity() < 0
        rows = {nodeid: merge(records) for nodeid, records in self.rows.items()}
        terminalreporter.write_sep("=", "tpumem")
        for line in self._backend_lines():
            if not quiet or " unavailable on this jax" in line:  # -q keeps what cannot be measured
                terminalreporter.write_line(line)
        for line in summary_lines(rows, self.settings.top, quiet, self.skipped_without_libtpu):
            terminalreporter.write_line(line)

    def _backend_lines(self) -> list[str]:
        backends = dict(self.worker_backends)
        if self._backend is not None:
            backends[""] = self._backend
        return text.worker_backend_lines(backends)
