"""How results are told: failure messages, per-test rows (plain dicts, so xdist can carry them
to the controller in ``user_properties``) and the terminal summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .leak import LeakReport
from .peak import DevicePeak, PeakReport
from .units import format_size

PROPERTY = "pytest_tpumem"  # the user_properties key; namespaced so a user's own "tpumem" cannot clash
STAND_IN_NOTE = (
    "live arrays stand in for device memory (CPU backend: XLA temporaries are seen only for programs "
    "compiled during the test)"
)
_RANK = {"oom": 0, "leak": 1, "over budget": 2, "ok": 3}


def versions_line(versions: dict[str, str]) -> str:
    """The header before any device is read: what is installed, and when the devices will be read."""
    installed = ", ".join(f"{name} {v}" for name, v in versions.items()) or "jax not installed"
    return (
        f"tpumem: {installed}; devices are read when the first measured test starts "
        "(after the suite has configured jax) and listed in the summary"
    )


def settings_line(max_hbm: int | None, leak_threshold: int) -> str:
    budget = format_size(max_hbm) if max_hbm else "none"
    return f"tpumem: default budget {budget}, leak threshold {format_size(leak_threshold)}/iteration"


def backend_lines(s: dict[str, Any]) -> list[str]:
    """The backend, its devices and the sources they offer (``sources.backend_summary()``)."""
    if "error" in s:
        return [f"tpumem: the jax backend did not start, so no device can be read: {s['error']}"]
    known = s["known_stats"]
    if not s["memory_stats"]:
        stats = "no memory_stats"
    else:
        stats = f"memory_stats ({', '.join(known) if known else 'every field unknown (-1)'})"
    stand_in = "" if "bytes_in_use" in known else "; live arrays stand in for device memory"
    host = "host RSS + VmHWM" if s["host_peak_resettable"] else "host RSS (per-test host peak unavailable)"
    limit = f", bytes_limit {format_size(s['bytes_limit'])}" if s["bytes_limit"] else ""
    devices = s["devices"]
    return [
        f"tpumem: jax {s['jax']}, backend {s['backend']} ({s['device_kind']}), "
        f"{len(devices)} local device{'s' if len(devices) != 1 else ''}: {', '.join(devices[:8])}{' ...' if len(devices) > 8 else ''}{limit}",
        f"tpumem: sources: live arrays, {stats}, compiled programs, {host}{stand_in}",
    ]


def _peak_line(d: DevicePeak) -> str:
    seen = ", ".join(f"{k} {format_size(v)}" for k, v in d.witnesses.items())
    return f"{d.device}: start {format_size(d.start)}, peak {format_size(d.peak)} by {d.witness} [{seen}]"


def budget_message(report: PeakReport, budget: int, spelled: str) -> str:
    """Short failure text for a test over its budget."""
    over = sorted(report.over(budget), key=lambda d: -d.peak)
    worst = over[0]
    lines = [
        f"max_hbm: peak {format_size(worst.peak)} on {worst.device} is over the budget of "
        f"{format_size(budget)} ({spelled}), judged by {worst.witness}"
    ]
    if worst.stand_in:
        lines[0] += f"; {STAND_IN_NOTE}"
    lines += ["  " + _peak_line(d) for d in over]
    return "\n".join(lines)


def oom_message(error: BaseException, budget: int | None, report: PeakReport | None) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    lines = [f"out of device memory in this test (budget {format_size(budget)}): {first[:300]}"]
    if report is not None:
        lines += ["  " + _peak_line(d) for d in report.devices.values()]
    lines.append("  tpumem freed the test's frames and jax's caches so the tests after it can run")
    return "\n".join(lines)


@dataclass(frozen=True)
class TargetVerdict:
    """A test's programs as compiled for a TPU target: what failed, and the long form."""

    failed: bool
    message: str  # the failure text, where failed
    detail: str  # every program, for the report section
    topology: str
    need: int  # the largest need per device among the programs compiled for the target


