"""The run's page in small pieces (telling.html), for the page and for each check's part of it:
text escaped for markup, a report's values taken as what they should be (a report is read back
checked only where a gate needs it), sizes and tables; and the blocks a test's section is made of,
which the page carries as data and its script draws when the section is opened (blocks_html writes
the same elements as markup)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from ..units import format_size
from .svg import draw_timeline
from .words import escaped

# A block of a test's section, as page.js draws it: ["h3", text], ["p", text], ["pre", text],
# ["table", title, header, numeric columns, rows of text], ["timeline", telling.svg.timeline_spec].
Block = list[Any]


def clean(value: Any) -> str:
    """Text for the page's data: its control characters and lone surrogates as esc writes them
    (the script sets it as text, never as markup)."""
    return escaped(str(value), keep="\t\n\r")


def heading(text: Any) -> Block:
    return ["h3", clean(text)]


def para(text: Any) -> Block:
    return ["p", clean(text)]


def pre(text: Any) -> Block:
    return ["pre", clean(text)]


def table_block(
    header: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = (), title: str = ""
) -> list[Block]:
    """A table of text cells under its title, where it has one; none where it has no row."""
    cells = [[clean(c) for c in r] for r in rows]
    return [["table", clean(title), list(header), list(numeric), cells]] if cells else []


def blocks_html(blocks: Iterable[Block]) -> str:
    """Blocks as markup: the elements page.js draws from them."""
    out = []
    for kind, *rest in blocks:
        if kind == "table":
            title, header, numeric, rows = rest
            out.append(
                (f"<h3>{esc(title)}</h3>" if title else "")
                + html_table(header, [tuple(map(esc, r)) for r in rows], numeric)
            )
        elif kind == "timeline":
            out.append(f'<div class="picture timeline">{draw_timeline(rest[0])}</div>')
        else:
            out.append(f"<{kind}>{esc(rest[0])}</{kind}>")
    return "".join(out)


def esc(value: Any) -> str:
    """Text for the page: escaped as markup, and its control characters and lone surrogates as
    words.escaped writes them (a test file's name that is not UTF-8 would leave the page
    unwritable; an ESC is shown, not dropped), its line breaks and tabs kept (a failure's text)."""
    return escape(escaped(str(value), keep="\t\n\r"), quote=True)


def int_of(value: Any) -> int | None:
    """A whole number from a report, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def size_text(value: Any) -> str:
    """A size from a report for people, or "-" where it is not a whole number."""
    n = int_of(value)
    return "-" if n is None else format_size(n)


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of already-escaped cells; the columns in ``numeric`` right-aligned."""
    heads = "".join(f"<th{' class=n' if i in numeric else ''}>{esc(h)}</th>" for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"
