"""The text of a report and of a run against a baseline, for people: a report's context and tests
(``python -m pytest_tpumem show``) and a Comparison's table of changes with the tests new and
missing (``compare``, and the terminal summary under --tpumem-compare). Pure: data in, lines out.
A report may come from anyone (a CI artifact of a pull request): every line is escaped
(words.escaped), so what its ids and context hold is shown and cannot drive the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..units import format_apart, format_size, parse_size
from .markup import Block, dict_of, heading, list_of, para, size_text
from .words import escaped, plural, table

if TYPE_CHECKING:
    from ..decisions.compare import Change, Comparison
    from ..decisions.entry import Report


# --- a run against a baseline --------------------------------------------------------------------


def _delta(change: Change) -> str:
    """The change in bytes, signed; with more digits where it would read as the size tolerance it
    was judged against (+10.000001MB beyond residue:10MB, not +10.0MB)."""
    delta = change.new - change.old
    sign = "+" if delta >= 0 else "-"
    judged = change.regressed_beyond or change.improved_beyond
    amount = judged.partition(":")[2]
    if amount and not amount.endswith("%"):
        try:
            return sign + format_apart(abs(delta), parse_size(amount))[0]
        except ValueError:
            pass
    return sign + format_size(abs(delta))


def change_line(change: Change, baseline: str = "the baseline") -> str:
    """``peak 130.0MB, was 100.0MB in base.json (+30.0%, +30.0MB), beyond peak:10%``"""
    pct = "" if change.percent is None else f"{change.percent:+.1f}%, "
    line = f"{change.figure} {format_size(change.new)}, was {format_size(change.old)} in {baseline} ({pct}{_delta(change)})"
    if change.regressed:
        line += f", beyond {change.regressed_beyond}"
    elif change.improved:
        line += f", better by more than {change.improved_beyond}"
    return escaped(line)


def _status(change: Change, foreign: bool) -> str:
    """REGRESSED beyond the tolerance broken (against a baseline of another platform or device
    kind: beyond it, not judged), improved, or "-" (within every tolerance, or none given)."""
    if change.regressed:
        return (
            f"beyond {change.regressed_beyond}, not judged"
            if foreign
            else f"REGRESSED beyond {change.regressed_beyond}"
        )
    return "improved" if change.improved else "-"


def _change_row(change: Change, foreign: bool) -> tuple[str, ...]:
    percent = "-" if change.percent is None else f"{change.percent:+.1f}%"  # from 0
    return (
        change.figure,
        format_size(change.old),
        format_size(change.new),
        percent,
        _delta(change),
        _status(change, foreign),
        change.nodeid,
    )


def _test_list(title: str, nodeids: Sequence[str], top: int | None) -> list[str]:
    if not nodeids:
        return []
    shown = nodeids if top is None else nodeids[:top]
    lines = [title] + [f"  {n}" for n in shown]
    if len(shown) < len(nodeids):
        lines.append(f"  ... and {len(nodeids) - len(shown)} more")
    return lines


def _roots(comparison: Comparison) -> str:
    old, new = comparison.roots
    if old and new and old != new:
        return f"its tests are named from rootdir {old}, this run's from {new}"
    if not old:
        return "it does not say which rootdir its test ids are relative to (written by an older pytest-tpumem)"
    return f"both name tests from rootdir {new}"


def matching_lines(comparison: Comparison, baseline_name: str) -> list[str]:
    """How the tests were matched, where it was not by id alone, and the gate that compared nothing."""
    if comparison.compared_nothing:
        n_old, n_new = len(comparison.missing), len(comparison.new_tests)
        verdict = "the gate fails" if comparison.failed else "nothing was judged"
        line = (
            f"ERROR: no test compared with {baseline_name}: it has {plural(n_old, 'test')}, this run "
            f"{n_new}, and none is the same test ({_roots(comparison)}); {verdict}. Take the baseline from "
            f"this suite (--tpumem-save), or run pytest from where it was taken (first ids: "
            f"{comparison.missing[0]} there, {comparison.new_tests[0]} here)"
        )
        return [escaped(line)]
    if comparison.renamed:
        return [
            escaped(
                f"{plural(comparison.renamed, 'test')} matched with {baseline_name} under another id: "
                f"{_roots(comparison)}"
            )
        ]
    return []


def comparison_lines(comparison: Comparison, baseline_name: str, top: int | None = None, floor: int = 0) -> list[str]:
    """The changes against ``baseline_name`` (regressions, then improvements; figure by figure,
    the largest in bytes first: decisions.compare.change_order) as an aligned table, then the
    tests new since it and missing from it, and a closing count. ``top`` caps each list; changes
    smaller than ``floor`` bytes that no tolerance judged are counted, not listed (the pytest
    summary passes 1MB: a suite's many changes of a few bytes would hide the ones that matter)."""
    lines: list[str] = []
    if comparison.foreign:
        lines.append(f"WARNING: {baseline_name} is not comparable: {comparison.foreign}; changes are shown, none fails")
    lines += matching_lines(comparison, baseline_name)
    changes = list(comparison.changes)
    listed = [c for c in changes if c.regressed or c.improved or abs(c.new - c.old) >= floor]
    shown = listed if top is None else listed[:top]
    if shown:
        header = ("figure", "old", "new", "change", "bytes", "judged", "test")
        lines += table([header] + [_change_row(c, bool(comparison.foreign)) for c in shown])
        if len(shown) < len(listed):
            lines.append(f"... and {plural(len(listed) - len(shown), 'more change')}")
    if len(listed) < len(changes):
        small = len(changes) - len(listed)
        lines.append(
            f"{plural(small, 'smaller change')} (under {format_size(floor)}) not listed: "
            "python -m pytest_tpumem compare lists every one"
        )
    lines += _test_list(f"new, not in {baseline_name}:", comparison.new_tests, top)
    lines += _test_list(f"missing, in {baseline_name} but not measured:", comparison.missing, top)

    tally = [plural(len(changes), "figure") + f" changed against {baseline_name}"]
    if comparison.regressions:
        tally.append(f"{len(comparison.regressions)} regressed beyond a tolerance")
    if comparison.improvements:
        tally.append(f"{len(comparison.improvements)} improved")
    if comparison.new_tests:
        tally.append(f"{len(comparison.new_tests)} new")
    if comparison.missing:
        tally.append(f"{len(comparison.missing)} missing")
    lines.append(", ".join(tally))
    if any(c.figure in ("residue", "host_residue") for c in comparison.regressions):
        lines.append(
            "a residue is read after its test's report (once pytest has dropped its fixtures): a residue that "
            "regressed fails the run, not the test"
        )
    return [escaped(line) for line in lines]


# --- one report ----------------------------------------------------------------------------------


def _size(n: Any) -> str:
    return "-" if n is None else format_size(n)


def context_lines(context: dict[str, Any], processes: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Where and when a report was taken: platform and devices, versions, commit, process (or the
    processes it was merged from), start."""
    devices = f"platform {context.get('platform') or '?'}, device kind {context.get('device_kind') or '?'}"
    if context.get("device_count") is not None:
        devices += f", {plural(int(context['device_count']), 'device')}"
    lines = [devices]
    versions = context.get("versions") or {}
    if versions:
        lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    git = context.get("git")
    if isinstance(git, dict) and git.get("commit"):
        dirty = {True: " (work tree modified)", False: "", None: " (work tree state unknown)"}[git.get("dirty")]
        lines.append(f"git commit {git['commit']}{dirty}")
    if context.get("merged_from"):
        where = f"merged from {plural(int(context['merged_from']), 'process', 'processes')}"
        hosts = sorted({str(p.get("hostname")) for p in processes if isinstance(p, dict) and p.get("hostname")})
        where += f" on {', '.join(hosts)}" if 0 < len(hosts) <= 4 else f" on {len(hosts)} hosts" if hosts else ""
    else:
        where = f"process {context.get('process_index', '?')} of {context.get('process_count', '?')}"
        where += f" on {context['hostname']}" if context.get("hostname") else ""
    lines.append(f"{where}, started {context.get('started') or '?'}")
    return [escaped(line) for line in lines]


def report_lines(report: Report) -> list[str]:
    """A report for ``show``: its context, then its tests worst first as an aligned table
    (verdict, peak, budget, growth per iteration, test), then a count."""
    lines = context_lines(report.context, report.processes)
    tests = sorted(report.tests.items(), key=lambda i: i[1].worst_first())
    rows: list[tuple[str, ...]] = [("verdict", "peak", "budget", "growth/iter", "test")]
    for nodeid, e in tests:
        rows.append((e.verdict.value, _size(e.peak), _size(e.budget), _size(e.growth), nodeid))
    failed = report.failed
    lines.append("")
    lines += table(rows) if tests else ["no test measured"]
    lines.append(f"{len(tests)} measured, {failed} failed a memory check")
    return lines


def regressed_html(check: dict[str, Any], nodeid: str) -> list[Block]:
    """A test's regression against the baseline (telling.rows.regressed_row) in its section on the
    run's page (telling.html): each figure that regressed, and beyond which tolerance."""
    changes = ", ".join(
        f"{c.get('figure')} {size_text(c.get('old'))} to {size_text(c.get('new'))} beyond {c.get('beyond')}"
        for c in map(dict_of, list_of(check.get("changes")))
    )
    return [heading("against the baseline: regressed"), para(changes)]
