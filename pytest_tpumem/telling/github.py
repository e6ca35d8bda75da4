"""Where CI people look on GitHub: the job summary (Markdown appended to ``$GITHUB_STEP_SUMMARY``,
shown on the run's page) and annotations (workflow commands on stdout, shown on the test's line).

The summary is short: the verdict counts, the tests that failed a memory check with their one-line
reason, the regressions against the baseline, the suite ledger's named tests, the high-water marks,
and where the page is; each list capped, so it stays a few dozen lines. Text from a test id or a
message is escaped for Markdown; control characters are written as pytest writes them.

Annotations follow GitHub's workflow commands (``::error file=F,line=L,title=T::message``), escaped
as the actions toolkit does (@actions/core, command.ts: ``escapeData`` turns ``%``, CR and LF into
``%25``, ``%0D``, ``%0A``; ``escapeProperty`` also ``:`` and ``,``). GitHub shows at most 10 error
annotations a step, so at most ``ANNOTATIONS`` are written, the rest counted in the summary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..decisions.ledger import host_named, named
from ..decisions.marks import device_marks, host_mark
from ..units import format_size
from .comparison import change_line
from .ledger import line_of_record
from .words import escaped, plural

if TYPE_CHECKING:
    from ..decisions.compare import Comparison
    from ..decisions.entry import Entry, Report

LISTED = 10  # the most tests each list of the summary names
ANNOTATIONS = 10  # GitHub shows at most 10 error annotations a step
# What Markdown acts on, backslash-escaped: an underscore only where it could open or close emphasis
# (GitHub's Markdown never reads one inside a word, as in leak_check, as emphasis).
_MARKDOWN = re.compile(r"([\\`*\[\]|~#!{}]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# Lines of a failure's text that are not the reason: what a report cut, the phase, and the line
# pytest-xdist puts first ("[gw1] linux -- Python 3.11.7 /usr/bin/python").
_CUT = re.compile(r"^\[(the first \d+ characters are cut|setup|call|teardown)\]$|^\[gw\d+\] .* -- Python ")


def text(value: str) -> str:
    """Plain text in Markdown: control characters escaped, HTML's ``& < >`` as entities, and the
    punctuation Markdown acts on backslash-escaped."""
    value = escaped(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", value)


def code(value: str) -> str:
    """A test id as inline code: fenced with one more backtick than it holds in a row."""
    value = escaped(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def failed_tests(report: Report) -> list[tuple[str, Entry]]:
    """The tests that failed a memory check, by test id: the summary lists, and annotates, these."""
    return sorted((nodeid, e) for nodeid, e in report.tests.items() if e.failed)


def within(path: str, base: str | None) -> str:
    """``path`` from ``base`` where it lies inside (a file as GitHub names it from the workspace),
    else as it is."""
    try:
        inside = base is not None and os.path.commonpath([base, path]) == base
    except ValueError:  # one absolute and one relative, or two drives
        inside = False
    return os.path.relpath(path, base) if inside and base is not None else path


def reason(entry: Entry) -> str:
    """A failed test's one-line reason: the first line of its failure text that the plugin wrote
    ("max_hbm: peak 4.0MB on cpu:0 is over the budget ..."), else its verdict."""
    for line in entry.failure.splitlines():
        line = line.strip()
        if line and not _CUT.match(line):
            return line
    return entry.verdict.value


def summary(
    report: Report,
    comparison: Comparison | None = None,
    baseline: str = "",
    page: str | None = None,
    annotated: int = 0,
) -> str:
    """The job summary of a run, Markdown, ending with a blank line (summaries of several steps or
    processes follow one another)."""
    tests = report.tests
    failed = failed_tests(report)
    process = ""
    if int(report.context.get("process_count") or 1) > 1:
        process = f" (process {report.context.get('process_index')} of {report.context.get('process_count')})"
    lines = [f"### pytest-tpumem{process}: {plural(len(tests), 'measured test')}, {len(failed)} failed a memory check"]
    lines += ["", _counts(tests)]
    if failed:
        lines += ["", "**Failed a memory check**", ""]
        lines += [f"- {code(nodeid)}: {text(reason(e))}" for nodeid, e in failed[:LISTED]]
        lines += _more(len(failed))
        if annotated:
            capped = f" (the first {annotated} of {len(failed)})" if annotated < len(failed) else ""
            lines += ["", f"Annotated on the tests' lines{capped}."]
    lines += _regressions(comparison, baseline)
    lines += _ledger(report)
    lines += _marks(report)
    if page:
        lines += ["", f"The run's page (HTML, opens offline): {code(page)}"]
    return "\n".join(lines) + "\n\n"


def _counts(tests: Mapping[str, Entry]) -> str:
    counts: dict[str, int] = {}
    for e in sorted(tests.values(), key=lambda e: e.verdict.rank):
        counts[e.verdict.value] = counts.get(e.verdict.value, 0) + 1
    return " · ".join(f"{verdict}: {n}" for verdict, n in counts.items()) or "no test was measured"


def _more(count: int) -> list[str]:
    return [f"- ... and {count - LISTED} more (the JSON report and the page list them all)"] if count > LISTED else []


def _regressions(comparison: Comparison | None, baseline: str) -> list[str]:
    if comparison is None:
        return []
    name = baseline or "the baseline"
    if comparison.foreign:
        return ["", f"Against {code(name)}: not judged, {text(comparison.foreign)}"]
    regressions = comparison.regressions
    if not regressions:
        return ["", f"Against {code(name)}: no regression ({plural(comparison.compared, 'test')} compared)"]
    out = ["", f"**Regressed against {text(name)}**", ""]
    out += [f"- {code(c.nodeid)}: {text(change_line(c, name))}" for c in regressions[:LISTED]]
    return out + _more(len(regressions))


def _most_first(rows: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """(bytes, test id) rows, the most bytes first, then by test id."""
    return sorted(rows, key=lambda row: (-row[0], row[1]))


def _ledger(report: Report) -> list[str]:
    """The suite ledger's named tests, by the rules its summary and the page name them by
    (decisions.ledger ``named``: what a test left, less what only its failure's traceback holds;
    ``host_named``), the most first."""
    ledger = report.ledger
    if ledger is None:
        return []
    lines = [line_of_record(nodeid, record) for nodeid, record in ledger.tests.items()]
    left = _most_first((line.left, line.test) for line in lines if named(line, ledger.threshold))
    grew = _most_first((line.grew or 0, line.test) for line in lines if host_named(line, ledger.host_threshold))
    out = []
    for title, tests in (
        (f"left {format_size(ledger.threshold)} or more of the arrays they made alive", left),
        (f"grew the process's host memory by {format_size(ledger.host_threshold)} or more", grew),
    ):
        if tests:
            out += ["", f"**Suite ledger: {plural(len(tests), 'test')} {title}**", ""]
            out += [f"- {format_size(n)} {code(nodeid)}" for n, nodeid in tests[:LISTED]]
            out += _more(len(tests))
    for crash in ledger.crashed:
        out += [
            "",
            f"**A pytest-xdist worker crashed** ({text(str(crash.get('worker', '?')))}) in {code(str(crash.get('test', '?')))}",
        ]
    return out


def _marks(report: Report) -> list[str]:
    marks = [f"- {text(m.where)}: peak {format_size(m.bytes)} in {code(m.nodeid)}" for m in device_marks(report)]
    if marks and report.context.get("stand_in"):
        marks.append("- (live arrays stood in for device memory: the backend reports no allocator figures)")
    host = host_mark(report)
    if host is not None:
        when = "after" if host.after else "in"
        marks.append(f"- host RSS, the runner's process: {format_size(host.bytes)} {when} {code(host.nodeid)}")
    return ["", "**High-water marks**", "", *marks] if marks else []


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def _data(value: str) -> str:
    return escaped(value, keep="\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotation_lines(
    failed: Sequence[tuple[str, Entry]], locations: Mapping[str, tuple[str, int | None]], workspace: str | None
) -> list[str]:
    """``::error`` workflow commands for the first ANNOTATIONS of ``failed`` (test id, entry), each
    at its test's file and line (``locations``: the file as an absolute path, the line from 1)
    made relative to ``workspace`` ($GITHUB_WORKSPACE) where it lies inside."""
    out = []
    for nodeid, entry in failed[:ANNOTATIONS]:
        where = ""
        if nodeid in locations:
            path, line = locations[nodeid]
            where = f"file={_property(within(path, workspace))}" + (f",line={line}" if line else "") + ","
        title = _property(f"pytest-tpumem: {entry.verdict.value}")
        out.append(f"::error {where}title={title}::{_data(f'{nodeid}: {reason(entry)}')}")
    return out
