"""One page a person opens after a run (``--tpumem-html``, ``python -m pytest_tpumem html``): the
run's context and verdict counts, every measured test in a table that sorts and filters, each
test's failure text, leak sites, largest arrays, upcasts and leak timeline, the baseline comparison
(regressions first), and the suite ledger with its picture of the session.

Made from a report alone (decisions.entry.Report, as the JSON file holds it), so the page of a
pytest run and the page of reports merged afterwards are the same page. Self-contained: its style,
script and pictures are inline, nothing is fetched (its Content-Security-Policy forbids it), and
everything taken from a test id, a message or a report is escaped. Pure: data in, text out.

It scales to a suite of tens of thousands of tests: the two long tables (the measured tests, the
ledger's) and each test's section are data in JSON blocks the page's script reads, drawn as
elements (never as markup) when they are shown: a table's rows a page at a time, sorted and
filtered on the data, a test's section when it is opened (the first SECTIONS at once, the failed
ones open); the sections' blocks are read SECTIONS tests at a time, when one of them is drawn. A
leak timeline is carried as what it draws (telling.svg.timeline_spec).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..decisions.ledger import host_named, over, program_cost
from ..decisions.verdict import Verdict, rank_of
from ..units import format_size
from . import budget, comparison, leak, oom, target
from .comparison import change_line, context_lines, matching_lines
from .ledger import host_lines, line_of_record
from .markup import Block, blocks_html, clean, dict_of, esc, heading, html_table, int_of, list_of, para, pre, size_text
from .markup import table_block as table
from .svg import FRAME, session_picture
from .words import STAND_IN_NOTE, plural

if TYPE_CHECKING:
    from ..decisions.compare import Comparison
    from ..decisions.entry import Entry, LedgerTests, Report

LEDGER_ROWS = 5000  # the suite ledger's table lists at most this many tests (the largest residues first)
SECTIONS = 250  # the tests whose sections are drawn when the page opens (worst first); any other when opened
ROWS = 250  # a long table's rows drawn at once; the script draws more on demand

# The page's style and script, package files beside this module (read once, when a page is made).
STYLE, SCRIPT = "page.css", "page.js"


@functools.cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _verdict_class(verdict: str) -> str:
    if verdict == Verdict.OK.value:
        return "v-ok"
    return "v-warn" if verdict == Verdict.NOT_JUDGED.value else "v-bad"


def _context(report: Report, sources: Sequence[str]) -> str:
    context = report.context
    lines = context_lines(context, report.processes)
    started, finished = context.get("started") or "?", context.get("finished") or "?"
    lines.append(f"from {started} to {finished}")
    if context.get("rootdir"):
        lines.append(f"rootdir {context['rootdir']}")
    if context.get("stand_in"):
        lines.append(f"CPU stand-in: {STAND_IN_NOTE}")
    limit = int_of(context.get("bytes_limit"))
    if limit is not None:
        lines.append(f"bytes_limit {format_size(limit)} per device")
    if sources:
        lines.append("read from " + ", ".join(sources))
    return '<div class="context">' + "".join(f"<p>{esc(line)}</p>" for line in lines) + "</div>"


def _counts(report: Report) -> str:
    verdicts: dict[str, int] = {}
    for entry in report.tests.values():
        verdicts[entry.verdict.value] = verdicts.get(entry.verdict.value, 0) + 1
    chips = [f"<span>{report.measured} measured</span>"]
    for v in sorted(verdicts, key=rank_of):
        chips.append(f'<span class="{_verdict_class(v)}">{verdicts[v]} {esc(v)}</span>')
    ledger = report.ledger
    if ledger is not None:
        named = sum(1 for line in ledger.tests.values() if over(int_of(line.get("left")) or 0, ledger.threshold))
        chips.append(f"<span>{plural(len(ledger.tests), 'test')} in the suite ledger</span>")
        chips.append(
            f'<span class="{"v-bad" if named else "v-ok"}">{named} left {esc(format_size(ledger.threshold))} or more</span>'
        )
        if ledger.crashed:
            chips.append(f'<span class="v-bad">{plural(len(ledger.crashed), "worker")} crashed</span>')
    return '<p class="counts">' + "".join(chips) + "</p>"


def _comparison(comparison: Comparison, baseline: str) -> str:
    out = [f"<h2 id=comparison>Against the baseline {esc(baseline)}</h2>"]
    if comparison.foreign:
        out.append(
            f'<p class="v-warn">{esc(baseline)} is not comparable: {esc(comparison.foreign)}; changes are shown, none fails</p>'
        )
    out += [f'<p class="v-bad">{esc(line)}</p>' for line in matching_lines(comparison, baseline)]
    rows = []
    for c in comparison.changes:  # in decisions.compare.change_order: regressions first
        status = f"regressed beyond {c.regressed_beyond}" if c.regressed else "improved" if c.improved else "-"
        delta = c.new - c.old
        rows.append(
            (
                f'<span class="{"v-bad" if c.regressed else "v-ok" if c.improved else ""}">{esc(status)}</span>',
                esc(c.figure),
                esc(format_size(c.old)),
                esc(format_size(c.new)),
                esc("-" if c.percent is None else f"{c.percent:+.1f}%"),
                esc(("+" if delta >= 0 else "-") + format_size(abs(delta))),
                f'<span class="id" title="{esc(change_line(c, baseline))}">{esc(c.nodeid)}</span>',
            )
        )
    if rows:
        out.append(html_table(("judged", "figure", "old", "new", "change", "bytes", "test"), rows, (2, 3, 4, 5)))
    else:
        out.append("<p>no figure changed</p>")
    for title, ids in (
        (f"new, not in {baseline}", comparison.new_tests),
        (f"missing, in {baseline} but not measured", comparison.missing),
    ):
        if ids:
            out.append(
                f"<h3>{esc(title)} ({len(ids)})</h3><ul>"
                + "".join(f"<li><code>{esc(i)}</code></li>" for i in ids)
                + "</ul>"
            )
    return "".join(out)


def _residues(report: Report) -> dict[str, int]:
    if report.ledger is None:
        return {}
    return {t: r for t, line in report.ledger.tests.items() if (r := int_of(line.get("residue"))) is not None}


def _cell(value: Any) -> list[Any]:
    """A number's cell in a table's data: the number it sorts by (null: unknown) and its text."""
    n = int_of(value)
    return [n, size_text(n)]


def _tests_table(report: Report, tests: list[tuple[str, Entry]]) -> tuple[str, list[list[Any]]]:
    """The measured tests' table (its head; the script draws its rows) and its rows' data, worst first."""
    residues = _residues(report)
    verdicts = sorted({e.verdict.value for e in report.tests.values()}, key=rank_of)
    options = '<option value="">every verdict</option>' + "".join(f"<option>{esc(v)}</option>" for v in verdicts)
    filters = (
        '<div class="filters"><input id="filter" type="search" placeholder="filter by test id" aria-label="filter by test id"> '
        f'<select id="verdict" aria-label="verdict">{options}</select> <span id="shown" class="muted"></span></div>'
    )
    head = ("test", "verdict", "outcome", "peak", "budget", "growth/iter", "threshold", "residue", "witness")
    numeric = {3, 4, 5, 6, 7}
    heads = "".join(f"<th{' class=n' if i in numeric else ''}>{h}</th>" for i, h in enumerate(head))
    rows = [
        [
            clean(nodeid),
            clean(e.verdict.value),
            clean(e.outcome or "-"),
            _cell(e.peak),
            _cell(e.budget),
            _cell(e.growth),
            _cell(e.threshold),
            _cell(residues.get(nodeid)),
            clean(e.witness or "-"),
            1 if e.failed else 0,
        ]
        for nodeid, e in tests
    ]
    table_ = f'<table id="tests" class="sortable"><thead><tr>{heads}</tr></thead><tbody></tbody></table>'
    more = '<p class="more" hidden><button type="button" data-for="tests">show more</button></p>'
    return filters + table_ + more, rows


# Each check's part of a test's section, by the kind its record names ("check"): written in the
# check's own module, beside its text and row.
CHECKS: dict[str, Callable[[dict[str, Any], str], list[Block]]] = {
    "budget": budget.html,
    "peak": budget.html,
    "target": target.html,
    "leak": leak.html,
    "oom": oom.html,
    "baseline": comparison.regressed_html,
}


def _check(check: dict[str, Any], nodeid: str) -> list[Block]:
    told = CHECKS.get(str(check.get("check", "")))
    return told(check, nodeid) if told else []


def _explanation(line: dict[str, Any]) -> list[Block]:
    """A ledger line's explanation: what the test made that is still alive, and who keeps it."""
    made = [
        (size_text(m.get("bytes")), m.get("arrays", ""), m.get("shape", ""), m.get("site", ""))
        for m in map(dict_of, list_of(line.get("made")))
    ]
    held = [
        (size_text(h.get("bytes")), h.get("by", ""), h.get("path", "")) for h in map(dict_of, list_of(line.get("held")))
    ]
    out = [
        *table(("bytes", "arrays", "shape", "made at"), made, (0, 1)),
        *table(("bytes", "kept by", "path"), held, (0,)),
    ]
    for key, words in (("traceback", "kept by its failure's traceback"), ("collected", "freed by gc.collect()")):
        if int_of(line.get(key)):
            out.append(para(f"{words}: {size_text(line.get(key))}"))
    return out


