"""The run's HTML page (issue 19): --tpumem-html and ``python -m pytest_tpumem html`` write one
self-contained file from the report, with every measured test, its failure text, sites, buffers,
upcasts and leak timeline, the suite ledger and the baseline comparison; it escapes what it takes
from test ids; and in a real browser (headless Chromium, tests/browser.py) it renders without a
console error, sorts, filters and shows a planted leak's timeline."""

import json
import os
import re
import subprocess
import sys

import pytest

from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.telling.html import page

sys.path.insert(0, os.path.dirname(__file__))
import pagedata  # noqa: E402

MB = 10**6

SUITE = """
import jax
import jax.numpy as jnp
import pytest

KEPT = []
HOLD = []


def group_norm_f32(x):
    xf = x.astype(jnp.float32)  # the silent upcast
    mean = xf.mean(axis=(1, 2), keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    return ((xf - mean) / jnp.sqrt(var + 1e-5)).astype(x.dtype)


@pytest.mark.max_hbm("40MB")
def test_over_budget_with_upcast():
    x = jnp.ones((8, 64, 128, 128), jnp.bfloat16)
    jax.jit(group_norm_f32)(x).block_until_ready()


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_leaks_16mb_a_run():
    KEPT.append(jnp.ones((4_000_000,), jnp.float32))  # 16 MB a run, kept


@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_clean_twin():
    jnp.ones((4_000_000,), jnp.float32).block_until_ready()


@pytest.mark.max_hbm("100MB")
@pytest.mark.parametrize("n", [1000, 2000], ids=["<script>alert(1)</script>", "a&b\\"c"])
def test_fits(n):
    assert float(jnp.ones((n, n)).sum()) == n * n


def test_leaves_64mb_in_a_module_list():
    HOLD.append(jnp.ones((16_000_000,), jnp.float32))
"""