def _judgement_line(j: Any, buffers: bool = False) -> str:
    where = f" ({j.source})" if j.source else ""
    if j.estimate is None:
        return f"{j.program}{where}: not compiled for the target: {j.reason}"
    head = f"{j.program}{where}: "
    if j.resident >= max(2**20, j.estimate.peak // 100):  # smaller leftovers are in the figure, not worth a word
        head += (
            f"needs {format_size(j.need)} per device = its own {format_size(j.estimate.peak)} + "
            f"{format_size(j.resident)} of other arrays in use when it was first lowered (sizes on this run's devices); "
        )
    return head + j.estimate.describe(buffers).replace("\n", "\n  ")


def target_message(judgements: list[Any], errors: list[str], limit: int, spelled: str, target: Any) -> TargetVerdict:
    """Judge each program compiled for the target against ``limit``; programs that could not be
    compiled there (or capture errors) fail the test too, since it was not judged."""
    judged = sorted((j for j in judgements if j.estimate is not None), key=lambda j: -j.need)
    small = [j for j in judgements if j.skipped]
    unjudged = [j for j in judgements if j.estimate is None and not j.skipped]
    over = [j for j in judged if j.estimate.refused or j.need > limit]
    topo = target.topology
    detail = [f"compiled for {topo}: {len(judged)} program{'s' if len(judged) != 1 else ''} the test ran"]
    if small:
        detail[0] += f"; {len(small)} eager operation{'s' if len(small) != 1 else ''} on under 1 MiB each not compiled"
    if not judgements and not errors:
        detail[0] += (
            " (none was lowered during the test; programs compiled ahead of time before it, with"
            " .lower().compile() in a fixture or at import, are not seen)"
        )
    detail += ["  " + _judgement_line(j) for j in judged + unjudged]
    message = []
    if over:
        worst = over[0]
        if worst.estimate.refused:
            message.append(
                f"max_hbm: the TPU compiler refused {worst.program} for {topo}, over the budget of "
                f"{format_size(limit)} ({spelled})"
            )
        else:
            message.append(
                f"max_hbm: {worst.program} needs {format_size(worst.need)} per device compiled for {topo}, "
                f"over the budget of {format_size(limit)} ({spelled})"
            )
        message += ["  " + _judgement_line(j, buffers=True) for j in over]
    if unjudged or errors:
        n = len(unjudged) + len(errors)
        message.append(
            f"max_hbm: {n} program{'s' if n != 1 else ''} the test ran could not be compiled for {topo}, "
            "so the test is not judged there (judge it with the hbm_estimate fixture instead):"
        )
        message += ["  " + _judgement_line(j) for j in unjudged]
        message += [f"  {e}" for e in errors]
    return TargetVerdict(
        failed=bool(message),
        message="\n".join(message),
        detail="\n".join(detail),
        topology=topo,
        need=judged[0].need if judged else 0,
    )


def detail(report: PeakReport | None, leak: LeakReport | None) -> str:
    """The long form, for the test's report section."""
    lines = []
    if report is not None:
        lines += [_peak_line(d) for d in report.devices.values()]
        if report.host_peak is not None:
            lines.append(f"host peak (VmHWM): {format_size(report.host_peak)}")
        for p in report.programs:
            lines.append(
                f"compiled {p.name} on {','.join(p.devices)}: peak {format_size(p.peak)} "
                f"(arguments {format_size(p.arguments)}, outputs {format_size(p.outputs)}, temps {format_size(p.temps)})"
            )
    if leak is not None:
        lines += [s.describe() for s in leak.series]
    return "\n".join(lines)


def row(
    peak: PeakReport | None = None,
    budget: int | None = None,
    leak: LeakReport | None = None,
    verdict: str = "ok",
    target: TargetVerdict | None = None,
) -> dict[str, Any]:
    """One JSON-able record of what was measured for a test."""
    out: dict[str, Any] = {"verdict": verdict, "budget": budget}
    if peak is not None:
        out["peaks"] = {d.device: d.peak for d in peak.devices.values()}
        out["witness"] = peak.worst.witness if peak.worst else ""
        out["stand_in"] = any(d.stand_in for d in peak.devices.values())
        out["host_peak"] = peak.host_peak
    if target is not None:
        out.setdefault("peaks", {})[target.topology] = target.need
        out["witness"] = (out.get("witness", "") + "; " if out.get("witness") else "") + f"compiled for {target.topology}"
    if leak is not None:
        worst = leak.worst
        out["growth"] = worst.growth if worst else 0
        out["growth_source"] = worst.name if worst else ""
        out["threshold"] = leak.threshold
    return out


def merge(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Several records of one test (a marker and a fixture call) as one, the worst verdict kept."""
    out: dict[str, Any] = {}
    for r in rows:
        verdict = min(out.get("verdict", "ok"), r.get("verdict", "ok"), key=_RANK.__getitem__)
        if "growth" in out and "growth" in r and r["growth"] < out["growth"]:
            r = {k: v for k, v in r.items() if not k.startswith("growth")}
        out.update({k: v for k, v in r.items() if v is not None})
        out["verdict"] = verdict
    return out


def _sort_key(item: tuple[str, dict[str, Any]]) -> tuple:
    _, r = item
    peak = max(r.get("peaks", {0: 0}).values())
    ratio = peak / r["budget"] if r.get("budget") else 0.0
    growth_ratio = r.get("growth", 0) / r["threshold"] if r.get("threshold") else 0.0
    return (_RANK.get(r["verdict"], 9), -max(ratio, growth_ratio), -peak)


def _peaks_cell(r: dict[str, Any]) -> str:
    peaks = r.get("peaks")
    if not peaks:
        return "-"
    used = {dev: n for dev, n in peaks.items() if n > 0} or dict(list(peaks.items())[:1])
    if len(used) <= 4:
        return ", ".join(f"{dev} {format_size(n)}" for dev, n in used.items())
    dev, n = max(used.items(), key=lambda kv: kv[1])
    return f"max {format_size(n)} on {dev}, {len(used)} devices used"


def summary_lines(rows: dict[str, dict[str, Any]], top: int, quiet: bool) -> list[str]:
    """Aligned rows, worst first; under -q only the tests that did not pass their checks."""
    items = sorted(rows.items(), key=_sort_key)
    bad = [i for i in items if i[1]["verdict"] != "ok"]
    shown = bad if quiet else items
    shown = shown[:top]
    table = [("verdict", "peak per device", "budget", "growth/iter", "source", "test")]
    for nodeid, r in shown:
        source = r.get("witness", "")
        if r.get("growth_source"):
            source = (source + "; " if source else "") + r["growth_source"]
        table.append(
            (
                r["verdict"],
                _peaks_cell(r),
                format_size(r["budget"]) if r.get("budget") else "-",
                format_size(r["growth"]) if "growth" in r else "-",
                source,
                nodeid,
            )
        )
    widths = [max(len(t[i]) for t in table) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(t[:5], widths)) + "  " + t[5] for t in table] if shown else []
    total = f"{len(items)} measured, {len(bad)} failed a memory check"
    if len(shown) < (len(bad) if quiet else len(items)):
        total += f" (showing {len(shown)}, see --tpumem-top)"
    if any(r.get("stand_in") for r in rows.values()):
        total += f"; {STAND_IN_NOTE}"
    lines.append(total)
    return lines
