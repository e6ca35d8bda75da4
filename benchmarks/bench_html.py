"""(o) The HTML page of a real run, opened as a person opens it: the bundled examples and optax's
tests (the eight files of bench_real_suite.py, 206 tests, in a venv outside this repository), each
run under ``--tpumem --tpumem-html`` and opened in headless Chromium (tests/browser.py).

For each: every test of the run is in the page (the measured ones in its table, every test the
ledger read in the ledger's), no console error, the table sorts, the page's size, and how long
``python -m pytest_tpumem html`` takes to write it again from the JSON report. optax's tests are
given a default budget (``--tpumem-max-hbm 4GB``) so that every one of them is measured.

    python benchmarks/bench_html.py --python /tmp/optax-venv/bin/python [--screenshot docs/images/html-report.png]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import base_env  # noqa: E402
from bench_real_suite import FILES  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from browser import Browser, find_chromium  # noqa: E402


def check(name: str, directory: str, python: str, args: list[str], env: dict, screenshot: str | None) -> None:
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--tpumem",
         "--tpumem-json=report.json", "--tpumem-html=report.html", *args],
        cwd=directory, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(os.path.join(directory, "report.json")) as f:
        report = json.load(f)
    measured, read = len(report["tests"]), len(report.get("ledger", {}).get("tests", {}))
    start = time.perf_counter()
    subprocess.run(
        [python, "-m", "pytest_tpumem", "html", "report.json", "-o", "again.html"],
        cwd=directory, env=env, check=True, capture_output=True,
    )  # fmt: skip
    cli = time.perf_counter() - start
    size = os.path.getsize(os.path.join(directory, "report.html"))
    with Browser(find_chromium() or "chromium", width=1280, height=900) as b:
        start = time.perf_counter()
        b.open(os.path.join(directory, "report.html"))
        opened = time.perf_counter() - start
        b.evaluate(  # every row drawn: a long table draws a page of rows, and more on demand
            "document.querySelectorAll('.more button').forEach(function(m){ while (!m.parentNode.hidden) m.click(); })"
        )
        rows = b.evaluate("document.querySelectorAll('#tests tbody tr').length")
        ledger_rows = b.evaluate("document.querySelectorAll('#ledger-tests tbody tr').length")
        ids = set(b.evaluate("Array.from(document.querySelectorAll('#tests tbody tr')).map(r => r.dataset.test)"))
        b.evaluate("document.querySelectorAll('#tests thead th')[3].click()")
        peaks = [v for v in b.evaluate(
            "Array.from(document.querySelectorAll('#tests tbody tr')).map(r => r.cells[3].getAttribute('data-value'))"
        ) if v]  # fmt: skip
        sorted_ok = [int(v) for v in peaks] == sorted((int(v) for v in peaks), reverse=True)
        if screenshot:
            b.evaluate("document.querySelectorAll('#tests thead th')[1].click()")  # worst first again
            b.screenshot(screenshot)
        errors = list(b.errors)
    print(
        f"{name}: {proc.stdout.strip().splitlines()[-1]}\n"
        f"  report: {measured} measured, {read} read by the ledger; page: {rows} rows in the table, "
        f"{ledger_rows} in the ledger's; every measured test present: {ids == set(report['tests'])}; "
        f"sorts by peak: {sorted_ok}; console errors: {len(errors)} {errors[:3]}\n"
        f"  page {size / 1e3:.0f} kB; opened in {opened:.2f} s; `python -m pytest_tpumem html` took {cli:.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--python", help="an interpreter with optax's tests' dependencies (bench_real_suite.py --make-venv)"
    )
    ap.add_argument("--screenshot", help="write a PNG of the examples' page here")
    a = ap.parse_args()
    if find_chromium() is None:
        raise SystemExit("no Chromium (Debian: apt-get install chromium)")
    env = base_env()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(REPO, "examples"), os.path.join(tmp, "examples"))
        check("examples", tmp, sys.executable, ["examples"], env, a.screenshot)
    if a.python:
        source = subprocess.run(
            [a.python, "-c", "import optax, os; print(os.path.dirname(optax.__file__))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            for name in FILES:
                shutil.copy(os.path.join(source, "_src", name), tmp)
            check("optax", tmp, a.python, ["--tpumem-max-hbm=4GB", "."], env, None)


if __name__ == "__main__":
    main()
