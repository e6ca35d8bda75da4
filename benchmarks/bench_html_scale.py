"""(w) The HTML page at the scale of a big JAX suite: the page of 1,000, 10,000 and 50,000 made-up
measured tests (tests/bigreport.py: half of them failed, half leak-checked with a timeline each,
every test in the suite ledger), written by ``python -m pytest_tpumem html`` and opened in
headless Chromium (tests/browser.py, over the DevTools protocol).

For each size: the bytes of the page against the bytes of the JSON report it is made from, the
time to write it, the time to open it (navigation until the load event, when the page's script
has drawn its tables, and the next frame), the time of one keystroke in the filter box (the first
letter typed, which every test matches, and the last of a test's id, which one test matches) and
of a click on the peak column's head (the event until the next frame is drawn, timed in the page),
and that the filter finds that test, with no console error. ``--before`` names
a checkout (its ``pytest_tpumem`` package) whose page is measured the same way, in the same
sitting, for comparison.

    python benchmarks/bench_html_scale.py [--sizes 1000,10000,50000] [--before /tmp/main-checkout]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import base_env, load_average, machine, table  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from bigreport import big_report, test_id  # noqa: E402
from browser import Browser, BrowserError, find_chromium  # noqa: E402

# In the page, time an event until the frame after it is drawn.
UNTIL_DRAWN = """new Promise(function(done){
  var t0 = performance.now(); (function(){ %s })();
  requestAnimationFrame(function(){ requestAnimationFrame(function(){ done(performance.now() - t0); }); });
})"""
KEYSTROKE = "var f = document.getElementById('filter'); f.value = %r; f.dispatchEvent(new Event('input'))"
PEAK_HEAD = "document.querySelectorAll('#tests thead th')[3].click()"


def _until_drawn(b: Browser, action: str) -> float:
    reply = b.call(
        "Runtime.evaluate", {"expression": UNTIL_DRAWN % action, "awaitPromise": True, "returnByValue": True}
    )
    return float(reply["result"]["value"]) / 1000


def _open(b: Browser, path: str) -> float:
    start = time.perf_counter()
    b.open(path)
    b.call("Runtime.evaluate", {"expression": UNTIL_DRAWN % "0", "awaitPromise": True})
    return time.perf_counter() - start


def measure(name: str, package: str, report: str, n: int, env: dict[str, str], tmp: str) -> list[Any]:
    page = os.path.join(tmp, f"{name}-{n}.html")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tpumem", "html", report, "-o", page],
        cwd=tmp, env={**env, "PYTHONPATH": package}, capture_output=True, text=True,
    )  # fmt: skip
    wrote = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{name}: html exited {proc.returncode}: {proc.stderr[-2000:]}")
    size = [f"{os.path.getsize(page) / 1e6:.1f} MB", f"{os.path.getsize(page) / os.path.getsize(report):.2f}"]
    try:
        with Browser(find_chromium() or "chromium", width=1280, height=900, timeout=600) as b:
            _open(b, os.path.join(tmp, "blank.html"))  # the renderer of file:// pages started, not timed
            opened = _open(b, page)
            every = _until_drawn(b, KEYSTROKE % "t")
            one = test_id(n // 2)
            keystroke = _until_drawn(b, KEYSTROKE % one)
            found = b.evaluate("document.getElementById('shown').textContent")
            _until_drawn(b, KEYSTROKE % "")
            sort = _until_drawn(b, PEAK_HEAD)
            errors = list(b.errors)
    except BrowserError as e:  # a step past the browser's 600 s
        return [name, n, *size, f"{wrote:.1f} s", f"({e})", "-", "-", "-"]
    return [
        name,
        n,
        *size,
        f"{wrote:.1f} s",
        f"{opened:.2f} s",
        f"{every * 1000:.0f} / {keystroke * 1000:.0f} ms",
        f"{sort * 1000:.0f} ms",
        f"{found}; errors {len(errors)}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--before", help="a checkout whose page to measure too, in the same sitting")
    a = ap.parse_args()
    if find_chromium() is None:
        raise SystemExit("no Chromium (Debian: apt-get install chromium)")
    from pytest_tpumem.decisions.entry import Report
    from pytest_tpumem.telling.report import dumps

    env = base_env()
    print(machine())
    print(f"at the start: {load_average()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "blank.html"), "w") as f:
            f.write("<!DOCTYPE html><title>blank</title>")
        for n in map(int, a.sizes.split(",")):
            report = os.path.join(tmp, f"report-{n}.json")
            with open(report, "wb") as f:
                f.write(dumps(Report.from_json(big_report(n), report)))
            print(f"{n} tests: the JSON report is {os.path.getsize(report) / 1e6:.1f} MB; {load_average()}", flush=True)
            for name, package in (("before", a.before), ("after", REPO)):
                if package:
                    rows.append(measure(name, package, report, n, env, tmp))
                    print("  " + "  ".join(map(str, rows[-1])), flush=True)
            os.unlink(report)
    print(f"at the end: {load_average()}")
    head = ("page", "tests", "bytes", "of the JSON", "write", "open", "filter: all / one", "sort", "the filter found")
    print(table(head, rows))


if __name__ == "__main__":
    main()
