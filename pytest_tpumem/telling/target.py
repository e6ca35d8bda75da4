"""A budget on a TPU target, told: the target in the header, what a program needs compiled for it,
the failure text, the report section and the row of a ``decisions.target.TargetResult``, that row
on the run's page, and what is said where libtpu is missing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LIBTPU_INSTALL
from ..units import format_apart, format_size
from .budget import buffer_line, precision_lines
from .markup import Block, dict_of, heading, list_of, size_text, table_block
from .upcast import upcast_record, upcasts_html
from .words import plural

if TYPE_CHECKING:
    from ..decisions.target import ProgramJudgement, TargetResult
    from ..readings.tpu import HbmEstimate
    from ..targets import Target


def target_text(target: Target) -> str:
    per = "per chip" if target.device == "chip" else "per TensorCore (2 a chip)"
    return f"{target.topology}: {format_size(target.hbm_per_device)} usable HBM {per}"


def capacity_source(target: Target) -> str:
    return f"a {target.topology} {target.device}'s usable HBM"


def target_line(target: Target) -> str:
    return (
        f"tpumem: target {target_text(target)} (budgeted tests' programs are compiled for it; hbm_estimate's default)"
    )


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
            f"{e.target} ({plural(e.devices, 'device')}): {format_size(e.peak)} of HBM "
            f"per device{source} of {format_size(e.capacity)} (headroom {format_size(e.headroom)}); arguments "
            f"{format_size(e.arguments)}, outputs {format_size(e.outputs)}, temporaries "
            f"{format_size(e.temps)}, code {format_size(e.generated_code)}"
        )
    if buffers and e.buffers:
        line += f"\n  largest buffers on {e.target} (per device, as laid out):"
        line += "".join("\n    " + buffer_line(b) for b in e.buffers)
    return line


def judgement_line(j: ProgramJudgement, buffers: bool = False) -> str:
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


def message(r: TargetResult, verbosity: int = 0) -> str:
    """The failure text: programs over the budget on the target, and programs that could not be judged there."""
    topo = r.target.topology
    budget = f"the budget of {format_size(r.limit)} ({r.spelled})"
    lines = []
    over = r.over
    estimates = [j.estimate for j in over if j.estimate is not None]  # every one over was compiled
    if estimates and r.check == "hbm_estimate":
        lines.append(f"hbm_estimate: over the budget of {format_size(r.limit)}: {estimate_text(estimates[0])}")
        lines += precision_lines(r.upcasts, None, verbosity)
    elif estimates:
        worst = over[0]
        if estimates[0].refused:
            lines.append(f"max_hbm: the TPU compiler refused {worst.program} for {topo}, over {budget}")
        else:
            need, limit = format_apart(worst.need, r.limit)
            lines.append(
                f"max_hbm: {worst.program} needs {need} per device compiled for {topo}, over the budget of {limit} ({r.spelled})"
            )
        lines += ["  " + judgement_line(j, buffers=True) for j in over]
        lines += precision_lines(r.upcasts, None, verbosity)
    unjudged = r.unjudged
    if unjudged or r.errors:
        n = len(unjudged) + len(r.errors)
        lines.append(
            f"{r.check}: {plural(n, 'program')} the test ran could not be compiled for {topo}, "
            "so the test is not judged there (judge it with the hbm_estimate fixture instead):"
        )
        lines += ["  " + judgement_line(j) for j in unjudged]
        lines += [f"  {e}" for e in r.errors]
    return "\n".join(lines)


def section(r: TargetResult) -> str:
    judged = r.judged
    small = [j for j in r.judgements if j.skipped]
    head = f"compiled for {r.target.topology}: {plural(len(judged), 'program')} the test ran"
    if small:
        head += f"; {plural(len(small), 'eager operation')} on under 1 MiB each not compiled"
    if not r.judgements and not r.errors:
        head += (
            " (none was lowered during the test; programs compiled ahead of time before it, with"
            " .lower().compile() in a fixture or at import, are not seen)"
        )
    return "\n".join([head] + ["  " + judgement_line(j) for j in judged + r.unjudged])


def no_libtpu(topology: str, spelled: str, skipped: bool = False) -> str:
    what = f"judging this test on {topology} ({spelled}) needs libtpu, which is not installed: {LIBTPU_INSTALL}"
    if skipped:
        return what + "; skipped, as --tpumem-no-libtpu=skip asks"
    return what + "; --tpumem-no-libtpu=skip skips such tests instead"


def no_libtpu_fixture(problem: object, skipped: bool) -> str:
    if skipped:
        return f"hbm_estimate: {problem}; skipped, as --tpumem-no-libtpu=skip asks"
    return f"hbm_estimate: {problem}; --tpumem-no-libtpu=skip skips such tests instead"


NO_TARGET_HINT = "; or set --tpumem-target"


def row(r: TargetResult) -> dict[str, Any]:
    return {
        "check": "target",
        "verdict": r.verdict.value,
        "budget": r.limit,
        "budget_source": r.spelled,
        "target": r.target.topology,
        "peaks": {r.target.topology: r.need},
        "witness": f"compiled for {r.target.topology}",
        "programs": [
            {
                "program": j.program,
                "source": j.source,
                "need": j.need if j.estimate is not None else None,
                "resident": j.resident,
                "not_judged": j.reason or None,
            }
            for j in r.judgements
            if not j.skipped
        ],
        "errors": list(r.errors),
        "upcasts": [upcast_record(u) for u in r.upcasts],
    }


def html(check: dict[str, Any], nodeid: str) -> list[Block]:
    """A TPU target's part of its test's section on the run's page (telling.html), from its
    record: what each program needs there, and the upcasts."""
    programs = [
        (p.get("program", ""), size_text(p.get("need")), p.get("source") or "", p.get("not_judged") or "")
        for p in map(dict_of, list_of(check.get("programs")))
    ]
    return [
        heading(
            f"TPU target {check.get('target', '')}: {check.get('verdict', '')}, budget {size_text(check.get('budget'))}"
        ),
        *table_block(("program", "needs", "source", "not judged"), programs, (1,)),
        *upcasts_html(list_of(check.get("upcasts"))),
    ]
