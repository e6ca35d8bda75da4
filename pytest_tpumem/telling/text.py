"""Every sentence the user reads: the report header, failure messages, report sections, and the
one-line errors of the pytest glue. Built from the results of decisions/ (read by attribute, so
nothing here imports them) and printed in people's units; machine figures are in rows.py.

Input errors (a size, a target name, an option value that cannot be parsed) are worded by the
parser that rejects them (units.py, targets.py, glue/options.py, glue/markers.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import LIBTPU_INSTALL, first_line
from ..units import format_apart, format_delta, format_size

if TYPE_CHECKING:  # for the reader and type checkers only: no import at run time
    from ..decisions.budget import BudgetResult
    from ..decisions.leak import HostSite, KeptProgram, LeakReport, LeakSite, Series
    from ..decisions.oom import OomResult
    from ..decisions.peak import DevicePeak, PeakReport
    from ..decisions.target import ProgramJudgement, TargetResult
    from ..readings.buffers import Buffer
    from ..readings.tpu import HbmEstimate
    from ..targets import Target

STAND_IN_NOTE = (
    "live arrays stand in for device memory (CPU backend: XLA's temporaries are counted from the memory "
    "analysis of each program the test runs)"
)


def _plural(n: int, word: str, words: str = "") -> str:
    """``1 test``, ``2 tests``; ``words`` where the plural is not ``word + "s"`` (processes)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as aligned columns; the last column (a test id, the longest) is not padded."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


# --- the header and the top of the summary -------------------------------------------------------


def versions_line(versions: dict[str, str]) -> str:
    """The header before any device is read: what is installed, and when the devices will be read."""
    installed = ", ".join(f"{name} {v}" for name, v in versions.items()) or "jax not installed"
    return (
        f"tpumem: {installed}; devices are read when the first measured test starts "
        "(after the suite has configured jax) and listed in the summary"
    )


XDIST_CONTROLLER_LINE = "tpumem: devices are read in the pytest-xdist workers and listed in the summary"


def settings_line(max_hbm: int | None, leak_threshold: int, leak_host: bool | int = True) -> str:
    budget = format_size(max_hbm) if max_hbm else "none"
    host = "" if leak_host is True else (", host RSS not judged" if leak_host is False else f", host RSS {format_size(leak_host)}/iteration")
    return f"tpumem: default budget {budget}, leak threshold {format_size(leak_threshold)}/iteration{host}"


def target_text(target: Target) -> str:
    per = "per chip" if target.device == "chip" else "per TensorCore (2 a chip)"
    return f"{target.topology}: {format_size(target.hbm_per_device)} usable HBM {per}"


def capacity_source(target: Target) -> str:
    return f"a {target.topology} {target.device}'s usable HBM"


def target_line(target: Target) -> str:
    return f"tpumem: target {target_text(target)} (budgeted tests' programs are compiled for it; hbm_estimate's default)"


def backend_lines(s: dict[str, Any]) -> list[str]:
    """The backend, its devices, the sources they offer and what this jax lacks (``readings.devices.backend_summary()``)."""
    if "error" in s:
        return [f"tpumem: the jax backend did not start, so no device can be read: {s['error']}"]
    known = s["known_stats"]
    if not s["memory_stats"]:
        stats = "no memory_stats"
    else:
        stats = f"memory_stats ({', '.join(known) if known else 'every field unknown (-1)'})"
    stand_in = "" if "bytes_in_use" in known else "; live arrays stand in for device memory"
    host = ("host malloc, " if s.get("host_malloc") else "") + (
        "host RSS + VmHWM" if s["host_peak_resettable"] else "host RSS (per-test host peak unavailable)"
    )
    limit = f", bytes_limit {format_size(s['bytes_limit'])}" if s["bytes_limit"] else ""
    devices = s["devices"]
    unavailable = s.get("unavailable", {})
    programs = "" if "program runs" in unavailable else ", programs run"
    lines = [
        f"tpumem: jax {s['jax']}, backend {s['backend']} ({s['device_kind']}), "
        f"{_plural(len(devices), 'local device')}: {', '.join(devices[:8])}{' ...' if len(devices) > 8 else ''}{limit}",
        f"tpumem: sources: live arrays, {stats}{programs}, {host}{stand_in}",
    ]
    lines += [f"tpumem: {feature} unavailable on this jax: {reason}" for feature, reason in unavailable.items()]
    return lines