def _test_details(nodeid: str, entry: Entry, ledger_line: dict[str, Any] | None) -> list[Block]:
    """A test's section (its summary is its row's): the blocks the page's script draws when it is opened."""
    peaks = ", ".join(f"{d} {format_size(p)}" for d, p in entry.peaks.items())
    out = []
    if peaks:
        out.append(
            para(f"peak per device: {peaks}" + (" (live arrays stand in for device memory)" if entry.stand_in else ""))
        )
    if entry.growth_source:
        out.append(para(f"growth from {entry.growth_source}"))
    if entry.failure:
        out += [heading("failure"), pre(entry.failure)]
    for c in entry.checks:
        out += _check(dict_of(c), nodeid)
    if ledger_line is not None and ledger_line.get("made"):
        out.append(heading(f"left behind after its teardown: {size_text(ledger_line.get('residue'))}"))
        out += _explanation(ledger_line)
    return out


def _host_named(ledger: LedgerTests, lines: dict[str, dict[str, Any]]) -> list[str]:
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
        f"{esc(format_size(ledger.host_threshold))} or more</h3>"
    ]
    for line in named:
        why = "".join(f"<li>{esc(x)}</li>" for x in host_lines(line, cost))
        out.append(
            f'<details class="test" open><summary>{esc(line.test)}: host memory +{esc(format_size(line.grew or 0))}'
            f"</summary><ul>{why}</ul></details>"
        )
    return out


