"""``python -m pytest_tpumem``: the JSON reports of --tpumem-json / --tpumem-save outside pytest --
``show`` one, ``compare`` two (the exit status gates a CI), ``merge`` those of several processes,
``html``: one page of them; ``benchmark``: their figures for charting memory over commits.
Imports no jax: it runs where jax is not installed."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .decisions.compare import ToleranceError, compare, parse_tolerances
from .decisions.entry import Report
from .telling import benchmark as benchmarks
from .telling import report as reports
from .telling.comparison import comparison_lines, report_lines
from .telling.files import refusal, write_atomic
from .telling.html import page
from .telling.run import merged_written

PROG = "python -m pytest_tpumem"
EXIT_CODES = (
    "exit status: 0 fine; 1 compare found a regression beyond a --fail tolerance, or compared no test; 2 bad input"
)


def show(args: argparse.Namespace) -> int:
    """A report's context and its tests, worst first."""
    print("\n".join(report_lines(reports.read(args.report))))
    return 0


def compare_reports(args: argparse.Namespace) -> int:
    """NEW against the baseline OLD; 1 where a figure regressed beyond a tolerance, or where the
    tolerances given compared no test (Comparison.failed)."""
    tolerances = parse_tolerances(args.fail, where="--fail")
    if args.fail and not tolerances:
        raise ToleranceError(f"--fail: {' '.join(map(repr, args.fail))} holds no tolerance; give one, e.g. peak:10%")
    old, new = reports.read(args.old), reports.read(args.new)
    comparison = compare(old, new, tolerances)
    print(f"{args.new} against the baseline {args.old}")
    print("\n".join(comparison_lines(comparison, args.old)))
    if not tolerances:
        print("not judged: add --fail peak:10% (for example) to exit 1 on a regression")
    return 1 if comparison.failed else 0


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # a hard link, or a path through a bind mount
    except OSError:
        return False


def _not_an_input(output: str, inputs: Sequence[str], what: str) -> None:
    """ReportError where ``output`` is one of the reports read (an input is never overwritten), or
    holds a file this plugin did not write (telling.files.refusal), before anything is read."""
    if any(_same_file(path, output) for path in inputs):
        raise reports.ReportError(
            f"{output}: is also one of the reports {what}; give -o another path (an input is never overwritten)"
        )

    why = refusal(output)
    if why is not None:
        raise reports.ReportError(f"{output}: {why}")


def _write(output: str, data: bytes) -> None:
    """An output written whole (telling.files.write_atomic); ReportError naming it where it cannot be."""
    try:
        write_atomic(output, data)
    except OSError as e:
        raise reports.ReportError(f"{output}: cannot be written: {e.strerror or e}") from None


def _read_merged(paths: Sequence[str]) -> tuple[list[tuple[str, Report]], Report]:
    """The reports read, and them as one (merged as ``merge`` does where there are several)."""
    read = [(path, reports.read(path)) for path in paths]
    return read, read[0][1] if len(read) == 1 else reports.merge_reports(read)


def merge(args: argparse.Namespace) -> int:
    """The reports of several processes or hosts as one file, written whole."""
    _not_an_input(args.output, args.reports, "to merge")
    merged = reports.merge_reports([(path, reports.read(path)) for path in args.reports])
    _write(args.output, reports.dumps(merged))
    n = merged.context.get("merged_from", len(args.reports))
    print(merged_written(args.output, merged.measured, n))
    return 0


def html(args: argparse.Namespace) -> int:
    """One HTML page of one or more reports (merged as ``merge`` does), with a baseline comparison."""
    _not_an_input(args.output, [*args.reports, *([args.baseline] if args.baseline else [])], "it reads")
    tolerances = parse_tolerances(args.fail, where="--fail")
    if args.fail and not args.baseline:
        raise ToleranceError("--fail needs a baseline to compare with: give --baseline OLD")
    read, report = _read_merged(args.reports)
    comparison = None
    if args.baseline:
        comparison = compare(reports.read(args.baseline), report, tolerances)
    text = page(report, comparison, os.path.basename(args.baseline or ""), [p for p, _ in read])
    _write(args.output, text.encode())
    print(
        f"wrote {args.output}: {report.measured} measured tests from {len(read)} report{'s' if len(read) > 1 else ''}"
    )
    if comparison is not None and tolerances:  # judged: the exit status is said, as compare says it
        print(f"against the baseline {args.baseline}")
        print("\n".join(comparison_lines(comparison, args.baseline)))
    return 1 if comparison is not None and comparison.failed else 0