# --- budget on the run's devices -----------------------------------------------------------------


# Why a measurement has no "program" witness (PeakReport.uncounted), in words.
UNCOUNTED = {
    "unavailable": "this jax does not let tpumem see the programs it runs (readings.executions); "
    "the peak is read at the start, the body's end and the end only",
}


def _witness(d: DevicePeak) -> str:
    """``program jit(step)``, ``body-end``: the witness that judged, with the program where one did."""
    return f"{d.witness} {d.program}" if d.witness == "program" and d.program else d.witness


def peak_line(d: DevicePeak) -> str:
    seen = ", ".join(f"{k} {format_size(v)}" for k, v in d.witnesses.items())
    line = f"{d.device}: start {format_size(d.start)}, peak {format_size(d.peak)} by {_witness(d)} [{seen}]"
    if d.unexplained:
        line += (
            f"; the sampler saw {format_size(d.sampler)}, {format_size(d.unexplained)} more than any deterministic "
            "reading explains (timing-dependent, not judged)"
        )
    if d.largest_free is not None:
        free = f"free {format_size(d.free)}, " if d.free is not None else ""
        line += f"; at the end {free}largest free block {format_size(d.largest_free)}"
        if d.fragmented:
            line += " (fragmented: a larger allocation fails although the total would fit)"
    return line


def sampled_over(result: BudgetResult) -> str:
    """A test within its budget by every deterministic reading, where only the sampler saw more."""
    d = max(result.sampled_over, key=lambda d: d.sampler or 0)
    return (
        f"max_hbm: only the sampler saw {format_size(d.sampler)} on {d.device}, over the budget of "
        f"{format_size(result.budget.limit)} ({result.budget.spelled}); the test is judged by its deterministic "
        f"peak, {format_size(d.peak)} by {_witness(d)}. What the sampler sees depends on when it looks, so it "
        "does not judge: the moment came from a path tpumem does not watch (a program compiled ahead of time "
        "and called again, pmap)"
    )


def _shown(rows: tuple[Any, ...] | list[Any], verbosity: int) -> list[Any]:
    """How many rows of a list a failure shows: one under -q, every one kept otherwise."""
    return list(rows[:1]) if verbosity < 0 else list(rows)


def budget_message(result: BudgetResult, verbosity: int = 0) -> str:
    """Short failure text for a test over its budget on the run's devices: the devices over it and
    why (the upcasts, the largest arrays); -q keeps the first of each, -v adds every device."""
    over = result.over
    if not over:
        return ""
    worst = over[0]
    budget = result.budget
    peak, limit = format_apart(worst.peak, budget.limit)  # never "peak 64.1kB is over the budget of 64.1kB"
    lines = [
        f"max_hbm: peak {peak} on {worst.device} is over the budget of "
        f"{limit} ({budget.spelled}), judged by {_witness(worst)}"
    ]
    if worst.stand_in:
        lines[0] += f"; {STAND_IN_NOTE}"
    devices = list(result.peak.devices.values()) if verbosity > 0 else _shown(over, verbosity)
    lines += ["  " + peak_line(d) for d in devices]
    if result.upcasts:
        lines.append("  upcasts in the programs this test ran (float32 copies of narrower values, made by its code):")
        lines += ["    " + upcast_line(b) for b in _shown(result.upcasts, verbosity)]
    if result.buffers and (verbosity >= 0 or not result.upcasts):
        lines.append("  largest arrays the programs this test ran make (per device; XLA may reuse a temporary's memory):")
        lines += ["    " + buffer_line(b) for b in _shown(result.buffers, verbosity)]
    lines += _files_lines(result.files)
    return "\n".join(lines)