def _ledger(report: Report) -> tuple[str, list[list[Any]]]:
    """The suite ledger's section, and its table's rows (data, drawn by the script)."""
    ledger = report.ledger
    if ledger is None:
        return "", []
    lines = {t: dict_of(line) for t, line in ledger.tests.items()}
    out = [
        "<h2 id=ledger>The suite ledger</h2>",
        f"<p>What each test left behind after its teardown: the bytes of the arrays it made that are still alive "
        f"(residue). A test is named at {esc(format_size(ledger.threshold))} or more (--tpumem-residue), less what "
        "only a failed test's traceback keeps.</p>",
    ]
    out += _crashes(ledger)
    out += _pictures(ledger, lines)
    out += _left_named(ledger, lines)
    out += _host_named(ledger, lines)
    table_, rows = _ledger_table(lines)
    out.append(table_)
    return "".join(out), rows


def _crashes(ledger: LedgerTests) -> list[str]:
    out = []
    for crash in map(dict_of, ledger.crashed):
        said = "\n".join(map(str, list_of(crash.get("said"))))
        out.append(
            f'<h3 class="v-bad">worker {esc(crash.get("worker", "?"))} crashed in {esc(crash.get("test", "?"))}</h3><pre>{esc(said)}</pre>'
        )
    return out


