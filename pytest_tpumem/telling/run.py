"""What is said of the run and its tests beyond a check's own result: tests that cannot be re-run,
the sweep's counts, the backend or a target that failed, baselines and reports, the plugin's own
errors, and markers met while the plugin is off."""

from __future__ import annotations

import os

from ..errors import first_line
from .words import plural


def cannot_rerun(name: str, why: str) -> str:
    if why == "benchmark":
        return (
            f"@pytest.mark.leak_check cannot re-run {name}: pytest-benchmark's fixture runs once a test; "
            "leak-check the benchmarked function with the leak_check fixture in a test of its own"
        )
    if why == "async":
        return (
            f"@pytest.mark.leak_check cannot re-run the async test {name}; "
            "call the leak_check fixture on a synchronous function inside it instead"
        )
    return (
        f"@pytest.mark.leak_check cannot re-run {name}: only test functions and unittest.TestCase "
        "methods can be re-run (not doctests or other items); call the leak_check fixture or "
        "pytest_tpumem.check_leaks on a function instead"
    )


def not_rerunnable(name: str, run: int, total: int, error: BaseException) -> str:
    """A test that passed its first run and raised on a later one: it cannot be leak-checked."""
    return (
        f"{name} cannot be leak-checked: it passed its first run but raised on run {run} of {total}: "
        f"{type(error).__name__}: {first_line(error, 160)}. It is not re-runnable (state kept between runs: a "
        "global, a counter, a consumed iterator, a fixture's array donated to jit); exempt it with @pytest.mark.leak_check(False)"
    )


def not_rerunnable_swept(n: int) -> str:
    return (
        f"tpumem: {plural(n, 'test')} passed but could not be leak-checked by --tpumem-leak-check=all: "
        "a later run raised (see the warnings); exempt each with @pytest.mark.leak_check(False)"
    )


def about(subject: str, problem: object) -> str:
    """A problem said with what it is about: a fixture's bad argument or missing prerequisite
    (``leak_check(...): iterations=0: ...``), a budget that could not be judged (``20GB on
    v5e:2x2: ...``)."""
    return f"{subject}: {problem}"


def backend_failed(name: str, problem: str) -> str:
    return f"tpumem cannot measure {name}: the jax backend did not start: {problem}"


def regressed(change: str) -> str:
    """A test failed for its figure against the baseline: ``telling.comparison.change_line``."""
    return f"tpumem baseline: {change}"


COMPARE_NOT_ENFORCED = "tpumem: the comparison is shown, not enforced: add --tpumem-compare-fail peak:10% (for example) to fail regressions"


def report_written(path: str) -> str:
    return f"tpumem: report written to {path}"


def page_written(path: str) -> str:
    return f"tpumem: the run's page (HTML, opens offline) written to {path}"


def summary_written(path: str) -> str:
    return f"tpumem: the job summary (Markdown) appended to {path}"


def summary_not_written(path: str, error: OSError) -> str:
    return f"tpumem: the job summary could not be appended to {path}: {error.strerror or error}"


def report_not_written(path: str, error: OSError) -> str:
    return f"tpumem: the report could not be written to {path}: {error.strerror or error}"


def not_swept(n: int) -> str:
    return (
        f"tpumem: {plural(n, 'test')} not leak-checked by --tpumem-leak-check=all: "
        "not re-runnable as they are (doctests, async tests, pytest-benchmark tests, other items)"
    )


def baseline_not_saved(path: str, why: str) -> str:
    kept = "the last one is kept" if os.path.exists(path) else "no file was written"
    return f"tpumem: the baseline {path} was not saved, {kept}: {why}"


def no_baseline_yet(path: str, save_path: str | None, written: list[str]) -> str:
    """--tpumem-compare-missing=warn, and the baseline is not there yet."""
    if save_path is not None and save_path in written:
        then = f"this run's figures were saved to {save_path}, the baseline of the next run"
    elif save_path is not None:
        then = f"and none was saved to {save_path} (see above)"
    else:
        then = "add --tpumem-save to write one"
    return f"WARNING: tpumem: no baseline at {path} yet (--tpumem-compare-missing=warn): nothing compared; {then}"


def merged_written(path: str, tests: int, processes: int) -> str:
    """``python -m pytest_tpumem merge`` wrote its file."""
    return f"wrote {path}: {plural(tests, 'test')} from {plural(processes, 'process', 'processes')}"


def plugin_error(doing: str, name: str, error: BaseException) -> str:
    """An exception of the plugin's own, never blamed on the test."""
    return (
        f"pytest-tpumem failed while {doing} {name}: {type(error).__name__}: {error}. This is an error in "
        "pytest-tpumem, not in the test: please report it with the traceback above"
    )


def markers_inert(marked: int) -> str:
    """Markers met a run without --tpumem (glue/off.py)."""
    tests = "1 test has" if marked == 1 else f"{marked} tests have"
    return (
        f"pytest-tpumem is off: {tests} a max_hbm or leak_check marker and nothing was measured; "
        "pass --tpumem or set tpumem = true in the ini"
    )