def _files_lines(files: tuple[str, ...]) -> list[str]:
    """How to read what a failing check left: the pprof command for its profiles, and the rest."""
    if not files:
        return []
    from ..readings.frames import short_path

    files = tuple(short_path(f) if os.path.isabs(f) else f for f in files)
    profiles = [f for f in files if f.endswith(".pb.gz")]
    others = [f for f in files if not f.endswith(".pb.gz")]
    lines = []
    if len(profiles) == 2:
        lines.append(f"  what grew, by the stack that made it: pprof -top --diff_base {profiles[0]} {profiles[1]}")
    elif profiles:
        lines.append(f"  what was held, by the stack that made it: pprof -top {profiles[0]}")
    lines += [f"  timeline: {f}" for f in others if f.endswith(".svg")]
    lines += [f"  {f}" for f in others if not f.endswith(".svg")]  # a note that the files could not be written
    return lines


def upcast_line(b: Buffer) -> str:
    """``134.2MB  f32[8,64,256,256] from bf16 at test_gn.py:3 (gn): 67.1MB more than in bf16``"""
    from ..readings.buffers import dtype_bytes

    wide, narrow = dtype_bytes(b.shape.split("[", 1)[0]), dtype_bytes(b.converted_from)
    extra = b.size - b.size * narrow // wide if wide else 0
    where = f" at {b.source}" if b.source else ""
    return f"{format_size(b.size):>9}  {b.shape} from {b.converted_from}{where}: {format_size(extra)} more than in {b.converted_from}"


def budget_section(result: BudgetResult) -> str:
    return peak_section(result.peak)


def peak_section(report: PeakReport) -> str:
    """The long form of a measured peak, for the test's report section."""
    lines = [peak_line(d) for d in report.devices.values()]
    if report.host_peak is not None:
        lines.append(f"host peak (VmHWM): {format_size(report.host_peak)}")
    if report.uncounted:
        lines.append(f"programs run: not read ({UNCOUNTED[report.uncounted]})")
    shown = report.programs[:PROGRAMS_SHOWN]
    for p in shown:
        lines.append(
            f"ran {p.name} on {','.join(p.devices)}: needs {format_size(p.peak)} "
            f"(arguments {format_size(p.arguments)}, outputs {format_size(p.outputs)}, temps {format_size(p.temps)})"
        )
    if len(report.programs) > len(shown):
        lines.append(f"... and {_plural(len(report.programs) - len(shown), 'smaller program')}")
    return "\n".join(lines)


PROGRAMS_SHOWN = 5  # the largest programs a peak's report section lists


# --- out of memory -------------------------------------------------------------------------------


def oom_message(result: OomResult) -> str:
    lines = [f"out of device memory {result.during} (budget {format_size(result.limit)}): {result.error}"]
    if result.peak is not None:
        lines += ["  " + peak_line(d) for d in result.peak.devices.values()]
    lines.append("  tpumem freed the test's frames and jax's caches so the tests after it can run")
    return "\n".join(lines)


# --- leak check ----------------------------------------------------------------------------------


def _values(values: tuple[int, ...]) -> str:
    parts = [format_size(values[0])]
    for a, b in zip(values, values[1:]):
        parts.append(f"{format_size(b)} ({format_delta(b - a)})")
    return " -> ".join(parts)


def series_line(s: Series, judged: bool = True) -> str:
    line = f"{s.name}: {_values(s.values)}"
    if len(s.confirmation) > 1:
        line += f"; confirmation: {_values(s.confirmation)}"
    if s.shown_only:
        line += " (shown, not judged: host malloc and host other split it)"
    elif not judged:
        line += " (not judged: host=False)"
    left = s.iterations_left()
    if left is not None:
        source = "" if s.limit_source == "bytes_limit" else f", {s.limit_source}"
        line += f"; exhausted in ~{left} more iterations (limit {format_size(s.limit)}{source})"
    return line


def site_line(site: LeakSite) -> str:
    """``16.0MB/iteration  3 arrays f32[4000000] on cpu:0  at test_leaky.py:17 in test_leak``"""
    shapes = ", ".join(site.shapes[:2]) + (f" and {len(site.shapes) - 2} more shapes" if len(site.shapes) > 2 else "")
    where = f"at {site.site}" if site.site is not None else "made inside a library (no line of the test's code recorded)"
    devices = ", ".join(site.devices[:4]) + (" ..." if len(site.devices) > 4 else "")
    rate = f"{format_size(site.per_iteration):>9}/iteration" if site.accumulates else f"{format_size(site.nbytes):>9} of one run"
    return f"{rate}  {_plural(site.count, 'array')} {shapes} on {devices}  {where}"


