"""Whether a run took the whole suite, so that its report may replace the baseline (issue 27).

A baseline is what later gates judge every test against. A run narrowed by ``-k``, ``-m``,
``--deselect``, ``--lf``, ``--sw``, test ids or paths given as arguments measured only part of the
suite, and its peaks are those of another selection (a peak is absolute: it depends on what ran
before in the same process). Such a run does not replace the baseline: the last one is kept, and
the summary names what narrowed the run. (Merging by test id was weighed and left: it would mix
the figures of two selections and two commits in one baseline, and keep tests removed from the
suite unless the merge could tell them from tests left out.) A run cut short (``-x``, Ctrl-C) is
refused the same way, in glue/reporter.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

SHOWN = 3  # the test ids a refusal names, at most


@dataclass(frozen=True)
class Selection:
    """What a run selected of what it collected."""

    collected: int = 0  # tests collected, before any was deselected
    deselected: int = 0  # of them, deselected (-k, -m, --deselect, --lf, --sw, a plugin)
    narrowing: tuple[str, ...] = ()  # the options given that deselect: "-k 'test_b'", "--lf"
    reran_failures: int = 0  # --lf: the tests that failed last time, which it ran alone
    given_ids: tuple[str, ...] = ()  # the arguments that name tests, not files ("test_x.py::test_a")
    left_out: tuple[str, ...] = ()  # tests of the last baseline the run's paths left out (left_out())


def left_out(baseline: Iterable[str], collected_files: set[str], exists: Callable[[str], bool]) -> tuple[str, ...]:
    """The baseline's tests that a run given paths as arguments left out: those whose file it did
    not collect though the file is still there (a file that is gone took its tests with it; a test
    gone from a file the run collected was removed or renamed: neither is left out)."""
    out = []
    for nodeid in baseline:
        file = nodeid.split("::", 1)[0]
        if file not in collected_files and exists(file):
            out.append(nodeid)
    return tuple(sorted(out))


def partial(selection: Selection) -> str:
    """Why the run measured only part of the suite, in words naming what narrowed it; "" where it
    took the whole suite."""
    s = selection
    if s.deselected > 0:
        by = " and ".join(s.narrowing) if s.narrowing else "a plugin"
        return f"{by} deselected {s.deselected} of the {s.collected} tests collected"
    if s.reran_failures > 0:
        return f"--lf ran only the {_count(s.reran_failures, 'test')} that failed last time"
    if s.given_ids:
        return f"the run was given test ids ({_some(s.given_ids)}), not the whole suite"
    if s.left_out:
        return f"the paths the run was given leave out {_count(len(s.left_out), 'test')} of the baseline ({_some(s.left_out)})"
    return ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _some(ids: tuple[str, ...]) -> str:
    shown = ", ".join(ids[:SHOWN])
    return shown + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