def benchmark(args: argparse.Namespace) -> int:
    """github-action-benchmark's customSmallerIsBetter JSON of one or more reports (merged as
    ``merge`` does): each measured test's peak and device growth, the run's high-water marks."""
    _not_an_input(args.output, args.reports, "it reads")
    _, report = _read_merged(args.reports)
    found = benchmarks.entries(report)
    if not found:
        raise reports.ReportError(
            f"{', '.join(args.reports)}: no measured test and no high-water mark to chart; nothing written "
            "(github-action-benchmark refuses an empty list)"
        )
    _write(args.output, benchmarks.dumps(found))
    print(f"wrote {args.output}: {len(found)} figures from {report.measured} measured tests (MB, smaller is better)")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Read the JSON reports pytest-tpumem writes (--tpumem-json, --tpumem-save): show one, "
        "compare a run with a baseline, merge the reports of several processes or hosts, write a page of them or "
        "their figures for a benchmark chart.",
        epilog=EXIT_CODES,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser(
        "show",
        help="print a report's context and its tests, worst first",
        description="Print where and when a report was taken (platform, devices, versions, git commit, "
        "process, start time) and its tests, worst first: verdict, peak, budget, growth per iteration.",
        epilog="exit status: 0, or 2 where the report cannot be read",
    )
    p.add_argument("report", metavar="REPORT", help="a report written by --tpumem-json or --tpumem-save")
    p.set_defaults(run=show)

    p = commands.add_parser(
        "compare",
        help="compare a run's report with a baseline; exit 1 on a regression beyond --fail",
        description="Show each test's peak and growth per iteration that changed from OLD (the baseline) to NEW, "
        "and the tests new in NEW or missing from it. Without --fail, changes are shown and never fail. A baseline "
        "taken on another platform or device kind is said so and never fails.",
        epilog="exit status: 0 no figure regressed beyond a --fail tolerance (or none given); 1 one did, or under "
        "--fail no test was compared though both reports have tests (tests are matched whatever rootdir each run had); "
        "2 bad input: a report that cannot be read, a bad --fail",
    )
    p.add_argument("old", metavar="OLD", help="the baseline report (from --tpumem-save)")
    p.add_argument("new", metavar="NEW", help="the report of the run to judge")
    p.add_argument(
        "--fail",
        metavar="EXPR",
        action="append",
        default=[],
        help="exit 1 where a figure grew beyond this tolerance: peak:10%%, peak:50MB, growth:10MB "
        "(MB is 10^6 bytes, MiB 2^20); repeat it or comma-separate, any one exceeded fails",
    )
    p.set_defaults(run=compare_reports)

    p = commands.add_parser(
        "merge",
        help="join the reports of several processes or hosts into one",
        description="Join the reports of the processes of one run (jax.distributed, several hosts) into one: a test "
        "measured in several has the worst verdict, every device's peak, the largest peak and growth. "
        "The file is written whole; an input is never overwritten.",
        epilog="exit status: 0, or 2 where a report cannot be read, is given twice, or OUT is one of them",
    )
    p.add_argument("reports", metavar="REPORT", nargs="+", help="a process's report (report.process-0-of-2.json, ...)")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="the merged report to write")
    p.set_defaults(run=merge)

    p = commands.add_parser(
        "html",
        help="write one self-contained HTML page of one or more reports",
        description="Write one HTML page of a run: its context and verdict counts, every measured test in a table "
        "that sorts and filters, each test's failure text, leak sites, largest arrays and leak timeline, the suite "
        "ledger, and the comparison with --baseline (regressions first). Several reports (the processes or hosts "
        "of one run) are merged as merge does. The page needs no network: it opens from a CI artifact.",
        epilog="exit status: 0; 1 where --fail is given and a figure regressed beyond it; 2 bad input",
    )
    p.add_argument("reports", metavar="REPORT", nargs="+", help="a report written by --tpumem-json or --tpumem-save")
    p.add_argument("-o", "--output", metavar="PAGE", required=True, help="the HTML file to write")
    p.add_argument("--baseline", metavar="OLD", help="a baseline report to compare with (from --tpumem-save)")
    p.add_argument(
        "--fail",
        metavar="EXPR",
        action="append",
        default=[],
        help="as compare's --fail: exit 1 where a figure regressed beyond this tolerance (peak:10%%, residue:10MB)",
    )
    p.set_defaults(run=html)

    p = commands.add_parser(
        "benchmark",
        help="write a report's figures for github-action-benchmark (customSmallerIsBetter)",
        description="Write the figures of one or more reports (merged as merge does) as the JSON list "
        "github-action-benchmark's customSmallerIsBetter tool reads, to chart memory over commits: each measured "
        "test's peak ('TEST peak') and a leak-checked test's growth per iteration on its devices ('TEST "
        "growth/iteration', 0 where it shrank), and the run's high-water marks ('run: cpu:0 high-water mark', 'run: host RSS high-water "
        "mark'), in MB to 0.1 MB. docs/ci.md has the workflow.",
        epilog="exit status: 0; 2 bad input, or a report with nothing to chart",
    )
    p.add_argument("reports", metavar="REPORT", nargs="+", help="a report written by --tpumem-json or --tpumem-save")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the JSON file to write")
    p.set_defaults(run=benchmark)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (bad input: a one-line error on stderr, and 2)."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (reports.ReportError, ToleranceError) as e:
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `show R | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 0