def kept_program_line(p: KeptProgram) -> str:
    where = f" at {p.site}" if p.site is not None else ""
    return f"{p.name} compiled{where} ({p.per_iteration} per iteration)"


def host_site_line(h: HostSite) -> str:
    where = f"at {h.site}" if h.site is not None else "in a library (no line of the test's code in its stack)"
    return f"{format_size(h.nbytes):>9}  {_plural(h.allocations, 'allocation')}  {where}"


def _leak_details(report: LeakReport, verbosity: int) -> list[str]:
    """What leaked and where: the arrays that survived on a device, or what grew on the host."""
    lines = []
    if report.sites:
        lines.append("  still alive after the last run, made after the warmup, by the line that made them:")
        lines += ["    " + site_line(g) for g in _shown(report.sites, verbosity)]
    if report.host_sites:
        lines.append(
            "  left allocated on the host by one more run, traced with tracemalloc (Python and numpy "
            "allocations, not XLA's), by line:"
        )
        lines += ["    " + host_site_line(h) for h in _shown(report.host_sites, verbosity)]
    if report.unconfirmed:
        lines.append(
            f"  (not confirmed: one more run, to confirm the growth, raised {report.unconfirmed}: the code could not "
            f"run again, and the verdict rests on the first {_plural(report.iterations, 'iteration')})"
        )
    if report.host_trace_error:
        lines.append(
            "  (one more run, traced with tracemalloc to name the lines, raised "
            f"{report.host_trace_error}: the code could not run again)"
        )
    return lines


def _threshold(report: LeakReport, series: Series) -> str:
    """``threshold 100.0MB/iteration``, or the host's own: ``host threshold 200.0MB/iteration``;
    with the digits that tell it apart from the series' growth."""
    limit = report.threshold_for(series)
    own = "host " if series.device == "host" and limit != report.threshold else ""
    return f"{own}threshold {format_apart(series.growth, limit)[1] if limit else format_size(limit)}/iteration"


def leak_message(report: LeakReport, verbosity: int = 0) -> str:
    """What grew, by how much per iteration, on which device, and what leaked where; for a clean
    check, one line saying so. -q keeps the first series and site, -v adds every series and what
    the report section says of programs and caches."""
    head = report.worst
    over = f"over {_plural(report.iterations, 'iteration')}"
    if report.confirmed_by:
        over += f", confirmed by {_plural(report.confirmed_by, 'more run')}"
        if report.confirmed_cleared:
            over += " with jax's caches cleared"
    if not report.leaking:
        if head is None:
            return f"leak_check: no leak: nothing could be read {over}"
        return (
            f"leak_check: no leak {over}: the largest growth was {head.name} at "
            f"{format_size(max(head.growth, 0))}/iteration, under the {_threshold(report, head)}"
        )
    lines = []
    if report.leaking_series:
        grew = format_apart(head.growth, report.threshold_for(head) or head.growth)[0]
        lines.append(f"leak_check: {head.name} grew {grew}/iteration {over} ({_threshold(report, head)})")
        series = report.series if verbosity > 0 else _shown(report.leaking_series, verbosity)
        lines += ["  " + series_line(s, report.threshold_for(s) is not None) for s in series]
        lines += _leak_details(report, verbosity)
        if verbosity > 0:
            lines += ["  " + line for line in leak_section(report).splitlines()[len(report.series):]]
        lines += _files_lines(report.files)
    if report.cache_grows:
        n = len(report.kept_programs)
        lines.append(
            f"leak_check: jax's compile cache grows: {_plural(n, 'program')} compiled anew and kept in every one "
            f"of the {_plural(report.iterations, 'iteration')} (clear_caches=False), whatever the threshold: "
            "a jit made again on every call, a new static argument or a new shape each time"
        )
        lines += ["  " + kept_program_line(p) for p in report.kept_programs]
        if not report.leaking_series:
            lines += _files_lines(report.files)
    return "\n".join(lines)