def _session_record(test: str, line: dict[str, Any]) -> dict[str, Any] | None:
    """A ledger line as telling.svg.session_picture draws it; None where it has nothing to draw."""
    devices = dict_of(line.get("devices"))
    host = {k: v for k, v in dict_of(line.get("host")).items() if k in ("rss", "grew") and int_of(v) is not None}
    host["backend_started"] = dict_of(line.get("host")).get("backend_started") is True
    drawn = devices or "rss" in host
    if int_of(line.get("index")) is None or not drawn or not all(int_of(v) is not None for v in devices.values()):
        return None
    return {
        "test": test,
        "index": line["index"],
        "started": line.get("started") is not False,
        "devices": devices,
        "change": dict_of(line.get("change")),
        "left": int_of(line.get("left")) or 0,
        "executables": int_of(line.get("executables")),
        "host": host,
    }


def _pictures(ledger: LedgerTests, lines: dict[str, dict[str, Any]]) -> list[str]:
    """The session's picture, one per pytest-xdist worker."""
    by_worker: dict[str, list[dict[str, Any]]] = {}
    for test, line in lines.items():
        record = _session_record(test, line)
        if record is not None:
            by_worker.setdefault(str(line.get("worker") or ""), []).append(record)
    stand_in = any(line.get("stand_in") for line in lines.values())
    out = []
    for worker, records in sorted(by_worker.items()):
        title = f"pytest-tpumem ledger: {plural(len(records), 'test')}" + (
            f" (pytest-xdist worker {worker})" if worker else ""
        )
        count = max(r["index"] for r in records)
        picture = session_picture(records, count, ledger.threshold, title, stand_in, None, ledger.host_threshold)
        out.append(f'<div class="picture session">{picture}</div>')
    return out


def _left_named(ledger: LedgerTests, lines: dict[str, dict[str, Any]]) -> list[str]:
    """The tests named for what they left, the most first, each with its explanation."""
    named = sorted(
        ((t, line) for t, line in lines.items() if over(int_of(line.get("left")) or 0, ledger.threshold)),
        key=lambda i: (-(int_of(i[1].get("left")) or 0), i[0]),
    )
    if not named:
        return []
    out = [f"<h3>named: {plural(len(named), 'test')} that left {esc(format_size(ledger.threshold))} or more</h3>"]
    for test, line in named:
        out.append(
            f'<details class="test" open><summary>{esc(test)}: left {esc(size_text(line.get("left")))}</summary>{blocks_html(_explanation(line))}</details>'
        )
    return out


