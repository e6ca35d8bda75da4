"""What the run's page (telling.html) carries as data, read back as its script reads it: the JSON
blocks, the measured tests' rows and the ledger's, and a test's section as the markup of the
elements the script draws from its blocks (telling.markup.blocks_html), for the tests that look at
a page without a browser."""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from pytest_tpumem.telling.markup import blocks_html

BLOCK = re.compile(r'<script type="application/json" id="([^"]*)">(.*?)</script>', re.S)


def blocks(html: str) -> dict[str, Any]:
    """Every JSON block of the page, by its id."""
    return {name: json.loads(text) for name, text in BLOCK.findall(html)}


def data(html: str) -> dict[str, Any]:
    return blocks(html)["tpumem-data"]


def rows(html: str) -> list[list[Any]]:
    """The measured tests' rows, worst first: [id, verdict, outcome, peak, budget, growth, threshold,
    residue, witness, failed], a number's cell as [bytes or None, its text]."""
    return data(html).get("tests", [])


def ledger_rows(html: str) -> list[list[Any]]:
    return data(html).get("ledger", [])


def section(html: str, nodeid: str) -> str:
    """One test's section as markup: its summary and the elements its blocks draw."""
    found = blocks(html)
    d = found["tpumem-data"]
    i = next(i for i, r in enumerate(d["tests"]) if r[0] == nodeid)
    chunk = found[f"tpumem-sections-{i // d['sections']}"]
    return f"</span> {escape(nodeid)}</summary>" + blocks_html(chunk[i % d["sections"]])