def files_not_written(directory: str, error: BaseException) -> str:
    return f"(no files: writing to {directory} failed: {type(error).__name__}: {error})"


def leak_section(report: LeakReport) -> str:
    lines = [series_line(s, report.threshold_for(s) is not None) for s in report.series]
    if report.confirmed_by:
        how = "with jax's caches cleared after each" if report.confirmed_cleared or report.clear_caches else "with jax's caches kept"
        lines.append(
            f"the growth was confirmed by {_plural(report.confirmed_by, 'more run')} ({how}): a series leaks only "
            "where both grew by its threshold, and its growth is the smaller of the two"
        )
    if report.compiled:
        lines.append(f"programs compiled in each iteration: {', '.join(map(str, report.compiled))}")
    if report.confirmed_cleared and report.kept_programs:
        lines.append(
            "kept by jax's caches in every iteration (counted by their bytes only: jax's caches were kept "
            "between runs, and what clearing them frees is not a leak here): "
            + "; ".join(kept_program_line(p) for p in report.kept_programs)
        )
    if report.clear_caches and report.cache_residue:
        freed = ", ".join(f"{label} {format_size(n)}" for label, n in report.cache_residue.items())
        lines.append(f"jax.clear_caches() freed after a run, at most: {freed} (what a second run would find taken without it)")
    return "\n".join(lines)


# --- budget on a TPU target ----------------------------------------------------------------------


def buffer_line(b: Buffer) -> str:
    where = f" at {b.source}" if b.source else ""
    if b.kind.startswith("argument"):
        what = f"{b.kind} ({b.op})" if b.op else b.kind
    else:
        what = f"{b.kind} from {b.op or b.instruction} [{b.instruction}]"
    return f"{format_size(b.size):>9}  {b.shape}  {what}{where}"


def estimate_text(e: HbmEstimate, buffers: bool = True) -> str:
    """One line of figures for a program compiled for a target, then (``buffers``) its largest buffers."""
    if e.refused:
        line = (
            f"{e.target}: the TPU compiler refused the program: it needs {format_size(e.peak)} per device, "
            f"{format_size(e.capacity)} is available ({e.compiler_message})"
        )
    else:
        source = "" if e.spaces else " (XLA's peak, on-chip scratch included: no buffer assignment was read)"
        line = (
            f"{e.target} ({_plural(e.devices, 'device')}): {format_size(e.peak)} of HBM "
            f"per device{source} of {format_size(e.capacity)} (headroom {format_size(e.headroom)}); arguments "
            f"{format_size(e.arguments)}, outputs {format_size(e.outputs)}, temporaries "
            f"{format_size(e.temps)}, code {format_size(e.generated_code)}"
        )
    if buffers and e.buffers:
        line += f"\n  largest buffers on {e.target} (per device, as laid out):"
        line += "".join("\n    " + buffer_line(b) for b in e.buffers)
    return line


