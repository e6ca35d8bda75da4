"""The active part of the plugin, registered only under --tpumem / ini tpumem = true: measures
budgeted and leak-checked tests, fails them, collects the rows and prints the summary."""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import sys
import traceback
from typing import Any, Iterator, NamedTuple

import pytest

from . import markers, settings as settings_mod
from .plugin import SETTINGS, LeakFailure, fail, record

_LEAK = pytest.StashKey[markers.LeakOptions]()
_LEAK_REPORT = pytest.StashKey[Any]()


class Budget(NamedTuple):
    limit: int
    spelled: str  # where it came from, as the user wrote it
    target: Any  # targets.Target whose compile is also judged, or None


def _is_oom(error: BaseException) -> bool:
    """jax's runtime error for an allocation that did not fit (not any text that mentions it)."""
    jax = sys.modules.get("jax")
    runtime_error = getattr(getattr(jax, "errors", None), "JaxRuntimeError", None)
    if runtime_error is None or not isinstance(error, runtime_error):
        return False
    return str(error).lstrip().startswith("RESOURCE_EXHAUSTED")


def _expects(item: pytest.Item, error: BaseException) -> bool:
    """True when an xfail marker on the item names this error: the user expects the OOM."""
    for mark in item.iter_markers("xfail"):
        raises = mark.kwargs.get("raises")
        if raises is None or isinstance(error, raises):
            return True
    return False


