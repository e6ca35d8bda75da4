"""One page a person opens after a run (``--tpumem-html``, ``python -m pytest_tpumem html``): the
run's context and verdict counts, every measured test in a table that sorts and filters, each
test's failure text, leak sites, largest arrays, upcasts and leak timeline, the baseline comparison
(regressions first), and the suite ledger with its picture of the session.

Made from a report alone (decisions.entry.Report, as the JSON file holds it), so the page of a
pytest run and the page of reports merged afterwards are the same page. Self-contained: its style,
script and pictures are inline, nothing is fetched (its Content-Security-Policy forbids it), and
everything taken from a test id, a message or a report is escaped. Pure: data in, text out.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..decisions.ledger import host_named, over, program_cost
from ..decisions.verdict import Verdict, rank_of
from ..units import format_size
from .comparison import change_line, context_lines, matching_lines
from .ledger import host_lines, line_of_record
from .svg import leak_timeline, session_picture
from .words import STAND_IN_NOTE, escaped, plural

if TYPE_CHECKING:
    from ..decisions.compare import Comparison
    from ..decisions.entry import Entry, Report

LEDGER_ROWS = 5000  # the suite ledger's table lists at most this many tests (the largest residues first)

# The page's style and script, package files beside this module (read once, when a page is made).
STYLE, SCRIPT = "page.css", "page.js"


@functools.cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    """Text for the page: escaped as markup, and its control characters and lone surrogates as
    words.escaped writes them (a test file's name that is not UTF-8 would leave the page
    unwritable; an ESC is shown, not dropped), its line breaks and tabs kept (a failure's text)."""
    return escape(escaped(str(value), keep="\t\n\r"), quote=True)


def _int(value: Any) -> int | None:
    """A whole number from a report, or None (a report is read back checked only where a gate needs it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _size(value: Any) -> str:
    n = _int(value)
    return "-" if n is None else format_size(n)


def _num_cell(value: Any, text: str | None = None) -> str:
    n = _int(value)
    return f'<td class="n" data-value="{"" if n is None else n}">{_e(text if text is not None else _size(n))}</td>'


def _verdict_class(verdict: str) -> str:
    if verdict == Verdict.OK.value:
        return "v-ok"
    return "v-warn" if verdict == Verdict.NOT_JUDGED.value else "v-bad"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = (), cls: str = "") -> str:
    """A table of already-escaped cells; the columns in ``numeric`` right-aligned."""
    heads = "".join(f"<th{' class=n' if i in numeric else ''}>{_e(h)}</th>" for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table{f' class={cls}' if cls else ''}><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True)
class _Series:
    """A leak check's series as the report keeps it, in the shape telling.svg.leak_timeline draws."""

    name: str
    device: str
    values: tuple[int, ...]
    every: bool
    growth: int
    judged: bool = True  # its record's threshold is not null (host RSS beside the host's split, host=False)


@dataclass(frozen=True)
class _Timeline:
    series: tuple[_Series, ...]
    iterations: int
    threshold: int
    leaking_series: tuple[_Series, ...] = field(default=())

    def threshold_for(self, series: _Series) -> int | None:
        return self.threshold if series.judged else None


def leak_picture(check: dict[str, Any], title: str) -> str:
    """A leak check's timeline (telling.svg.leak_timeline) from its record in a report; "" where
    the record has no series to draw."""
    series, leaking = [], []
    for name, s in _dict(check.get("series")).items():
        values = _list(_dict(s).get("values"))
        if not values or not all(_int(v) is not None for v in values):
            continue
        one = _Series(
            str(name),
            str(s.get("device", "")),
            tuple(values),
            bool(s.get("every")),
            _int(s.get("growth")) or 0,
            not s.get("shown_only") and ("threshold" not in s or _int(s["threshold"]) is not None),
        )
        series.append(one)
        if s.get("leaks"):
            leaking.append(one)
    threshold = _int(check.get("threshold"))
    if not series or threshold is None:
        return ""
    iterations = max(len(s.values) for s in series) - 1
    series = [s for s in series if len(s.values) == iterations + 1]
    return leak_timeline(_Timeline(tuple(series), iterations, threshold, tuple(leaking)), title)  # type: ignore[arg-type]


def _context(report: Report, sources: Sequence[str]) -> str:
    context = report.context
    lines = context_lines(context, report.processes)
    started, finished = context.get("started") or "?", context.get("finished") or "?"
    lines.append(f"from {started} to {finished}")
    if context.get("rootdir"):
        lines.append(f"rootdir {context['rootdir']}")
    if context.get("stand_in"):
        lines.append(f"CPU stand-in: {STAND_IN_NOTE}")
    limit = _int(context.get("bytes_limit"))
    if limit is not None:
        lines.append(f"bytes_limit {format_size(limit)} per device")
    if sources:
        lines.append("read from " + ", ".join(sources))
    return '<div class="context">' + "".join(f"<p>{_e(line)}</p>" for line in lines) + "</div>"


def _counts(report: Report) -> str:
    verdicts: dict[str, int] = {}
    for entry in report.tests.values():
        verdicts[entry.verdict.value] = verdicts.get(entry.verdict.value, 0) + 1
    chips = [f"<span>{report.measured} measured</span>"]
    for v in sorted(verdicts, key=rank_of):
        chips.append(f'<span class="{_verdict_class(v)}">{verdicts[v]} {_e(v)}</span>')
    ledger = report.ledger
    if ledger is not None:
        named = sum(1 for line in ledger.tests.values() if over(_int(line.get("left")) or 0, ledger.threshold))
        chips.append(f"<span>{plural(len(ledger.tests), 'test')} in the suite ledger</span>")
        chips.append(
            f'<span class="{"v-bad" if named else "v-ok"}">{named} left {_e(format_size(ledger.threshold))} or more</span>'
        )
        if ledger.crashed:
            chips.append(f'<span class="v-bad">{plural(len(ledger.crashed), "worker")} crashed</span>')
    return '<p class="counts">' + "".join(chips) + "</p>"


def _comparison(comparison: Comparison, baseline: str) -> str:
    out = [f"<h2 id=comparison>Against the baseline {_e(baseline)}</h2>"]
    if comparison.foreign:
        out.append(
            f'<p class="v-warn">{_e(baseline)} is not comparable: {_e(comparison.foreign)}; changes are shown, none fails</p>'
        )
    out += [f'<p class="v-bad">{_e(line)}</p>' for line in matching_lines(comparison, baseline)]
    rows = []
    for c in comparison.changes:  # in decisions.compare.change_order: regressions first
        status = f"regressed beyond {c.regressed_beyond}" if c.regressed else "improved" if c.improved else "-"
        delta = c.new - c.old
        rows.append(
            (
                f'<span class="{"v-bad" if c.regressed else "v-ok" if c.improved else ""}">{_e(status)}</span>',
                _e(c.figure),
                _e(format_size(c.old)),
                _e(format_size(c.new)),
                _e("-" if c.percent is None else f"{c.percent:+.1f}%"),
                _e(("+" if delta >= 0 else "-") + format_size(abs(delta))),
                f'<span class="id" title="{_e(change_line(c, baseline))}">{_e(c.nodeid)}</span>',
            )
        )
    if rows:
        out.append(_table(("judged", "figure", "old", "new", "change", "bytes", "test"), rows, (2, 3, 4, 5)))
    else:
        out.append("<p>no figure changed</p>")
    for title, ids in (
        (f"new, not in {baseline}", comparison.new_tests),
        (f"missing, in {baseline} but not measured", comparison.missing),
    ):
        if ids:
            out.append(
                f"<h3>{_e(title)} ({len(ids)})</h3><ul>"
                + "".join(f"<li><code>{_e(i)}</code></li>" for i in ids)
                + "</ul>"
            )
    return "".join(out)


def _residues(report: Report) -> dict[str, int]:
    if report.ledger is None:
        return {}
    return {t: r for t, line in report.ledger.tests.items() if (r := _int(line.get("residue"))) is not None}


def _tests_table(report: Report, anchors: dict[str, str]) -> str:
    residues = _residues(report)
    verdicts = sorted({e.verdict.value for e in report.tests.values()}, key=rank_of)
    options = '<option value="">every verdict</option>' + "".join(f"<option>{_e(v)}</option>" for v in verdicts)
    filters = (
        '<div class="filters"><input id="filter" type="search" placeholder="filter by test id" aria-label="filter by test id"> '
        f'<select id="verdict" aria-label="verdict">{options}</select> <span id="shown" class="muted"></span></div>'
    )
    head = ("test", "verdict", "outcome", "peak", "budget", "growth/iter", "threshold", "residue", "witness")
    numeric = {3, 4, 5, 6, 7}
    heads = "".join(f"<th{' class=n' if i in numeric else ''}>{h}</th>" for i, h in enumerate(head))
    rows = []
    for nodeid, e in sorted(report.tests.items(), key=lambda i: (i[1].worst_first(), i[0])):
        v = e.verdict.value
        rows.append(
            f'<tr data-test="{_e(nodeid)}" data-verdict="{_e(v)}">'
            f'<td class="id"><a href="#{anchors[nodeid]}">{_e(nodeid)}</a></td>'
            f'<td data-value="{rank_of(v)}" class="{_verdict_class(v)}">{_e(v)}</td>'
            f"<td>{_e(e.outcome or '-')}</td>"
            + _num_cell(e.peak)
            + _num_cell(e.budget)
            + _num_cell(e.growth)
            + _num_cell(e.threshold)
            + _num_cell(residues.get(nodeid))
            + f"<td>{_e(e.witness or '-')}</td></tr>"
        )
    return (
        filters
        + f'<table id="tests" class="sortable"><thead><tr>{heads}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _buffers(title: str, buffers: list[Any]) -> str:
    rows = []
    for b in buffers:
        b = _dict(b)
        rows.append((_e(_size(b.get("bytes"))), _e(b.get("shape", "")), _e(b.get("text", ""))))
    return f"<h3>{_e(title)}</h3>" + _table(("bytes", "shape", "what, and where"), rows, (0,)) if rows else ""


def _upcasts(records: list[Any]) -> str:
    """A budget's or a target's upcasts: the line, the wide value, and what it is and costs."""
    rows = [(_e(r.get("line") or ""), _e(r.get("shape", "")), _e(r.get("text", ""))) for r in map(_dict, records)]
    if not rows:
        return ""
    return "<h3>upcasts (narrow floats the code turned wide)</h3>" + _table(
        ("line", "wide value", "what it is, what it costs"), rows
    )


def _check(check: dict[str, Any], nodeid: str) -> str:
    kind = str(check.get("check", ""))
    out = []
    rows: list[tuple[str, ...]]
    if kind in ("budget", "peak"):
        devices = _dict(check.get("devices"))
        rows = []
        for label, d in devices.items():
            d = _dict(d)
            witnesses = ", ".join(f"{k} {_size(v)}" for k, v in _dict(d.get("witnesses")).items())
            rows.append(
                (
                    _e(label),
                    _e(_size(d.get("peak"))),
                    _e(_size(d.get("start"))),
                    _e(d.get("witness", "")),
                    _e(witnesses),
                )
            )
        budget = f", budget {_size(check.get('budget'))} ({check.get('budget_source')})" if check.get("budget") else ""
        out.append(f"<h3>{_e(kind)}: {_e(check.get('verdict', ''))}{_e(budget)}</h3>")
        if rows:
            out.append(_table(("device", "peak", "at start", "witness", "every witness"), rows, (1, 2)))
        out.append(_upcasts(_list(check.get("upcasts"))))
        out.append(_buffers("largest arrays of the programs it ran", _list(check.get("buffers"))))
    elif kind == "leak":
        growth = f"growth {_size(check.get('growth'))}/iteration, threshold {_size(check.get('threshold'))}"
        out.append(
            f"<h3>leak check: {_e(check.get('verdict', ''))}, {_e(growth)}, {_e(check.get('iterations'))} iterations</h3>"
        )
        picture = leak_picture(check, nodeid)
        if picture:
            out.append(f'<div class="picture timeline">{picture}</div>')
        sites = [_dict(s) for s in _list(check.get("sites"))]
        if sites:
            rows = [
                (
                    _e(_size(s.get("bytes"))),
                    _e(s.get("arrays", "")),
                    _e(s.get("runs", "")),  # of how many runs: a line whose arrays of every run are alive piles up
                    _e(", ".join(map(str, _list(s.get("shapes"))))),
                    _e(s.get("site", "")),
                )
                for s in sites
            ]
            out.append(
                "<h3>arrays alive after the last run, made after the warmup, by the line that made them</h3>"
                + _table(("bytes", "arrays", "of runs", "shapes", "made at"), rows, (0, 1, 2))
            )
        host = [_dict(s) for s in _list(check.get("host_sites"))]
        if host:
            rows = [(_e(_size(s.get("bytes"))), _e(s.get("allocations", "")), _e(s.get("site", ""))) for s in host]
            out.append("<h3>host memory kept, by line</h3>" + _table(("bytes", "allocations", "at"), rows, (0, 1)))
        kept = [_dict(k) for k in _list(check.get("kept_programs"))]
        if kept:
            rows = [(_e(k.get("per_iteration", "")), _e(k.get("program", "")), _e(k.get("site", ""))) for k in kept]
            out.append(
                "<h3>programs compiled anew and kept every iteration</h3>"
                + _table(("per iteration", "program", "compiled at"), rows, (0,))
            )
    elif kind == "target":
        rows = [
            (
                _e(p.get("program", "")),
                _e(_size(p.get("need"))),
                _e(p.get("source") or ""),
                _e(p.get("not_judged") or ""),
            )
            for p in map(_dict, _list(check.get("programs")))
        ]
        out.append(
            f"<h3>TPU target {_e(check.get('target', ''))}: {_e(check.get('verdict', ''))}, budget {_e(_size(check.get('budget')))}</h3>"
        )
        if rows:
            out.append(_table(("program", "needs", "source", "not judged"), rows, (1,)))
        out.append(_upcasts(_list(check.get("upcasts"))))
    elif kind == "oom":
        out.append(f"<h3>out of memory</h3><pre>{_e(check.get('error', ''))}</pre>")
    elif kind == "baseline":
        changes = ", ".join(
            f"{c.get('figure')} {_size(c.get('old'))} to {_size(c.get('new'))} beyond {c.get('beyond')}"
            for c in map(_dict, _list(check.get("changes")))
        )
        out.append(f"<h3>against the baseline: regressed</h3><p>{_e(changes)}</p>")
    return "".join(out)


def _explanation(line: dict[str, Any]) -> str:
    """A ledger line's explanation: what the test made that is still alive, and who keeps it."""
    out = []
    rows: list[tuple[str, ...]]
    made = [_dict(m) for m in _list(line.get("made"))]
    if made:
        rows = [
            (_e(_size(m.get("bytes"))), _e(m.get("arrays", "")), _e(m.get("shape", "")), _e(m.get("site", "")))
            for m in made
        ]
        out.append(_table(("bytes", "arrays", "shape", "made at"), rows, (0, 1)))
    held = [_dict(h) for h in _list(line.get("held"))]
    if held:
        rows = [(_e(_size(h.get("bytes"))), _e(h.get("by", "")), _e(h.get("path", ""))) for h in held]
        out.append(_table(("bytes", "kept by", "path"), rows, (0,)))
    for key, words in (("traceback", "kept by its failure's traceback"), ("collected", "freed by gc.collect()")):
        if _int(line.get(key)):
            out.append(f"<p>{_e(words)}: {_e(_size(line.get(key)))}</p>")
    return "".join(out)


def _test_details(nodeid: str, entry: Entry, anchor: str, ledger_line: dict[str, Any] | None) -> str:
    v = entry.verdict.value
    peaks = ", ".join(f"{d} {format_size(p)}" for d, p in entry.peaks.items())
    out = [
        f'<details class="test" id="{anchor}"{" open" if entry.failed else ""}>'
        f'<summary><span class="{_verdict_class(v)}">{_e(v)}</span> {_e(nodeid)}</summary>'
    ]
    if peaks:
        out.append(
            f"<p>peak per device: {_e(peaks)}"
            + (" (live arrays stand in for device memory)" if entry.stand_in else "")
            + "</p>"
        )
    if entry.growth_source:
        out.append(f"<p>growth from {_e(entry.growth_source)}</p>")
    if entry.failure:
        out.append(f"<h3>failure</h3><pre>{_e(entry.failure)}</pre>")
    out += [_check(_dict(c), nodeid) for c in entry.checks]
    if ledger_line is not None and ledger_line.get("made"):
        out.append(
            f"<h3>left behind after its teardown: {_e(_size(ledger_line.get('residue')))}</h3>"
            + _explanation(ledger_line)
        )
    out.append("</details>")
    return "".join(out)


def _host_named(ledger: Any, lines: dict[str, dict[str, Any]]) -> list[str]:
    """The tests named for the host memory they grew, the most first, each with why (telling.ledger.host_lines)."""
    parsed = {t: line_of_record(t, line) for t, line in lines.items()}
    named = sorted(
        (line for line in parsed.values() if host_named(line, ledger.host_threshold)),
        key=lambda line: (-(line.grew or 0), line.test),
    )
    if not named:
        return []
    cost = program_cost(list(parsed.values()), ledger.threshold)
    out = [
        f"<h3>named: {plural(len(named), 'test')} that grew host memory "
        f"{_e(format_size(ledger.host_threshold))} or more</h3>"
    ]
    for line in named:
        why = "".join(f"<li>{_e(x)}</li>" for x in host_lines(line, cost))
        out.append(
            f'<details class="test" open><summary>{_e(line.test)}: host memory +{_e(format_size(line.grew or 0))}'
            f"</summary><ul>{why}</ul></details>"
        )
    return out


def _ledger(report: Report) -> str:
    ledger = report.ledger
    if ledger is None:
        return ""

    out = [
        "<h2 id=ledger>The suite ledger</h2>",
        f"<p>What each test left behind after its teardown: the bytes of the arrays it made that are still alive "
        f"(residue). A test is named at {_e(format_size(ledger.threshold))} or more (--tpumem-residue), less what "
        "only a failed test's traceback keeps.</p>",
    ]
    for crash in ledger.crashed:
        crash = _dict(crash)
        said = "\n".join(map(str, _list(crash.get("said"))))
        out.append(
            f'<h3 class="v-bad">worker {_e(crash.get("worker", "?"))} crashed in {_e(crash.get("test", "?"))}</h3><pre>{_e(said)}</pre>'
        )
    lines = {t: _dict(line) for t, line in ledger.tests.items()}
    by_worker: dict[str, list[dict[str, Any]]] = {}
    for test, line in lines.items():
        devices = _dict(line.get("devices"))
        host = {k: v for k, v in _dict(line.get("host")).items() if k in ("rss", "grew") and _int(v) is not None}
        host["backend_started"] = _dict(line.get("host")).get("backend_started") is True
        drawn = devices or "rss" in host
        if _int(line.get("index")) is not None and drawn and all(_int(v) is not None for v in devices.values()):
            executables = _int(line.get("executables"))
            record = {
                "test": test,
                "index": line["index"],
                "started": line.get("started") is not False,
                "devices": devices,
                "change": _dict(line.get("change")),
                "left": _int(line.get("left")) or 0,
                "executables": executables,
                "host": host,
            }
            by_worker.setdefault(str(line.get("worker") or ""), []).append(record)
    stand_in = any(line.get("stand_in") for line in lines.values())
    for worker, records in sorted(by_worker.items()):
        title = f"pytest-tpumem ledger: {plural(len(records), 'test')}" + (
            f" (pytest-xdist worker {worker})" if worker else ""
        )
        count = max(r["index"] for r in records)
        picture = session_picture(records, count, ledger.threshold, title, stand_in, None, ledger.host_threshold)
        out.append(f'<div class="picture session">{picture}</div>')
    named = sorted(
        ((t, line) for t, line in lines.items() if over(_int(line.get("left")) or 0, ledger.threshold)),
        key=lambda i: (-(_int(i[1].get("left")) or 0), i[0]),
    )
    if named:
        out.append(
            f"<h3>named: {plural(len(named), 'test')} that left {_e(format_size(ledger.threshold))} or more</h3>"
        )
        for test, line in named:
            out.append(
                f'<details class="test" open><summary>{_e(test)}: left {_e(_size(line.get("left")))}</summary>{_explanation(line)}</details>'
            )
    out += _host_named(ledger, lines)
    ordered = sorted(lines.items(), key=lambda i: (-(_int(i[1].get("residue")) or 0), i[0]))
    rows = []
    for test, line in ordered[:LEDGER_ROWS]:
        rows.append(
            f'<tr><td class="id">{_e(test)}</td><td>{_e(line.get("outcome") or "-")}</td>'
            + _num_cell(line.get("residue"))
            + _num_cell(line.get("left"))
            + _num_cell(
                line.get("compiled"), str(_int(line.get("compiled")) if _int(line.get("compiled")) is not None else "-")
            )
            + _num_cell(_dict(line.get("host")).get("grew"))
            + f"<td>{_e(line.get('worker') or '-')}</td></tr>"
        )
    more = (
        f"<p class=muted>the {LEDGER_ROWS} largest residues of {len(ordered)} tests are listed</p>"
        if len(ordered) > LEDGER_ROWS
        else ""
    )
    heads = '<th>test</th><th>outcome</th><th class="n">residue</th><th class="n">left</th><th class="n">programs compiled</th><th class="n">host grew</th><th>worker</th>'
    out.append(
        f'<h3>every test read ({len(lines)})</h3>{more}<table id="ledger-tests" class="sortable"><thead><tr>{heads}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    return "".join(out)


def page(report: Report, comparison: Comparison | None = None, baseline: str = "", sources: Sequence[str] = ()) -> str:
    """The whole page of ``report`` (with ``comparison`` against the report named ``baseline``,
    where there is one); ``sources`` names the reports it was read from."""
    anchors = {nodeid: f"t{i}" for i, nodeid in enumerate(sorted(report.tests))}
    ledger_lines = report.ledger.tests if report.ledger is not None else {}
    failed = report.failed
    title = f"pytest-tpumem: {report.measured} measured, {failed} failed a memory check"
    if comparison is not None and comparison.regressions:
        title += f", {len(comparison.regressions)} regressed"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_asset(STYLE)}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _context(report, sources),
        _counts(report),
    ]
    if comparison is not None:
        parts.append(_comparison(comparison, baseline or "the baseline"))
    parts.append("<h2 id=measured>Measured tests</h2>")
    if report.tests:
        parts.append(_tests_table(report, anchors))
        parts.append("<h2 id=details>Each test</h2>")
        for nodeid, entry in sorted(report.tests.items(), key=lambda i: (i[1].worst_first(), i[0])):
            parts.append(_test_details(nodeid, entry, anchors[nodeid], _dict(ledger_lines.get(nodeid)) or None))
    else:
        parts.append("<p>No test was measured (no budget, leak check or default budget applied).</p>")
    parts.append(_ledger(report))
    data = json.dumps({"measured": report.measured, "failed": failed, "version": report.version})
    parts.append(
        f'<p class="muted">written by pytest-tpumem {_e(__version__)}; report schema version {report.version}</p>'
    )
    parts.append(f'<script type="application/json" id="tpumem-summary">{data}</script>')
    parts.append(f"<script>{_asset(SCRIPT)}</script></body></html>")
    return "\n".join(parts) + "\n"