def _ledger_table(lines: dict[str, dict[str, Any]]) -> tuple[str, list[list[Any]]]:
    """Every test the ledger read, the largest residues first, at most LEDGER_ROWS of them: the
    table's head (the script draws its rows) and its rows' data."""
    ordered = sorted(lines.items(), key=lambda i: (-(int_of(i[1].get("residue")) or 0), i[0]))
    rows = []
    for test, line in ordered[:LEDGER_ROWS]:
        compiled = int_of(line.get("compiled"))
        rows.append(
            [
                clean(test),
                clean(line.get("outcome") or "-"),
                _cell(line.get("residue")),
                _cell(line.get("left")),
                [compiled, "-" if compiled is None else str(compiled)],
                _cell(dict_of(line.get("host")).get("grew")),
                clean(line.get("worker") or "-"),
            ]
        )
    more = (
        f"<p class=muted>the {LEDGER_ROWS} largest residues of {len(ordered)} tests are listed</p>"
        if len(ordered) > LEDGER_ROWS
        else ""
    )
    heads = '<th>test</th><th>outcome</th><th class="n">residue</th><th class="n">left</th><th class="n">programs compiled</th><th class="n">host grew</th><th>worker</th>'
    return (
        f'<h3>every test read ({len(lines)})</h3>{more}<table id="ledger-tests" class="sortable"><thead><tr>{heads}</tr></thead><tbody></tbody></table>'
        '<p class="more" hidden><button type="button" data-for="ledger-tests">show more</button></p>',
        rows,
    )


def _measured(report: Report, data: dict[str, Any]) -> tuple[str, list[list[Block]]]:
    """The measured tests' table and the place of their sections; their rows and verdicts go into
    ``data``, and their sections' blocks are returned, worst first."""
    if not report.tests:
        return (
            "<h2 id=measured>Measured tests</h2>\n<p>No test was measured (no budget, leak check or default budget applied).</p>",
            [],
        )
    tests = sorted(report.tests.items(), key=lambda i: (i[1].worst_first(), i[0]))
    ledger_lines = report.ledger.tests if report.ledger is not None else {}
    markup, data["tests"] = _tests_table(report, tests)
    verdicts = sorted({e.verdict.value for _, e in tests}, key=rank_of)
    data["verdicts"] = {v: [rank_of(v), _verdict_class(v)] for v in verdicts}
    out = ["<h2 id=measured>Measured tests</h2>", markup, "<h2 id=details>Each test</h2>"]
    if len(tests) > SECTIONS:
        out.append(
            f"<p class=muted>the sections of the {SECTIONS} tests listed first are below; "
            "a test's link in the table opens its own</p>"
        )
    out.append('<div id="sections"></div>')
    return "\n".join(out), [_test_details(t, e, dict_of(ledger_lines.get(t)) or None) for t, e in tests]


def _data(data: Any) -> str:
    """``data`` as JSON text that cannot end the script block that holds it, nor start markup in it
    (``<``, ``>``, ``&`` and the line separators JavaScript once took for line ends are escaped)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def page(report: Report, comparison: Comparison | None = None, baseline: str = "", sources: Sequence[str] = ()) -> str:
    """The whole page of ``report`` (with ``comparison`` against the report named ``baseline``,
    where there is one); ``sources`` names the reports it was read from."""
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
        f"<title>{esc(title)}</title><style>{_asset(STYLE)}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        _context(report, sources),
        _counts(report),
    ]
    if comparison is not None:
        parts.append(_comparison(comparison, baseline or "the baseline"))
    data: dict[str, Any] = {"frame": FRAME, "sections": SECTIONS, "rows": ROWS}
    markup, details = _measured(report, data)
    parts.append(markup)
    ledger, data["ledger"] = _ledger(report)
    parts.append(ledger)
    summary = json.dumps({"measured": report.measured, "failed": failed, "version": report.version})
    parts.append(
        f'<p class="muted">written by pytest-tpumem {esc(__version__)}; report schema version {report.version}</p>'
    )
    parts.append(f'<script type="application/json" id="tpumem-summary">{summary}</script>')
    parts.append(f'<script type="application/json" id="tpumem-data">{_data(data)}</script>')
    # The sections' blocks, SECTIONS tests a block: the script reads one when it draws a section of it.
    for k in range(0, len(details), SECTIONS):
        parts.append(
            f'<script type="application/json" id="tpumem-sections-{k // SECTIONS}">{_data(details[k : k + SECTIONS])}</script>'
        )
    parts.append(f"<script>{_asset(SCRIPT)}</script></body></html>")
    return "\n".join(parts) + "\n"
