"""The per-test part of the active plugin (registered only under --tpumem / ini tpumem = true):
plans each test at setup, measures the planned ones around their call (budget, TPU target, leak
check), fails the test where a check failed, and records each check's row on the test. Rows,
files, baselines and the summary are the Reporter's (glue/reporter.py), as pytest-xdist keeps its
DSession apart from its TerminalDistReporter."""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import os
import sys
import time
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from .. import defaults
from ..checks import LeakError, PeakTracker
from ..decisions.budget import BudgetResult
from ..decisions.compare import compare_entry, foreign
from ..decisions.entry import Entry
from ..decisions.oom import OomResult, free, is_oom
from ..decisions.peak import own_use
from ..decisions.target import TargetCheck
from ..decisions.upcast import classify
from ..errors import first_line
from ..readings import jaxcompat
from ..readings.capture import ProgramCapture
from ..readings.devices import backend_summary, installed_versions, read_used
from ..readings.jaxcompat import Unavailable
from ..readings.precision import read_precision
from ..readings.tpu import TopologyError
from ..targets import parse_target
from ..telling.budget import sampled_over
from ..telling.comparison import change_line
from ..telling.files import save_budget
from ..telling.header import XDIST_CONTROLLER_LINE, backend_lines, settings_line, versions_line
from ..telling.leak import progress
from ..telling.results import message, row, section
from ..telling.rows import records_of, regressed_row
from ..telling.run import about, backend_failed, plugin_error, regressed
from ..telling.target import capacity_source, no_libtpu, target_line
from .active import devices
from .failures import LeakFailure, PluginError, fail, warn
from .left import explained, left_behind
from .options import Settings
from .plan import PLAN, TestPlan, is_unittest, plan_for
from .pytestcompat import call_arguments, capture_suspended, expected_error, fixture_value_of
from .recording import record, run_leak_check, with_files
from .reporter import REPORTER, Reporter
from .rerun import Reruns, unittest_between

if TYPE_CHECKING:
    from collections.abc import Callable

    import jax

    from ..decisions.leak import LeakReport
    from ..decisions.peak import LeftBehind, PeakReport
    from ..decisions.target import TargetResult
    from ..decisions.upcast import PrecisionReport
    from ..readings.buffers import Buffer
    from ..readings.capture import CapturedProgram
    from ..targets import Target

MEASURER: pytest.StashKey[Measurer] = pytest.StashKey()  # config.stash[MEASURER]: the run's Measurer, under --tpumem
_LEAK_REPORT: pytest.StashKey[LeakReport] = pytest.StashKey()
# the test's PeakTracker, for its leak check to stop after the first run
_TRACKER: pytest.StashKey[PeakTracker] = pytest.StashKey()
# what other tests left alive at the call's start (glue.left.left_behind)
_LEFT: pytest.StashKey[tuple[LeftBehind, ...]] = pytest.StashKey()
# a leak check's later run ran out: (run, runs, bytes in use per device then)
_OOM_RUN: pytest.StashKey[tuple[int, int, dict[str, int]]] = pytest.StashKey()


def _fail_on_oom(item: pytest.Item, error: BaseException, during: str) -> None:
    """Where ``error`` is jax running out of device memory (and no xfail expects it): free what the
    failed code held and fail the test saying so. Any other error is left to the caller to raise."""
    if not is_oom(error) or expected_error(item, error):  # an xfail expects the OOM
        return
    result = OomResult.of(error, during)
    free(error)
    record(item, row(result))
    fail(message(result))