IDS = {
    "upcast": "test_page.py::test_over_budget_with_upcast",
    "leak": "test_page.py::test_leaks_16mb_a_run",
    "twin": "test_page.py::test_clean_twin",
    "script": "test_page.py::test_fits[<script>alert(1)</script>]",
    "amp": 'test_page.py::test_fits[a&b"c]',
    "residue": "test_page.py::test_leaves_64mb_in_a_module_list",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The planted suite run once under --tpumem with a JSON report and the page (-p no:randomly:
    the order of the session picture is the file's)."""
    where = tmp_path_factory.mktemp("page")
    (where / "test_page.py").write_text(SUITE)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--tpumem",
         "--tpumem-json=report.json", "--tpumem-html=report.html", "test_page.py"],
        cwd=where, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the planted failures
    return where, proc.stdout


def _line(snippet):
    """The line of test_page.py that holds ``snippet``."""
    return next(i + 1 for i, text in enumerate(SUITE.splitlines()) if snippet in text)


def _html(where):
    return (where / "report.html").read_text()


def _details(html, nodeid):
    """One test's section, as the markup of what the page's script draws from its data."""
    return pagedata.section(html, nodeid)


def _esc(text):
    from html import escape

    return escape(text, quote=True)


def test_the_page_is_written_and_said(run):
    where, out = run
    assert f"tpumem: the run's page (HTML, opens offline) written to {where / 'report.html'}" in out
    assert not [p for p in os.listdir(where) if p.startswith(".tpumem-")]  # no temporary left beside it


def test_every_measured_test_has_a_row_and_the_counts_agree_with_the_report(run):
    where, _ = run
    html, report = _html(where), json.loads((where / "report.json").read_text())
    rows = pagedata.rows(html)
    assert {r[0]: r[1] for r in rows} == {t: e["verdict"] for t, e in report["tests"].items()}
    assert len(rows) == 5  # the test that only leaves arrays behind has no marker: the ledger reads it
    failed = sum(e["verdict"] != "ok" for e in report["tests"].values())
    assert failed == 2
    assert f"<title>pytest-tpumem: 5 measured, {failed} failed a memory check</title>" in html


def test_what_it_takes_from_test_ids_is_escaped(run):
    html = _html(run[0])
    assert "<script>alert(1)</script>" not in html and "</script>alert" not in html
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in html  # in the data, read back whole
    assert {IDS["script"], IDS["amp"]} <= {r[0] for r in pagedata.rows(html)}
    scripts = re.findall(r"<script[^>]*>", html)
    assert scripts == [
        '<script type="application/json" id="tpumem-summary">',
        '<script type="application/json" id="tpumem-data">',
        '<script type="application/json" id="tpumem-sections-0">',
        "<script>",
    ]


def test_it_fetches_nothing(run):
    """Self-contained: no URL it would load (the SVG namespace is a name, not a fetch), and a
    Content-Security-Policy that forbids loading anything."""
    html = _html(run[0])
    assert "default-src 'none'" in html
    urls = set(re.findall(r"https?://[^\s\"'<>]+", html))
    assert urls == {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", html)


def test_the_upcast_and_the_largest_arrays_of_a_test_over_budget(run):
    details = _details(_html(run[0]), IDS["upcast"])
    assert "max_hbm: peak 67.1MB on cpu:0 is over the budget of 40.0MB" in details  # its failure text
    assert "upcasts (narrow floats the code turned wide)" in details
    line = _line("astype(jnp.float32)")
    assert re.search(
        rf"<td>test_page\.py:{line}</td><td>f32\[8,64,128,128\]</td><td>test_page\.py:{line}: astype casts bf16 to ",
        details,
    ), details
    assert "largest arrays of the programs it ran" in details


def test_the_planted_leak_has_its_timeline_sites_and_figures(run):
    details = _details(_html(run[0]), IDS["leak"])
    assert "leak check: leak, growth 16.0MB/iteration, threshold 10.0MB, 3 iterations" in details, details
    assert details.count('<polyline class="series"') >= 1
    assert 'class="threshold"' in details
    assert re.search(
        rf"<td class=n>48\.0MB</td><td class=n>3</td><td class=n>3</td><td>f32\[4000000\]</td><td>test_page\.py:{_line('KEPT.append')} ",
        details,
    ), details
    twin = _details(_html(run[0]), IDS["twin"])
    assert "leak check: ok" in twin


def test_the_ledger_names_the_residue_and_draws_the_session(run):
    html = _html(run[0])
    ledger = html[html.index("<h2 id=ledger>") :]
    assert f"{_esc(IDS['residue'])}: left 64.0MB</summary>" in ledger
    assert f"test_page.py:{_line('HOLD.append')}" in ledger  # the line that made the array
    assert "global HOLD" in ledger  # who keeps it
    assert ledger.count('<svg xmlns="http://www.w3.org/2000/svg"') == 1
    assert 'class="named"' in ledger


def test_the_page_of_the_json_report_is_the_page_pytest_wrote(run, tmp_path):
    """One page, written once: ``python -m pytest_tpumem html`` on the run's JSON report gives the
    page pytest wrote, but for the line that names the report it read."""
    where, _ = run
    out = tmp_path / "again.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tpumem", "html", str(where / "report.json"), "-o", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wrote {out}: 5 measured tests from 1 report\n"
    again = out.read_text().replace(f"<p>read from {_esc(str(where / 'report.json'))}</p>", "")
    assert again == _html(where)


def test_a_baseline_comparison_lists_the_regression_first_and_gates(run, tmp_path):
    where, _ = run
    report = json.loads((where / "report.json").read_text())
    base = json.loads(json.dumps(report))
    base["tests"][IDS["script"]]["peak"] = report["tests"][IDS["script"]]["peak"] // 2  # the run doubled it
    base["tests"][IDS["amp"]]["peak"] = report["tests"][IDS["amp"]]["peak"] * 2  # and halved this one
    (tmp_path / "base.json").write_text(json.dumps(base))
    out = tmp_path / "page.html"
    args = [sys.executable, "-m", "pytest_tpumem", "html", str(where / "report.json"), "-o", str(out)]
    proc = subprocess.run(
        [*args, "--baseline", str(tmp_path / "base.json"), "--fail", "peak:10%"], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    html = out.read_text()
    section = html[html.index("<h2 id=comparison>") : html.index("<h2 id=measured>")]
    assert "Against the baseline base.json" in section
    rows = re.findall(r"<tr><td><span class=\"([^\"]*)\">([^<]*)</span>", section)
    assert rows[0] == ("v-bad", "regressed beyond peak:10%")
    assert rows[1] == ("v-ok", "improved")
    assert "<title>pytest-tpumem: 5 measured, 2 failed a memory check, 1 regressed</title>" in html
    proc = subprocess.run([*args, "--baseline", str(tmp_path / "base.json")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # shown, not judged, without --fail


def test_several_reports_are_merged_into_one_page(tmp_path, wire):
    for i, device in enumerate(("cpu:0", "cpu:1")):
        r = wire.report({"t.py::test_a": [wire.peak(10 * MB, device)]}, pid=i + 1, process_index=i, process_count=2)
        (tmp_path / f"r{i}.json").write_bytes(_dumps(r))
    out = tmp_path / "p.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tpumem", "html", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"), "-o", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wrote {out}: 1 measured tests from 2 reports\n"
    html = out.read_text()
    assert "merged from 2 processes" in html
    assert "peak per device: cpu:0 10.0MB, cpu:1 10.0MB" in html


def _dumps(report):
    from pytest_tpumem.telling.report import dumps

    return dumps(report)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["html", "{r}", "-o", "{r}"], "{r}: is also one of the reports it reads; give -o another path"),
        (["html", "{d}/none.json", "-o", "{d}/p.html"], "{d}/none.json: no such file"),
        (["html", "{r}", "-o", "{d}/p.html", "--fail", "peak:10%"], "--fail needs a baseline to compare with"),
        (["html", "{r}", "-o", "{d}"], "{d}: cannot be written: is a directory"),
        (["html", "{r}", "-o", "{d}/p.html", "--baseline", "{d}/p.html"], "{d}/p.html: is also one of the reports"),
    ],
)
def test_bad_input_exits_2_naming_it_and_writes_nothing(tmp_path, wire, argv, says):
    r = tmp_path / "r.json"
    r.write_bytes(_dumps(wire.report({"t.py::test_a": [wire.peak(MB)]})))
    argv = [a.format(r=r, d=tmp_path) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "pytest_tpumem", *argv], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("python -m pytest_tpumem html: error: ")
    assert says.format(r=r, d=tmp_path) in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["r.json"]  # nothing written, no temporary left


@pytest.mark.parametrize("other", ["--tpumem-json", "--tpumem-save", "--tpumem-compare"])
def test_the_page_may_not_overwrite_a_report_of_the_run(pytester, other):
    pytester.makepyfile("def test_a(): pass")
    if other == "--tpumem-compare":
        pytester.path.joinpath("same.json").write_text("{}")
    result = pytester.runpytest("--tpumem", f"{other}=same.json", "--tpumem-html=same.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--tpumem-html {pytester.path / 'same.json'}" in result.stderr.str()


def test_a_page_that_cannot_be_written_is_said_and_fails_the_run(pytester):
    pytester.makepyfile("def test_a(): pass")
    pytester.path.joinpath("dir.html").mkdir()
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-html=dir.html")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [f"tpumem: the report could not be written to {pytester.path / 'dir.html'}: is a directory"]
    )


def test_a_report_holding_the_wrong_types_still_makes_a_page():
    """A report edited by hand (or written by a newer writer) is read back checked only where a
    gate needs it; the page shows what it can and never raises."""
    checks = (
        {"check": "leak", "verdict": "leak", "series": {"s": {"values": ["x"]}}, "sites": [1, None], "threshold": "?"},
        {"check": "leak", "verdict": "leak", "series": [], "host_sites": "no", "kept_programs": [3]},
        {"check": "budget", "verdict": "ok", "devices": [], "upcasts": {"a": 1}, "buffers": [None]},
        {"check": "target", "programs": None},
        {"check": "baseline", "changes": [None, {"figure": 1}]},
        {"check": "nonsense"},
    )
    entry = Entry(outcome="failed", checks=checks, failure="<b>")
    ledger = LedgerTests(
        1,
        {
            "t.py::test_<b>": {"residue": 5, "devices": [1], "index": "x", "made": "no"},
            "t.py::test_<h>": {"residue": 0, "host": {"grew": 10**12, "rss": "x", "numpy": [3, {"bytes": "x"}]}},
            "t.py::test_<i>": {"residue": 0, "host": 7},
        },
        ({"said": 3},),
        host_threshold=1,
    )
    report = Report({"devices": "cpu", "versions": None}, {"t.py::test_<b>": entry}, ledger=ledger)
    html = page(report)
    assert pagedata.rows(html)[0][0] == "t.py::test_<b>" and "<pre>&lt;b&gt;</pre>" in _details(html, "t.py::test_<b>")


# --- in a real browser ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    sys.path.insert(0, os.path.dirname(__file__))
    from browser import Browser, find_chromium

    executable = find_chromium()
    if executable is None:
        if os.environ.get("TPUMEM_REQUIRE_BROWSER"):
            pytest.fail("TPUMEM_REQUIRE_BROWSER is set and no Chromium was found (apt-get install chromium)")
        pytest.skip("no Chromium here (Debian: apt-get install chromium); .ci/run installs it")
    with Browser(executable) as b:
        yield b


def _order(browser, column):
    return browser.evaluate(
        f"Array.from(document.querySelectorAll('#tests tbody tr')).map(r => r.cells[{column}].getAttribute('data-value'))"
    )


def test_in_chromium_it_renders_without_a_console_error(run, browser):
    browser.open(str(run[0] / "report.html"))
    assert browser.errors == []
    assert browser.evaluate("document.querySelectorAll('#tests tbody tr').length") == 5
    assert browser.evaluate("document.getElementById('shown').textContent") == "5 of 5 shown"
    height = browser.evaluate("document.querySelector('#tests').getBoundingClientRect().height")
    assert height > 5 * 15


def test_in_chromium_the_table_sorts(run, browser):
    browser.open(str(run[0] / "report.html"))
    peak = 3  # the column
    browser.evaluate(f"document.querySelectorAll('#tests thead th')[{peak}].click()")
    values = [int(v) if v else None for v in _order(browser, peak)]
    known = [v for v in values if v is not None]
    assert known == sorted(known, reverse=True) and values[len(known) :] == [None] * (len(values) - len(known))
    assert (
        browser.evaluate(f"document.querySelectorAll('#tests thead th')[{peak}].getAttribute('aria-sort')")
        == "descending"
    )
    browser.evaluate(f"document.querySelectorAll('#tests thead th')[{peak}].click()")
    values = [int(v) for v in _order(browser, peak) if v]
    assert values == sorted(values)
    browser.evaluate("document.querySelectorAll('#tests thead th')[0].click()")  # by test id, as text
    ids = browser.evaluate(
        "Array.from(document.querySelectorAll('#tests tbody tr')).map(r => r.getAttribute('data-test'))"
    )
    assert ids == sorted(ids, key=str.lower)
    assert browser.errors == []


def test_in_chromium_the_table_filters(run, browser):
    browser.open(str(run[0] / "report.html"))
    browser.evaluate("var f = document.getElementById('filter'); f.value = 'fits'; f.dispatchEvent(new Event('input'))")
    assert browser.evaluate("document.getElementById('shown').textContent") == "2 of 5 shown"
    browser.evaluate(
        "var f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'));"
        "var v = document.getElementById('verdict'); v.value = 'leak'; v.dispatchEvent(new Event('change'))"
    )
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#tests tbody tr')).filter(r => !r.hidden).map(r => r.getAttribute('data-test'))"
    )
    assert shown == [IDS["leak"]]


def test_in_chromium_a_test_s_link_opens_its_section(run, browser):
    browser.open(str(run[0] / "report.html"))
    link = browser.evaluate(f"document.querySelector('tr[data-test=\"{IDS['twin']}\"] a').getAttribute('href')")
    assert browser.evaluate(f"document.querySelector('{link}').open") is False  # a passed test's is closed
    browser.evaluate(f"document.querySelector('tr[data-test=\"{IDS['twin']}\"] a').click()")
    assert browser.evaluate(f"document.querySelector('{link}').open") is True
    assert browser.errors == []


def test_in_chromium_the_planted_leak_shows_its_timeline(run, browser, tmp_path):
    browser.open(str(run[0] / "report.html"))
    # The leak's row links to its details, which a failed test has open: its timeline is drawn.
    link = browser.evaluate(f"document.querySelector('tr[data-test=\"{IDS['leak']}\"] a').getAttribute('href')")
    box = browser.evaluate(
        f"(function(){{ var d = document.querySelector('{link}'); var s = d.querySelector('svg polyline.series');"
        "var r = s.getBoundingClientRect(); return [d.open, r.width, r.height]; })()"
    )
    assert box[0] is True and box[1] > 100 and box[2] > 10, box
    browser.screenshot(str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.errors == []


def test_in_chromium_the_leaking_line_is_on_top_of_the_host_line_that_moved_with_it(run, browser):
    """On CPU the planted leak's arrays are host memory too: host malloc grows by the same 16 MB
    a run and its grey line lies on the blue cpu:0 line. The point on top where they meet is the
    line the leak verdict is about (newcomer2: the grey line hid it)."""
    browser.open(str(run[0] / "report.html"))
    link = browser.evaluate(f"document.querySelector('tr[data-test=\"{IDS['leak']}\"] a').getAttribute('href')")
    color, other, apart, hit = browser.evaluate(
        f"(function(){{ var svg = document.querySelector('{link}').querySelector('svg');"
        "function line(name){ return svg.querySelector('polyline.series[data-name=\"' + name + '\"]'); }"
        "var leak = line('cpu:0 live arrays'), host = line('host malloc');"
        "leak.scrollIntoView({block: 'center'});"
        "function end(l){ var q = l.points[l.points.numberOfItems - 1], p = svg.createSVGPoint();"
        "  p.x = q.x; p.y = q.y; return p.matrixTransform(l.getScreenCTM()); }"
        "var a = end(leak), b = end(host), top = document.elementFromPoint(a.x, a.y);"
        "return [leak.getAttribute('stroke'), host.getAttribute('stroke'), Math.hypot(a.x - b.x, a.y - b.y),"
        "        top.tagName + ' ' + (top.getAttribute('fill') || top.getAttribute('stroke'))]; })()"
    )
    assert color != other and apart < 2, (color, other, apart)  # the two lines meet there
    assert hit == f"circle {color}", hit
    assert browser.errors == []


# What the page's script drew of a section, against the markup of its blocks (pagedata.section),
# both read back through the browser's own serializer: an SVG made by the script has no xmlns
# attribute, and writes 300 where Python writes 300.0.
SAME_AS_BLOCKS = """(function(i, expected){
  function norm(h){ return h.split(' xmlns="http://www.w3.org/2000/svg"').join('').split('>\\n<').join('><')
    .replace(/\\n<\\/svg>/g, '</svg>').replace(/="(-?\\d+)\\.0"/g, '="$1"').replace(/(\\d+)\\.0\\)/g, '$1)'); }
  var d = document.getElementById('t' + i), t = document.createElement('template');
  t.innerHTML = expected;
  var drawn = d.innerHTML, want = t.innerHTML;
  drawn = drawn.slice(drawn.indexOf('</summary>') + 10);
  want = want.slice(want.indexOf('</summary>') + 10);
  return norm(drawn) === norm(want) ? 'same' : [norm(drawn), norm(want)];
})(%d, %s)"""


def _same_as_blocks(browser, html, i, nodeid):
    return browser.evaluate(SAME_AS_BLOCKS % (i, json.dumps("<summary>" + pagedata.section(html, nodeid))))


def test_in_chromium_every_section_is_drawn_as_its_blocks_say(run, browser):
    """The script draws each test's section from its data: the same elements and text, the leak
    timeline's too, as the page once wrote in markup (telling.markup.blocks_html)."""
    html = _html(run[0])
    browser.open(str(run[0] / "report.html"))
    for i, row in enumerate(pagedata.rows(html)):
        assert _same_as_blocks(browser, html, i, row[0]) == "same", row[0]
    assert browser.evaluate("document.querySelectorAll('#sections details.test').length") == 5
    assert browser.errors == []


HOSTILE = [
    "t.py::test_a[</script><script>alert(1)</script>]",
    "t.py::test_b[<!--<script>]",
    "t.py::test_c[\u2028\u2029]",
    "t.py::test_d[\x1b[2J\x00\x7f]",
    "t_\udcff.py::test_e",
    "t.py::test_f[<b onmouseover=alert(1)>&amp;]",
]


def test_in_chromium_hostile_test_ids_stay_text(tmp_path, browser):
    """Test ids that would end the data's script block, open a comment, end a JavaScript line or
    clear a terminal: the data holds them escaped, and the page shows each as text (control
    characters and lone surrogates written as pytest writes them), in a row and in its section."""
    from pytest_tpumem.telling.words import escaped

    entry = Entry(outcome="failed", verdict=Verdict.OVER_BUDGET, peak=2 * MB, budget=MB, failure="</script>")
    report = Report({"devices": "cpu"}, {t: entry for t in HOSTILE})
    html = page(report)
    data = html[html.index('id="tpumem-data">') : html.index('<script type="application/json" id="tpumem-sections-0">')]
    assert "</script" not in data[:-10] and "<!--" not in data and "\u2028" not in data
    (tmp_path / "p.html").write_text(html, encoding="utf-8", errors="surrogateescape")
    browser.open(str(tmp_path / "p.html"))
    shown = browser.evaluate("Array.from(document.querySelectorAll('#tests tbody tr td.id')).map(td => td.textContent)")
    assert sorted(shown) == sorted(escaped(t) for t in HOSTILE)
    assert browser.evaluate("document.querySelectorAll('b, #tests script, #sections script').length") == 0
    assert browser.evaluate("document.querySelectorAll('#sections details.test pre')[0].textContent") == "</script>"
    assert browser.errors == []


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """The page of a made-up report of 3,000 tests (tests/bigreport.py), and the report."""
    import bigreport

    from pytest_tpumem.telling.report import dumps

    where = tmp_path_factory.mktemp("large")
    report = Report.from_json(bigreport.big_report(3000), "large")
    (where / "report.json").write_bytes(dumps(report))
    (where / "report.html").write_text(page(report))
    return where, report


def test_the_page_of_a_large_run_is_smaller_than_its_report(large):
    where, _ = large
    assert os.path.getsize(where / "report.html") < os.path.getsize(where / "report.json") * 0.7


def test_in_chromium_a_large_page_finds_every_test_by_the_filter(large, browser):
    """A table of 3,000 tests draws a page of rows; the filter finds each test among all of them."""
    where, report = large
    browser.open(str(where / "report.html"))
    assert browser.evaluate("document.querySelectorAll('#tests tbody tr').length") == 250
    assert (
        browser.evaluate("document.getElementById('shown').textContent") == "3000 of 3000 shown (the first 250 listed)"
    )
    missing = browser.evaluate(
        "(function(ids){ var f = document.getElementById('filter'), missing = [];"
        "ids.forEach(function(id){ f.value = id; f.dispatchEvent(new Event('input'));"
        "  var rows = Array.from(document.querySelectorAll('#tests tbody tr'));"
        "  if (!rows.some(function(r){ return r.getAttribute('data-test') === id; })) missing.push(id); });"
        "f.value = ''; f.dispatchEvent(new Event('input')); return missing; })("
        + json.dumps(sorted(report.tests))
        + ")"
    )
    assert missing == []
    browser.evaluate(
        "var v = document.getElementById('verdict'); v.value = 'leak'; v.dispatchEvent(new Event('change'))"
    )
    leaks = sum(e.verdict.value == "leak" for e in report.tests.values())
    assert browser.evaluate("document.getElementById('shown').textContent").startswith(f"{leaks} of 3000 shown")
    browser.evaluate("document.querySelector('.more button[data-for=tests]').click()")
    assert browser.evaluate("document.querySelectorAll('#tests tbody tr').length") == 500
    assert browser.errors == []


def test_in_chromium_a_large_page_sorts_by_peak_as_numbers(large, browser):
    where, report = large
    browser.open(str(where / "report.html"))
    browser.evaluate("document.querySelectorAll('#tests thead th')[3].click()")
    peaks = [int(v) for v in _order(browser, 3)]
    most = sorted((e.peak for e in report.tests.values() if e.peak is not None), reverse=True)
    assert peaks == most[:250]  # the largest of all 3,000, as numbers (as text 999MB would top 3GB)
    browser.evaluate("document.querySelectorAll('#tests thead th')[3].click()")
    assert [int(v) for v in _order(browser, 3)] == most[::-1][:250]
    assert browser.errors == []


def test_in_chromium_a_failed_test_s_section_is_whole_when_opened(large, browser):
    """A failed test listed after the sections drawn at first: its link draws its section, open,
    with everything its blocks hold (its failure, its leak timeline)."""
    where, report = large
    html = (where / "report.html").read_text()
    rows = pagedata.rows(html)
    i = next(i for i, r in enumerate(rows) if i >= 250 and r[1] == "leak")
    browser.open(str(where / "report.html"))
    assert browser.evaluate(f"document.getElementById('t{i}')") is None  # not drawn yet
    browser.evaluate(
        f"var f = document.getElementById('filter'); f.value = {json.dumps(rows[i][0])}; f.dispatchEvent(new Event('input'));"
        "document.querySelector('#tests tbody a').click()"
    )
    assert browser.evaluate(f"document.getElementById('t{i}').open") is True
    assert _same_as_blocks(browser, html, i, rows[i][0]) == "same"
    section = browser.evaluate(f"document.getElementById('t{i}').textContent")
    assert report.tests[rows[i][0]].failure in section
    assert browser.evaluate(f"document.querySelectorAll('#t{i} svg polyline.series').length") == 4
    assert browser.errors == []


def test_the_session_picture_is_well_formed_xml_with_a_control_character_in_a_test_s_name(pytester):
    """round2/svg_control_char: a test file named with U+0001 put the raw character in the
    picture's <title>, and a browser showed "Invalid character" instead of the picture. The clean
    twin: a file named in unicode keeps its name."""
    holds = "import jax.numpy as jnp\nHOLD = []\ndef test_x():\n    HOLD.append(jnp.ones((3_000_000,)))\n"
    pytester.path.joinpath("test_\x01ctl.py").write_text(holds)
    pytester.path.joinpath("test_ünï.py").write_text(holds.replace("HOLD = []", "HOLD = [1]"))
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-json=r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    import xml.dom.minidom

    document = xml.dom.minidom.parse(str(pytester.path / "r.ledger.svg"))  # as a browser opens the file
    hovers = sorted(t.firstChild.data for t in document.getElementsByTagName("title"))
    assert hovers == ["test_\\x01ctl.py::test_x: left 12.0MB", "test_ünï.py::test_x: left 12.0MB"]


def test_the_page_names_the_tests_that_grew_host_memory_with_why_and_lists_every_tests_growth():
    numpy = [{"bytes": 120 * 10**6, "arrays": 3, "shape": "f64[5000000]", "kept_by": "global <KEEP> of plant at [0]"}]
    lines = {
        "t.py::test_<grew>": {
            "index": 2,
            "residue": 0,
            "left": 0,
            "devices": {"cpu:0": 0},
            "compiled": 0,
            "host": {"rss": 600 * 10**6, "grew": 125 * 10**6, "numpy": numpy, "since": None},
        },
        "t.py::test_start": {
            "index": 1,
            "residue": 0,
            "left": 0,
            "devices": {"cpu:0": 0},
            "compiled": 1,
            "host": {"rss": 470 * 10**6, "grew": 300 * 10**6, "backend_started": True},
        },
        "t.py::test_small": {
            "index": 3,
            "residue": 0,
            "left": 0,
            "devices": {"cpu:0": 0},
            "compiled": 0,
            "host": {"rss": 610 * 10**6, "grew": 10**7},
        },
    }
    report = Report({"devices": "cpu"}, {}, ledger=LedgerTests(10**7, lines, host_threshold=10**8))
    html = page(report)
    ledger = html[html.index("<h2 id=ledger>") :]
    assert "<h3>named: 1 test that grew host memory 100.0MB or more</h3>" in ledger
    assert "t.py::test_&lt;grew&gt;: host memory +125.0MB</summary>" in ledger
    assert "kept by global &lt;KEEP&gt; of plant at [0]" in ledger and "<KEEP>" not in ledger
    assert "test_start: host memory" not in ledger  # the backend's start is never named
    assert '<th class="n">host grew</th>' in ledger
    assert 'class="host-named"' in ledger  # the picture marks it too
