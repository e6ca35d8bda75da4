"""Which tests of the last baseline a new baseline keeps: a run narrowed by ``-k``,
``-m``, ``--deselect``, ``--lf``, test ids or paths replaces only the tests it ran.

A baseline saved by every run (ini ``tpumem_save``) must not shrink to the few tests a local
``pytest -k foo`` ran, and a CI that gates ``-m "not slow"`` must still be able to save its
baseline the way its gated runs are taken. So the new baseline is the run's tests, and of the last
baseline's others, those the run did not run but that are still in the suite:

- a test the run deselected (``-k``, ``-m``, ``--deselect``, ``--sw``, ``--lf``, a plugin) is kept:
  pytest collected it, so it exists;
- a test the run collected and ran but did not measure (skipped, its marker removed) is dropped;
- a test whose file is gone is dropped (the file took its tests with it);
- a test whose file the run collected, though it did not collect the test, was removed or
  renamed, and is dropped; unless the run was given test ids or ``--lf`` (pytest then collects
  only some of a file's tests), where it is kept;
- a test whose file is still there but which the run did not collect (it was given other paths)
  is kept.

A run cut short (``-x``, Ctrl-C) or that measured nothing replaces no baseline (glue/reporter.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Selection:
    """What a run selected of what it collected."""

    collected: frozenset[str] = frozenset()  # the tests collected, deselected ones included
    deselected: frozenset[str] = frozenset()  # of them, deselected
    narrowing: tuple[str, ...] = ()  # the options given that deselect: "-k 'test_b'", "--lf"
    # why the run collected only some tests of a file: "test ids given as arguments", "--lf" ("": it did not)
    partial_files: str = ""


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def kept(
    baseline: Iterable[str], measured: set[str], selection: Selection, exists: Callable[[str], bool]
) -> tuple[str, ...]:
    """The last baseline's tests the new one keeps besides the run's ``measured`` ones (the rules
    above); ``exists``: whether a test's file (relative to the rootdir) is still there."""
    s = selection
    files = {_file(nodeid) for nodeid in s.collected}
    out = []
    for nodeid in baseline:
        if nodeid in measured:
            continue  # the run's replaces it
        if nodeid in s.deselected:
            out.append(nodeid)
        elif nodeid in s.collected or not exists(_file(nodeid)):
            continue  # ran and not measured, or its file is gone
        elif s.partial_files or _file(nodeid) not in files:
            out.append(nodeid)
    return tuple(sorted(out))


def kept_because(selection: Selection) -> str:
    """What narrowed the run, in words ("the paths it was given" where no option or test id did)."""
    parts = list(selection.narrowing)
    if selection.partial_files and selection.partial_files not in parts:
        parts.append(selection.partial_files)
    return " and ".join(parts) or "the paths it was given"