class Measurer:
    """Measures each planned test; reached through ``config.stash[MEASURER]`` (the fixtures use it)."""

    def __init__(self, config: pytest.Config, settings: Settings, shared: list[str] | None = None):
        self.config = config
        self.shared = shared or []  # the header's lines of what pytest-xdist's workers were given (GPUs)
        self.settings = settings
        self.collect_first: str | bool = False  # a test raised: its traceback's cycle may hold arrays until the
        # collector runs; "full" after a failure or an xfail, "young" (generations 0 and 1) after a skip
        self._backend: dict[str, Any] | None = None  # see backend()

    @property
    def reporter(self) -> Reporter:
        """The run's Reporter: where the run's counts and the baseline are."""
        return self.config.stash[REPORTER]

    # --- what is read, and when ------------------------------------------------------------------

    def devices(self) -> list[jax.Device]:
        """The devices to read (glue.active.devices): starts jax's backend."""
        return devices(self.config)

    def backend(self) -> dict[str, Any]:
        """The backend, its devices and which sources they offer, read once (with the backend started)."""
        if self._backend is None:
            try:
                self._backend = backend_summary(self.devices())
            except Exception as e:  # no backend could start (JAX_PLATFORMS naming a missing one, a busy TPU)
                self._backend = {"error": first_line(e, 200)}
            self.reporter.backend = self._backend
        return self._backend

    def pytest_report_header(self) -> list[str]:
        """What is known before any test module is imported, without starting jax's backend: the
        suite's modules may still configure it (``jax_num_cpu_devices``, ``XLA_FLAGS`` at import)."""
        lines = [target_line(self._target())] if self.settings.target else []
        if self.config.pluginmanager.has_plugin("dsession"):
            # pytest-xdist controller: the workers measure. Opening the backend here would take a
            # TPU chip away from them, so the devices are not read in this process.
            lines.append(XDIST_CONTROLLER_LINE)
        elif jaxcompat.backends_started():  # the suite's conftest started it already: reading it changes nothing
            lines += backend_lines(self.backend())
        else:
            lines.append(versions_line(installed_versions()))
        return (
            lines
            + self.shared
            + [settings_line(self.settings.max_hbm, self.settings.leak_threshold, self.settings.leak_host)]
        )

    def capacity(self, target: Target | None = None) -> tuple[int, str] | None:
        """For a leak forecast where the device reports no limit: the usable HBM of the test's TPU
        target (or --tpumem-target's), and what it is."""
        target = target or (self._target() if self.settings.target else None)
        if target is None:
            return None
        return target.hbm_per_device, capacity_source(target)

    def _target(self) -> Target:
        return parse_target(self.settings.target)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Before the Reporter writes: the backend, where the suite (or a leak_check fixture) started it."""
        if self._backend is None and jaxcompat.backends_started():
            self.backend()

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
            self.reporter.not_swept.add(item.nodeid)
        original = getattr(item, "obj", None)
        unittest_item = (
            item if plan.leak is not None and is_unittest(item) and isinstance(item, pytest.Function) else None
        )
        if unittest_item is not None:  # unittest calls the method it finds on the item
            unittest_item.obj = self._leak_checked_method(item, plan, original)
        try:
            result = yield from self._call(item, plan)
        finally:
            if unittest_item is not None:
                unittest_item.obj = original
            self._to_benchmark(item, plan)
        self._gate(item)
        return result

    def _call(self, item: pytest.Item, plan: TestPlan) -> Generator[None, Any, Any]:
        if not plan.measured:  # run as without the plugin, except that an out-of-memory is said and freed
            try:
                return (yield)
            except BaseException as e:
                _fail_on_oom(item, e, "in this test")
                raise
        problem = self.backend().get("error")
        if problem is not None:
            fail(backend_failed(item.name, problem))

        target = self._start_target(item, plan)
        capture = self._start_capture(plan, target)
        self._forget_last_failure()
        if plan.recompile:
            import jax

            jax.clear_caches()  # every program the test runs is compiled inside it
        item.stash[_LEFT] = left_behind(item)  # what other tests left alive: not this test's own use
        tracker = PeakTracker(
            self.devices(),
            sample_interval=self.settings.sample_ms / 1000,
            body=getattr(item, "obj", None),
            profile=self.settings.profile_dir is not None,
        ).start()
        item.stash[_TRACKER] = tracker
        oom: BaseException | None = None
        outcome = "failed"
        try:
            with target if target is not None else capture if capture is not None else contextlib.nullcontext():
                result = yield
            outcome = "passed"
            return result
        except pytest.skip.Exception:
            outcome = "skipped"
            raise
        except BaseException as e:
            if not is_oom(e) or expected_error(item, e):
                raise
            oom = e
        finally:
            self._judge(item, plan, tracker, target or capture, oom, outcome)
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

    def _start_target(self, item: pytest.Item, plan: TestPlan) -> TargetCheck | None:
        """For a test judged on a TPU target: a TargetCheck to enter around the call (it clears
        jax's caches and records what is lowered); None for any other test."""
        budget = plan.budget
        if budget is None or budget.target is None:
            return None

        if importlib.util.find_spec("libtpu") is None:
            skip = self.settings.no_libtpu == "skip"
            said = no_libtpu(budget.target.topology, budget.spelled, skipped=skip)
            if skip:
                self.reporter.skipped_without_libtpu += 1
                pytest.skip(said)
            fail(said)

        try:  # a topology libtpu cannot build, or a jax without the capture hook, fails before the test runs
            return TargetCheck(
                budget.target, budget.limit, spelled=budget.spelled, check="max_hbm", devices=self.devices()
            )
        except (Unavailable, TopologyError) as e:
            fail(about(budget.spelled, str(e)))

    def _start_capture(self, plan: TestPlan, target: TargetCheck | None) -> ProgramCapture | None:
        """For a budgeted test without a target whose programs are compiled inside it: a capture of
        the programs it lowers, whose jaxprs say where it turned narrow floats wide (read only where
        the budget fails). None where there is a target (its own capture serves) or this jax has no hook."""
        if target is not None or plan.budget is None or not plan.recompile:
            return None

        try:
            return ProgramCapture(resident=False)
        except Unavailable:
            return None

    def _judge(
        self,
        item: pytest.Item,
        plan: TestPlan,
        tracker: PeakTracker,
        target: TargetCheck | ProgramCapture | None,
        oom: BaseException | None,
        outcome: str,
    ) -> None:
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

    def _judge_peak(
        self,
        item: pytest.Item,
        plan: TestPlan,
        peak: PeakReport,
        tracker: PeakTracker,
        target: TargetCheck | ProgramCapture | None,
        oom: BaseException | None,
        outcome: str,
    ) -> None:
        if outcome == "skipped":
            return
        limit = plan.budget.limit if plan.budget else None
        if oom is not None:
            later: tuple[int, int, dict[str, int]] | None = item.stash.get(_OOM_RUN, None)
            run = (later[0], later[1]) if later is not None else None
            result = OomResult.of(oom, "in this test", limit, peak, run, later[2] if later is not None else None)
            free(oom)
            item.add_report_section("call", "tpumem", section(result))
            record(item, row(result))
            fail(message(result))
        whole_device = self.settings.budget_counts == "device"
        peak = own_use(peak, item.stash.get(_LEFT, ()), whole_device)

        checked = target if isinstance(target, TargetCheck) else None  # else the test's ProgramCapture, or None
        budget = BudgetResult(peak, plan.budget, judged_on=checked.target.topology if checked is not None else "")
        on_target = None
        if checked is not None:  # what others left is not the test's on the target either, unless counted
            on_target = checked.result(0 if whole_device else max((d.left for d in peak.devices.values()), default=0))
        if budget.over and peak.left_behind:  # who left what the test started with, and where
            budget = replace(budget, peak=replace(peak, left_behind=explained(item, peak.left_behind)))
        if budget.over or (on_target is not None and on_target.failed):
            # why the figures are what they are: what the test's own programs make, and its upcasts
            buffers = tracker.program_buffers()
            programs = checked.capture.programs if checked is not None else getattr(target, "programs", None)
            precision = self._precision(programs, buffers, on_target)
            budget = budget.explained(buffers, precision)
            if on_target is not None:
                on_target = replace(on_target, precision=precision, upcasts=budget.upcasts)
            if self.settings.profile_dir is not None and budget.failed:
                budget = with_files(budget, save_budget, self.settings.profile_dir, item.nodeid)
        results: list[BudgetResult | TargetResult] = [budget] + ([on_target] if on_target is not None else [])
        leak = item.stash.get(_LEAK_REPORT, None)
        sections = [section(r) for r in results] + ([section(leak)] if leak is not None else [])
        failed = [r for r in results if r.failed]
        text = "\n".join(message(r, self.config.get_verbosity()) for r in failed)
        if text and outcome == "failed":
            sections.insert(0, text)
        item.add_report_section("call", "tpumem", "\n".join(s for s in sections if s))
        for r in results:
            record(item, row(r))
        if budget.sampled_over and not budget.failed and not budget.judged_on:  # timing-dependent: said, never judged
            warn(item, sampled_over(budget))
        if text and outcome == "passed":
            fail(text)

    def _precision(
        self, programs: list[CapturedProgram] | None, buffers: tuple[Buffer, ...], on_target: TargetResult | None
    ) -> PrecisionReport | None:
        """Where the test's programs turned narrow floats wide, and what their float32 arrays are
        on this run's backend and on the target (decisions.upcast.PrecisionReport); None where the
        programs were not captured (compiled before the test) or could not be read."""
        if programs is None:
            return None

        try:
            where = self.devices()[0].platform
            arrays = {where: buffers}
            if on_target is not None:
                arrays[on_target.target.topology] = tuple(
                    b for j in on_target.judged if j.estimate is not None for b in j.estimate.wide
                )
            report = classify([read_precision(p.name, p.jaxpr) for p in programs], arrays)
            return replace(report, run=where)
        except Exception:  # a reading that explains a failure never replaces it
            return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        plan = pyfuncitem.stash.get(PLAN, None)
        if plan is None or plan.leak is None:
            return None
        fn = pyfuncitem.obj
        kwargs = call_arguments(pyfuncitem)
        self._leak_check(
            pyfuncitem, plan, functools.partial(fn, **kwargs)
        )  # fixtures named like check_leaks' options stay the test's
        return True

    def _leak_checked_method(self, item: pytest.Item, plan: TestPlan, method: Any) -> Callable[..., None]:
        """A unittest.TestCase method, leak-checked on its instance when unittest calls it (unittest
        runs setUp before the first run and tearDown after the last; rerun.unittest_between runs
        tearDown, the cleanups and setUp between runs)."""

        @functools.wraps(method)
        def leak_checked(*args: Any, **kwargs: Any) -> None:
            self._leak_check(item, plan, functools.partial(method, *args, **kwargs), unittest_between(method))

        return leak_checked

    def _leak_check(
        self,
        item: pytest.Item,
        plan: TestPlan,
        call: Callable[[], Any],
        between: Callable[[], None] | None = None,
    ) -> None:
        """Run the test's body for its leak check; raise LeakFailure where it leaks. A test that
        cannot be run again fails saying so under a marker, and passes with a warning under the sweep."""
        opts = plan.leak
        assert opts is not None  # pytest_pyfunc_call and the unittest wrapper call this for a planned leak check
        tracker = item.stash.get(_TRACKER, None)
        runs = Reruns(item, call, opts.warmup + opts.iterations, between, tracker.stop if tracker is not None else None)
        try:
            report = run_leak_check(item, runs, self, opts, plan.budget.target if plan.budget else None)
        except BaseException as e:
            if runs.by_the_plugin(e):
                raise PluginError(plugin_error("leak-checking", item.name, e)) from e
            self._note_oom_run(item, runs, e)

            line = None if isinstance(e, (LeakFailure, LeakError)) else runs.not_rerunnable(e)
            if line is None:  # the test's own failure; or a leak check inside it found a leak: a leak, whichever run
                raise
            if not plan.swept:
                fail(line)
            self.reporter.unrerunnable.add(item.nodeid)
            warn(item, line)
            return
        item.stash[_LEAK_REPORT] = report
        if report.leaking:
            raise LeakFailure(report, self.config.get_verbosity())

    def _note_oom_run(self, item: pytest.Item, runs: Reruns, error: BaseException) -> None:
        """Where a leak check's later run ran out of device memory: which run, and what it had in
        use then (read before anything is freed), for the out-of-memory failure to tell that run."""
        if runs.runs > 1 and is_oom(error) and not expected_error(item, error):
            try:
                item.stash[_OOM_RUN] = (runs.runs, runs.total, read_used(self.devices()))
            except Exception:  # a reading never hides the test's own error
                pass

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed or hasattr(report, "wasxfail"):  # its traceback may hold its frames in a cycle
            self.collect_first = "full"
        elif report.skipped and not self.collect_first:  # a skip raised too, mostly before its test made anything
            self.collect_first = "young"

    # --- after the call: the baseline, pytest-benchmark ------------------------------------------

    def _gate(self, item: pytest.Item) -> None:
        """Fail a passed test whose figures regressed against the baseline beyond a tolerance of
        --tpumem-compare-fail (a baseline from another platform or device kind fails nothing)."""
        baseline = self.reporter.baseline
        if baseline is None or not self.settings.compare_fail:
            return

        old = baseline.tests.get(self.reporter.baseline_ids.get(item.nodeid, ""))
        records = records_of(item.user_properties)
        if old is None or not records:
            return

        if foreign(baseline.context, self.reporter.platform(), baseline.version):
            return
        changes = compare_entry(item.nodeid, old, Entry.of(records), self.settings.compare_fail)
        worse = [c for c in changes if c.regressed]
        if worse:
            name = os.path.basename(self.settings.compare_path or "")
            record(item, regressed_row(worse))
            fail("\n".join(regressed(change_line(c, name)) for c in worse))

    def _to_benchmark(self, item: pytest.Item, plan: TestPlan) -> None:
        """pytest-benchmark: the test's peak per device, witness and leak figures in
        ``benchmark.extra_info["tpumem"]``, saved with its times (--benchmark-json, --benchmark-autosave)."""
        if not plan.benchmark:
            return

        extra = getattr(fixture_value_of(item, "benchmark"), "extra_info", None)
        records = records_of(item.user_properties)
        if not isinstance(extra, dict) or not records:
            return

        entry = Entry.of(records).to_json()
        extra["tpumem"] = {k: v for k, v in entry.items() if k != "checks" and v not in (None, "", {})}

    def progress(self) -> Callable[[int, int], None] | None:
        """Under -v, a leak check that has run for a few seconds says how far it is on the test's
        line ("[run 3/4]"), through the terminal reporter: it does not look hung. None otherwise
        (and in pytest-xdist workers, which have no terminal)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.config.get_verbosity() < 1 or reporter is None or hasattr(self.config, "workerinput"):
            return None

        began = time.monotonic()

        def show(done: int, total: int) -> None:
            if time.monotonic() - began < defaults.PROGRESS_AFTER_S:
                return
            with capture_suspended(self.config):
                reporter.write(progress(done, total), flush=True)

        return show
