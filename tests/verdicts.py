"""One verdict per test: what pytest reports (its JUnit XML), and what the plugin's summary, JSON
report and HTML page say, agree (issue 27). ``run(pytester, *args)`` runs a planted suite with all
four written and checks them against each other; it returns each test's outcome by its short name
(``agree`` returns pytest's result too, for a test that checks what the run said).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pagedata

# Verdicts that fail their test (decisions.verdict.Verdict); "not judged" may also skip it.
FAILING = {"oom", "leak", "over budget", "regressed"}

# A plugin, in the pytester's directory, that runs the collected tests last first.
REVERSE = """
import os

def pytest_collection_modifyitems(items):
    if os.environ.get("TPUMEM_TEST_REVERSE"):
        items.reverse()
"""


def _junit(path) -> dict[str, str]:
    """Each test's outcome as pytest reported it: passed, failed (a failure or an error), skipped."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if case.find("failure") is not None or case.find("error") is not None:
            out[name] = "failed"
        elif case.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def _short(nodeid: str) -> str:
    return nodeid.split("::")[-1]


def run(pytester, *args: str, reverse: bool = False, monkeypatch=None) -> dict[str, str]:
    """Run ``args`` under --tpumem with a JUnit XML, a JSON report and a page, check that they agree,
    and return each test's outcome (by its name without the file)."""
    return agree(pytester, *args, reverse=reverse, monkeypatch=monkeypatch)[0]


def agree(pytester, *args: str, reverse: bool = False, monkeypatch=None):
    """``run``'s outcomes, and pytest's ``RunResult``."""
    pytester.makeconftest(REVERSE)
    if monkeypatch is not None:
        if reverse:
            monkeypatch.setenv("TPUMEM_TEST_REVERSE", "1")
        else:
            monkeypatch.delenv("TPUMEM_TEST_REVERSE", raising=False)
    junit, report, page = (pytester.path / name for name in ("junit.xml", "report.json", "page.html"))
    for path in (junit, report, page):
        if path.exists():
            path.unlink()
    result = pytester.runpytest_subprocess(
        "--tpumem",
        "-p",
        "no:randomly",
        f"--junitxml={junit}",
        f"--tpumem-json={report}",
        f"--tpumem-html={page}",
        *args,
    )
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback (most recent call last)" not in text, text
    pytest_says = _junit(junit)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == sum(o == "failed" for o in pytest_says.values())

    tests = json.loads(report.read_text())["tests"]
    failing = set()
    for nodeid, entry in tests.items():
        name = _short(nodeid)
        # the report's outcome is pytest's
        assert entry["outcome"] == pytest_says[name], (nodeid, entry["outcome"], pytest_says[name], text)
        if entry["verdict"] in FAILING:
            failing.add(name)
            assert pytest_says[name] == "failed", (
                f"{nodeid}: the plugin says {entry['verdict']}, pytest {pytest_says[name]}"
            )
    # the summary's count of tests that failed a memory check is the report's
    if tests:
        counts = re.findall(r"(\d+) measured, (\d+) failed a memory check", text)
        assert counts and int(counts[-1][1]) == len(failing), (counts, failing, text)
    # and pytest failed exactly those, and the tests that failed for their own reason
    own = {name for name, o in pytest_says.items() if o == "failed"} - failing
    for name in own:
        entry = next((e for n, e in tests.items() if _short(n) == name), None)
        assert entry is None or entry["verdict"] not in FAILING

    # the page: its title's count, and each row's verdict as the report has it
    page_text = page.read_text() if page.exists() else ""
    if tests:
        title = re.search(r"<title>pytest-tpumem: (\d+) measured, (\d+) failed a memory check", page_text)
        assert title and int(title.group(2)) == len(failing), page_text[:300]
        rows = {r[0]: r[1] for r in pagedata.rows(page_text)}  # the rows the page's script draws
        assert {nodeid: rows.get(nodeid) for nodeid in tests} == {n: e["verdict"] for n, e in tests.items()}
    return pytest_says, result