def _judgement_line(j: ProgramJudgement, buffers: bool = False) -> str:
    where = f" ({j.source})" if j.source else ""
    if j.estimate is None:
        return f"{j.program}{where}: not compiled for the target: {j.reason}"
    head = f"{j.program}{where}: "
    if j.resident >= max(2**20, j.estimate.peak // 100):  # smaller leftovers are in the figure, not worth a word
        head += (
            f"needs {format_size(j.need)} per device = its own {format_size(j.estimate.peak)} + "
            f"{format_size(j.resident)} of other arrays in use when it was first lowered (sizes on this run's devices); "
        )
    return head + estimate_text(j.estimate, buffers).replace("\n", "\n  ")


def target_message(r: TargetResult) -> str:
    """The failure text: programs over the budget on the target, and programs that could not be judged there."""
    topo = r.target.topology
    budget = f"the budget of {format_size(r.limit)} ({r.spelled})"
    message = []
    over = r.over
    if over and r.check == "hbm_estimate":
        message.append(f"hbm_estimate: over the budget of {format_size(r.limit)}: {estimate_text(over[0].estimate)}")
    elif over:
        worst = over[0]
        if worst.estimate.refused:
            message.append(f"max_hbm: the TPU compiler refused {worst.program} for {topo}, over {budget}")
        else:
            need, limit = format_apart(worst.need, r.limit)
            message.append(f"max_hbm: {worst.program} needs {need} per device compiled for {topo}, over the budget of {limit} ({r.spelled})")
        message += ["  " + _judgement_line(j, buffers=True) for j in over]
    unjudged = r.unjudged
    if unjudged or r.errors:
        n = len(unjudged) + len(r.errors)
        message.append(
            f"{r.check}: {_plural(n, 'program')} the test ran could not be compiled for {topo}, "
            "so the test is not judged there (judge it with the hbm_estimate fixture instead):"
        )
        message += ["  " + _judgement_line(j) for j in unjudged]
        message += [f"  {e}" for e in r.errors]
    return "\n".join(message)


def target_section(r: TargetResult) -> str:
    judged = r.judged
    small = [j for j in r.judgements if j.skipped]
    head = f"compiled for {r.target.topology}: {_plural(len(judged), 'program')} the test ran"
    if small:
        head += f"; {_plural(len(small), 'eager operation')} on under 1 MiB each not compiled"
    if not r.judgements and not r.errors:
        head += (
            " (none was lowered during the test; programs compiled ahead of time before it, with"
            " .lower().compile() in a fixture or at import, are not seen)"
        )
    return "\n".join([head] + ["  " + _judgement_line(j) for j in judged + r.unjudged])


def libtpu_install_line() -> str:
    return LIBTPU_INSTALL


def no_libtpu(topology: str, spelled: str, skipped: bool = False) -> str:
    what = f"judging this test on {topology} ({spelled}) needs libtpu, which is not installed: {libtpu_install_line()}"
    if skipped:
        return what + "; skipped, as --tpumem-no-libtpu=skip asks"
    return what + "; --tpumem-no-libtpu=skip skips such tests instead"


def no_libtpu_fixture(problem: object, skipped: bool) -> str:
    if skipped:
        return f"hbm_estimate: {problem}; skipped, as --tpumem-no-libtpu=skip asks"
    return f"hbm_estimate: {problem}; --tpumem-no-libtpu=skip skips such tests instead"


# --- the pytest glue's one-line errors -----------------------------------------------------------


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
        f"tpumem: {_plural(n, 'test')} passed but could not be leak-checked by --tpumem-leak-check=all: "
        "a later run raised (see the warnings); exempt each with @pytest.mark.leak_check(False)"
    )


def fixture_error(call: str, problem: object) -> str:
    """A fixture's bad argument or missing prerequisite: ``leak_check(...): iterations=0: ...``."""
    return f"{call}: {problem}"


NO_TARGET_HINT = "; or set --tpumem-target"


def worker_backend_lines(backends: dict[str, dict[str, Any]]) -> list[str]:
    """The backend of every pytest-xdist worker: once where they agree, else per worker."""
    distinct = {repr(sorted(b.items())): b for b in backends.values()}
    if len(distinct) == 1:
        return backend_lines(next(iter(distinct.values())))
    return [f"{worker}: {line}" for worker, b in sorted(backends.items()) for line in backend_lines(b)]


def progress(done: int, total: int) -> str:
    return f"[run {done}/{total}] "


def backend_failed(name: str, problem: str) -> str:
    return f"tpumem cannot measure {name}: the jax backend did not start: {problem}"


def not_judged(spelled: str, problem: str) -> str:
    return f"{spelled}: {problem}"


def regressed(change: str) -> str:
    """A test failed for its figure against the baseline: ``Change.describe()``."""
    return f"tpumem baseline: {change}"


COMPARE_NOT_ENFORCED = "tpumem: the comparison is shown, not enforced: add --tpumem-compare-fail peak:10% (for example) to fail regressions"


def report_written(path: str) -> str:
    return f"tpumem: report written to {path}"


def report_not_written(path: str, error: OSError) -> str:
    return f"tpumem: the report could not be written to {path}: {error.strerror or error}"


def not_swept(n: int) -> str:
    return (
        f"tpumem: {_plural(n, 'test')} not leak-checked by --tpumem-leak-check=all: "
        "not re-runnable as they are (doctests, async tests, pytest-benchmark tests, other items)"
    )


def baseline_not_saved(path: str, why: str) -> str:
    import os

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
