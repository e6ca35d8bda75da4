"""The docs stay true to the code without a build: no output pasted by hand (every block of real
output is made by docs/outputs.py, and each one the pages or README name exists), and the report
schema's page names every key the report writes. The build itself (.ci/run, sphinx-build -W) checks
links, the generated reference and README's blocks."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from pytest_tpumem.decisions.entry import _ENTRY
from pytest_tpumem.telling.ledger import REPORT_KEYS

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("*/*.md")) + [ROOT / "README.md"]
# What only the plugin's output says: a block holding one of these is real output.
OUTPUT = re.compile(r"= tpumem =|- tpumem ledger -|^max_hbm: |^leak_check: |^tpumem baseline: |^_{5,} test_", re.M)


def _outputs_module():
    spec = importlib.util.spec_from_file_location("_docs_outputs", DOCS / "outputs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def _blocks(text):
    """(the line before the fence, the fence's info string, the block's text) of each fenced block."""
    return re.findall(r"(?:^|\n)([^\n]*)\n(`{3,})([^\n]*)\n(.*?)\n\2(?=\n|$)", text, re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_output_is_pasted_by_hand(page):
    text = page.read_text()
    for before, _, info, body in _blocks(text):
        if info.startswith("{literalinclude}") or before.startswith("<!-- output: "):
            continue
        assert not OUTPUT.search(body), f"{page.name}: a block of real output written by hand:\n{body[:300]}"


def test_every_output_a_page_names_is_made_by_the_script():
    scenarios = set(_outputs_module().SCENARIOS)
    named = set()
    for page in PAGES:
        text = page.read_text()
        named |= set(re.findall(r"\{literalinclude\} _outputs/([\w-]+)\.txt", text))
        named |= set(re.findall(r"<!-- output: ([\w-]+) -->", text))
    assert named and named <= scenarios, named - scenarios
    assert len(re.findall(r"<!-- output: ", (ROOT / "README.md").read_text())) == 3  # the front door's examples


def test_the_readme_blocks_are_rewritten_from_the_outputs_without_what_moves():
    outputs = _outputs_module()
    readme = "<!-- output: leak -->\n```text\nold\n```\n"
    made = outputs.readme_blocks(readme, {"leak": "a\n  host malloc: 1MB -> 2MB\nb\n= 1 passed in 0.50s =\n"})
    assert made == "<!-- output: leak -->\n```text\na\nb\n```\n"


def test_the_schema_page_names_every_key_a_report_writes():
    schema = (DOCS / "report-schema.md").read_text()
    tests = schema[schema.index("## `tests`") : schema.index("### Check records")]
    for key in _ENTRY:
        assert f"`{key}`" in tests, key
    ledger = schema[schema.index("## `ledger`") : schema.index("### The flight recorder")]
    for key in (*REPORT_KEYS, "worker"):
        assert f"`{key}`" in ledger, key