class TpuMem:
    """The active part, registered only under --tpumem / ini tpumem = true."""

    def __init__(self, config: pytest.Config, resolved: settings_mod.Settings):
        self.config = config
        self.settings = resolved
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.collect_first = False  # a test failed: its traceback cycle may hold arrays until gc
        self._backend: dict[str, Any] | None = None  # see backend(); read lazily, never in the header
        self.worker_backends: dict[str, dict[str, Any]] = {}  # pytest-xdist controller: per worker

    def pytest_report_header(self) -> list[str]:
        """What is known before any test module is imported, without starting jax's backend: the
        suite's modules may still configure it (``jax_num_cpu_devices``, ``XLA_FLAGS`` at import)."""
        from .report import backend_lines, settings_line, versions_line
        from .sources import backend_started, installed_versions

        settings = [settings_line(self.settings.max_hbm, self.settings.leak_threshold)]
        if self.config.pluginmanager.has_plugin("dsession"):
            # pytest-xdist controller: the workers measure. Opening the backend here would take a
            # TPU chip away from them, so the devices are not read in this process.
            return self._target_line() + [
                "tpumem: devices are read in the pytest-xdist workers and listed in the summary"
            ] + settings
        if backend_started():  # the suite's conftest started it already: reading it changes nothing
            return self._target_line() + backend_lines(self.backend()) + settings
        return self._target_line() + [versions_line(installed_versions())] + settings

    def backend(self) -> dict[str, Any]:
        """The backend, its devices and which sources they offer, read once (this starts jax's
        backend: called when the first measured test starts, or once the suite has started it)."""
        if self._backend is None:
            from .sources import backend_summary

            try:
                self._backend = backend_summary()
            except Exception as e:  # no backend could start (JAX_PLATFORMS naming a missing one, a busy TPU)
                self._backend = {"error": (str(e).strip().splitlines() or [type(e).__name__])[0][:200]}
        return self._backend

    def _target_line(self) -> list[str]:
        if not self.settings.target:
            return []
        from .targets import parse_target

        return [
            f"tpumem: target {parse_target(self.settings.target).describe()} "
            "(budgeted tests' programs are compiled for it; hbm_estimate's default)"
        ]

    def _budget(self, item: pytest.Item) -> Budget | None:
        from .targets import parse_target

        default_target = parse_target(self.settings.target) if self.settings.target else None
        mark = item.get_closest_marker("max_hbm")
        if mark is not None:
            parsed = markers.parse_max_hbm(mark)
            spelled = "max_hbm" + markers.spell(mark)
            target = parsed.target or default_target
            if parsed.limit is not None:
                return Budget(parsed.limit, spelled, target)
            if target is None:
                raise markers.MarkerError(
                    f"@pytest.mark.{spelled}: give a limit (\"16GB\") or a TPU target (target=\"v5e\", or --tpumem-target)"
                )
            return Budget(target.hbm_per_device, f"{spelled}: {target.generation}'s usable HBM", target)
        if self.settings.max_hbm is not None:
            return Budget(self.settings.max_hbm, "--tpumem-max-hbm / ini tpumem_max_hbm", default_target)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        error = budget = mark = None
        try:
            budget = self._budget(item)
            mark = item.get_closest_marker("leak_check")
            if mark is not None:
                item.stash[_LEAK] = markers.parse_leak_check(mark)
        except markers.MarkerError as e:
            error = str(e)
        if mark is not None and (not isinstance(item, pytest.Function) or _is_unittest(item)):
            error = (
                f"@pytest.mark.leak_check cannot re-run {item.name}: only plain pytest test functions can be "
                "re-run (not unittest.TestCase methods or other items); call the leak_check fixture or "
                "pytest_tpumem.check_leaks on a function instead"
            )
        if error is not None:
            fail(error)  # outside the except block: one clean line, no chained traceback
        if budget is not None or mark is not None:
            problem = self.backend().get("error")
            if problem is not None:
                fail(f"tpumem cannot measure {item.name}: the jax backend did not start: {problem}")
        capture = _start_capture(budget)
        tracker = None
        if budget is not None or mark is not None:
            from .peak import PeakTracker

            if self.collect_first:
                gc.collect()  # the last failure's traceback may still hold its arrays in a cycle
                self.collect_first = False
            body = getattr(item, "obj", None) if mark is None else None
            tracker = PeakTracker(sample_interval=self.settings.sample_interval, body=body).start()
        oom: BaseException | None = None
        outcome = "failed"
        try:
            with capture:
                result = yield
            outcome = "passed"
            return result
        except pytest.skip.Exception:
            outcome = "skipped"
            raise
        except BaseException as e:
            if not _is_oom(e) or _expects(item, e):
                raise
            oom = e
        finally:
            self._judge(item, tracker, budget, oom, outcome, capture)
            del oom

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        """A fixture that runs out of device memory: report it as such and free what it held."""
        message = None
        try:
            return (yield)
        except BaseException as e:
            if not _is_oom(e) or _expects(item, e):
                raise
            from .report import oom_message

            message = oom_message(e, None, None).replace("in this test", "while setting up this test", 1)
            _free(e)
        finally:
            if message is not None:
                fail(message)

    def _judge(
        self, item: pytest.Item, tracker: Any, budget: Budget | None, oom: BaseException | None, outcome: str, capture: Any
    ) -> None:
        """After the call: record the figures; fail on an out-of-memory, or on an exceeded budget
        (on the devices of this run, or compiled for the target) where the test has not already
        failed for another reason (its own error stays the one shown)."""
        from .report import budget_message, detail, oom_message, row, target_message

        report = tracker.stop() if tracker is not None else None
        if outcome == "skipped":
            return
        failed = outcome == "failed"
        limit = budget.limit if budget else None
        over = report is not None and budget is not None and bool(report.over(budget.limit))
        messages = [budget_message(report, budget.limit, budget.spelled)] if over else []
        judged = None
        if budget is not None and budget.target is not None and oom is None:
            from .estimate import judge_programs

            try:
                judgements = judge_programs(capture.programs, budget.target)
            except Exception as e:  # never an INTERNALERROR, never a silent pass: the test is not judged
                judgements = []
                capture.errors.append(f"judging for {budget.target.topology} failed: {type(e).__name__}: {e}")
            judged = target_message(judgements, capture.errors, budget.limit, budget.spelled, budget.target)
            if judged.failed:
                messages.append(judged.message)
        message = "\n".join(messages)
        if report is not None:
            section = detail(report, item.stash.get(_LEAK_REPORT, None))
            if judged is not None:
                section += "\n" + judged.detail
            if message and failed and oom is None:  # the test's own error is the one shown; the budget goes here
                section = message + "\n" + section
            item.add_report_section("call", "tpumem", section)
        if oom is not None:
            message = oom_message(oom, limit, report)
            _free(oom)
            record(item, row(report, limit, verdict="oom"))
            fail(message)
        if report is None:
            return
        verdict = "over budget" if message else "ok"
        record(item, row(report, limit, verdict=verdict, target=judged))
        if message and not failed:
            fail(message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        opts = pyfuncitem.stash.get(_LEAK, None)
        if opts is None:
            return None
        from .leak import check_leaks

        fn = pyfuncitem.obj
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            fail(
                f"@pytest.mark.leak_check cannot re-run the async test {pyfuncitem.name}; "
                "call the leak_check fixture on a synchronous function inside it instead"
            )
        kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        threshold = self.settings.leak_threshold if opts.threshold is None else opts.threshold
        body = functools.partial(fn, **kwargs)  # fixtures named like check_leaks' options stay the test's
        report = check_leaks(
            body, iterations=opts.iterations, warmup=opts.warmup, threshold=threshold, clear_caches=opts.clear_caches
        )
        pyfuncitem.stash[_LEAK_REPORT] = report
        from .report import row

        record(pyfuncitem, row(leak=report, verdict=report.verdict))
        if report.leaked:
            raise LeakFailure(report)
        return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from .report import PROPERTY

        if report.failed:
            self.collect_first = True
        records = [v for k, v in report.user_properties if k == PROPERTY and isinstance(v, dict)]
        # A unittest.TestCase skip is recorded by pytest's unittest support and raised only when the
        # report is made, so the call hook saw a test that returned: its row is dropped here.
        if records and report.when == "call" and not report.skipped:
            self.rows.setdefault(report.nodeid, []).extend(records)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from .sources import backend_started

        if self._backend is None and backend_started():  # the suite (or a leak_check fixture) started it
            self.backend()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None and self._backend is not None:  # a pytest-xdist worker
            workeroutput["tpumem_backend"] = self._backend

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: a worker's backend, for the summary."""
        backend = getattr(node, "workeroutput", {}).get("tpumem_backend")
        if isinstance(backend, dict):
            self.worker_backends[str(getattr(node.gateway, "id", "?"))] = backend

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .report import backend_lines, merge, summary_lines

        if not self.rows or self.settings.top == 0:
            return
        quiet = self.config.get_verbosity() < 0
        rows = {nodeid: merge(records) for nodeid, records in self.rows.items()}
        terminalreporter.write_sep("=", "tpumem")
        if not quiet:
            backends = dict(self.worker_backends)
            if self._backend is not None:
                backends[""] = self._backend
            distinct = {repr(sorted(b.items())): b for b in backends.values()}
            if len(distinct) == 1:
                lines = backend_lines(next(iter(distinct.values())))
            else:
                lines = [f"{worker}: {line}" for worker, b in sorted(backends.items()) for line in backend_lines(b)]
            for line in lines:
                terminalreporter.write_line(line)
        for line in summary_lines(rows, self.settings.top, quiet):
            terminalreporter.write_line(line)


def _start_capture(budget: Budget | None) -> Any:
    """For a test judged on a TPU target: jax's caches cleared (so every program it runs is lowered
    again) and a ProgramCapture to enter around the call; for any other test, a context that does nothing."""
    if budget is None or budget.target is None:
        return contextlib.nullcontext()
    import importlib.util

    if importlib.util.find_spec("libtpu") is None:
        pytest.skip(
            f"judging this test on {budget.target.topology} ({budget.spelled}) needs libtpu: "
            "pip install 'pytest-tpumem[tpu]' (brings jax[tpu])"
        )
    import jax

    from .capture import CaptureUnavailable, ProgramCapture
    from .targets import TargetError, topology_devices

    try:
        topology_devices(budget.target.topology)  # a topology libtpu cannot build fails before the test runs
        capture = ProgramCapture()
    except (CaptureUnavailable, TargetError) as e:
        problem = str(e)
    else:
        jax.clear_caches()
        return capture
    fail(f"{budget.spelled}: {problem}")


def _is_unittest(item: pytest.Item) -> bool:
    import unittest

    cls = getattr(item, "cls", None)
    return cls is not None and issubclass(cls, unittest.TestCase)


def _free(error: BaseException) -> None:
    """After an out-of-memory: drop the failed test's frames (and the arrays they hold) and jax's caches."""
    traceback.clear_frames(error.__traceback__)
    error.__traceback__ = None
    gc.collect()
    import jax

    jax.clear_caches()
    gc.collect()
