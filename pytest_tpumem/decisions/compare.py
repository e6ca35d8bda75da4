"""A run against a baseline: each test's figures (``peak``, ``growth``, and the suite ledger's
``residue`` and ``host_residue``) compared with the baseline's, and judged against tolerances such
as ``peak:10%``, ``peak:50MB``, ``growth:10MB`` or ``residue:10MB``.

A figure regresses when it grew beyond *any* tolerance given for it (as pytest-benchmark's
``--benchmark-compare-fail``): ``peak:10%`` fails 100MB -> 111MB, ``peak:50MB`` fails 100MB ->
151MB. It improves when it fell by as much. A percentage judges only changes of at least
defaults.COMPARE_FLOOR (1MB): 16 bytes more on a 100-byte test is not a memory regression.
``growth``, ``residue`` and ``host_residue`` take sizes only: clean code grows by about 0 per
iteration (+-0.5MB of host noise) and leaves about 0 behind, so a percentage of them is noise. Without a tolerance for a figure, its changes are shown, never
judged; neither are those of a test that failed in the baseline (its figures were cut short). A
baseline taken on another platform or device kind is not comparable: its figures are shown, and
nothing is failed for them.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..units import SizeError, parse_size, shown_value
from .entry import Entry, LedgerTests, Report

FIGURES = ("peak", "growth", "residue", "host_residue")
SIZES_ONLY = ("growth", "residue", "host_residue")  # figures about 0 on clean code: a percentage of them is noise


class ToleranceError(ValueError):
    """A tolerance that cannot be read; the message names it and where it came from."""


@dataclass(frozen=True)
class Tolerance:
    figure: str  # one of FIGURES: "peak", "growth", "residue", "host_residue"
    amount: float  # a fraction (0.1 for 10%) where ``relative``, else bytes
    relative: bool
    text: str  # as written: "peak:10%"

    def exceeded(self, old: int, new: int) -> bool:
        """``new`` is above ``old`` by more than this tolerance. A percentage needs a change of at
        least defaults.COMPARE_FLOOR too (a rise from 0 by that much exceeds any percentage)."""
        if new <= old:
            return False
        if self.relative:
            return new - old >= defaults.COMPARE_FLOOR and (new - old) > self.amount * abs(old)
        return new - old > self.amount


def parse_tolerance(text: Any, where: str = "--tpumem-compare-fail") -> Tolerance:
    """``peak:10%``, ``peak:50MB``, ``growth:10MB``, ``residue:10MB``, ``host_residue:50MB`` (sizes as
    everywhere: MB, MiB, ...; a percentage for ``peak`` only)."""
    raw = str(text).strip()
    figure, sep, amount = raw.partition(":")
    figure = figure.strip().lower()
    accepted = (
        "accepted: peak:10%, peak:50MB, growth:10MB, residue:10MB, host_residue:50MB (a figure, a colon, a "
        "percentage or a size)"
    )
    if not sep or figure not in FIGURES:
        raise ToleranceError(f"{where}: {shown_value(raw)} names no figure of {', '.join(FIGURES)}; {accepted}")
    amount = amount.strip()
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*%", amount)
    if match:
        if figure in SIZES_ONLY:
            raise ToleranceError(
                f"{where}: {shown_value(raw)}: {figure} takes a size ({figure}:10MB), not a percentage: clean code "
                f"{'grows by about 0 per iteration' if figure == 'growth' else 'leaves about 0 behind'}, so a "
                "percentage of it is noise"
            )
        percent = float(match.group(1))
        if percent > 1e6:
            raise ToleranceError(f"{where}: {shown_value(raw)}: a percentage from 0 to 1000000; {accepted}")
        return Tolerance(figure, percent / 100, True, f"{figure}:{amount}")
    try:
        size = parse_size(amount, what=f"{where} {shown_value(raw)}")
    except SizeError as e:
        raise ToleranceError(f"{e}; {accepted}") from None
    return Tolerance(figure, float(size), False, f"{figure}:{amount}")


def parse_tolerances(texts: Iterable[Any], where: str = "--tpumem-compare-fail") -> tuple[Tolerance, ...]:
    """Several, each given alone or comma-separated (``peak:10%,growth:10MB``)."""
    out = []
    for text in texts:
        for part in str(text).split(","):
            if part.strip():
                out.append(parse_tolerance(part, where))
    return tuple(out)


@dataclass(frozen=True)
class Change:
    """One figure of one test that differs from the baseline."""

    nodeid: str
    figure: str
    old: int
    new: int
    regressed_beyond: str = ""  # the tolerance it broke ("peak:10%"), "" where none
    improved_beyond: str = ""

    @property
    def regressed(self) -> bool:
        return bool(self.regressed_beyond)

    @property
    def improved(self) -> bool:
        return bool(self.improved_beyond)

    @property
    def percent(self) -> float | None:
        return None if self.old == 0 else 100.0 * (self.new - self.old) / abs(self.old)


def change_order(change: Change) -> tuple[int, int, int, str]:
    """How a comparison lists its changes: regressions, then improvements, then the changes no
    tolerance judged; within each, figure by figure (FIGURES' order), the largest change in
    bytes first (either way), then by test id. Not by percentage: +282% of 23kB of host noise is
    not listed above +41MB of peak."""
    status = 0 if change.regressed else 1 if change.improved else 2
    return (status, FIGURES.index(change.figure), -abs(change.new - change.old), change.nodeid)


def compare_entry(nodeid: str, old: Entry, new: Entry, tolerances: tuple[Tolerance, ...]) -> list[Change]:
    """The figures of one test that differ between the baseline's entry and this run's (judged
    only where the baseline's entry is comparable: the test did not fail there)."""
    if not old.comparable:
        tolerances = ()
    changes = []
    for figure in FIGURES:
        change = compare_figure(nodeid, figure, old.figure(figure), new.figure(figure), tolerances)
        if change is not None:
            changes.append(change)
    return changes


def compare_figure(
    nodeid: str, figure: str, a: int | None, b: int | None, tolerances: tuple[Tolerance, ...]
) -> Change | None:
    """One figure of one test against the baseline's; None where either has none or they are equal."""
    if a is None or b is None or a == b:
        return None
    worse = next((t.text for t in tolerances if t.figure == figure and t.exceeded(a, b)), "")
    better = next((t.text for t in tolerances if t.figure == figure and t.exceeded(b, a)), "")
    return Change(nodeid, figure, a, b, worse, better)


def compare_residues(old: Report, new: Report, tolerances: tuple[Tolerance, ...]) -> list[Change]:
    """Each test's residue (the suite ledger's) and host growth against the baseline's, for the tests
    both ledgers read, matched as entries are (match_tests); a test that failed in the baseline
    judges nothing. A host growth (RSS, which moves by some MB from run to run) is judged only where
    this run names the test for it (at or over its --tpumem-host-residue): a clean test never is."""
    if old.ledger is None or new.ledger is None:
        return []
    matches = match_tests(old.ledger.tests, new.ledger.tests, old.rootdir or None, new.rootdir or None)
    changes = []
    for nodeid, old_id in sorted(matches.items()):
        before = old.ledger.tests[old_id]
        judged = tolerances if before.get("outcome") != "failed" else ()
        changes.append(
            compare_figure(nodeid, "residue", before["residue"], new.ledger.tests[nodeid]["residue"], judged)
        )
        changes.append(_host_change(nodeid, old_id, old.ledger, new.ledger, judged))
    return [c for c in changes if c is not None]


def _host_change(
    nodeid: str, old_id: str, old: LedgerTests, new: LedgerTests, tolerances: tuple[Tolerance, ...]
) -> Change | None:
    """A test's host growth against the baseline's: RSS moves by some MB from run to run, so only a
    test named for host memory in either run is told (a regression beyond a tolerance is then one
    this run names)."""
    before, now, least = old.host_grew(old_id), new.host_grew(nodeid), new.host_threshold
    if before is None or now is None or least <= 0 or max(before, now) < least:
        return None
    return compare_figure(nodeid, "host_residue", max(0, before), max(0, now), tolerances)


DETERMINISTIC_SINCE = 2  # the report schema version from which peaks and growth come from deterministic readings


def foreign(
    old: dict[str, Any],
    new: dict[str, Any],
    old_version: int = DETERMINISTIC_SINCE,
    new_version: int = DETERMINISTIC_SINCE,
) -> str:
    """Why a baseline's figures are not comparable with this run's ("" where they are): another
    platform or device kind, or figures read another way (a report of schema version 1, whose
    peaks a timing-dependent sampler could set). A context that does not say (no measured test
    started the backend) is taken as comparable."""
    for key, what in (("platform", "platform"), ("device_kind", "device kind")):
        a, b = old.get(key), new.get(key)
        if a and b and a != b:
            return f"it was taken on {what} {a!r}, this run is on {b!r}"
    if (old_version < DETERMINISTIC_SINCE) != (new_version < DETERMINISTIC_SINCE):
        return (
            f"it was written by an older pytest-tpumem (schema version {min(old_version, new_version)}), whose peaks "
            "and growth were read another way (a sampler could set a peak); take a new baseline"
        )
    return ""


def match_tests(
    old_ids: Iterable[str], new_ids: Iterable[str], old_root: str | None = None, new_root: str | None = None
) -> dict[str, str]:
    """Which baseline test each of this run's tests is: ``{new id: old id}``.

    A test id is pytest's node id, relative to the rootdir pytest chose, and pytest chooses it
    from its arguments: ``--tpumem-compare ../base.json tests/`` (a space, not ``=``) or a run
    from another directory renames every test. So an id is matched, in this order:
    as it is; as the same file, where both reports name their rootdir (``context.rootdir``);
    then by path suffix (``tests/test_x.py::t`` is ``proj/tests/test_x.py::t``) where exactly one
    test on each side fits. A test matched once is not matched again."""
    old_left, new_left = set(old_ids), set(new_ids)
    matched: dict[str, str] = {n: n for n in new_left & old_left}
    if old_root and new_root and old_root != new_root:
        matched.update(_moved(sorted(old_left - set(matched)), new_left - set(matched), old_root, new_root))
    old_left -= set(matched.values())
    new_left -= set(matched)
    return {**matched, **_by_suffix(sorted(old_left), sorted(new_left))}


def _split(nodeid: str) -> tuple[str, str]:
    """A test id's path and the rest (``::name``)."""
    path, sep, rest = nodeid.partition("::")
    return path, sep + rest


def _parts(nodeid: str) -> tuple[tuple[str, ...], str]:
    """A test id's path as its parts, and the rest."""
    path, rest = _split(nodeid)
    return tuple(p for p in posixpath.normpath(path).split("/") if p not in ("", ".")), rest


def _moved(old_ids: list[str], new_ids: set[str], old_root: str, new_root: str) -> dict[str, str]:
    """The baseline's ids that are one of ``new_ids`` once their file is taken from the baseline's
    rootdir to this run's: ``{new id: old id}``, the first (in ``old_ids``' order) where two are."""
    found: dict[str, str] = {}
    for o in old_ids:
        path, rest = _split(o)
        moved = posixpath.relpath(posixpath.normpath(posixpath.join(old_root, path)), new_root) + rest
        if moved in new_ids and moved not in found:
            found[moved] = o
    return found


def _by_suffix(old_ids: list[str], new_ids: list[str]) -> dict[str, str]:
    """The tests whose paths end alike (``tests/test_x.py::t``, ``proj/tests/test_x.py::t``), where
    exactly one test on each side fits: ``{new id: old id}``."""

    def key(nodeid: str) -> tuple[str, str]:  # the file's name and the rest
        p, rest = _parts(nodeid)
        return p[-1] if p else "", rest

    def fits(a: str, b: str) -> bool:
        (pa, ra), (pb, rb) = _parts(a), _parts(b)
        n = min(len(pa), len(pb))
        return ra == rb and n > 0 and pa[-n:] == pb[-n:]

    by_name: dict[tuple[str, str], list[str]] = {}
    for o in old_ids:
        by_name.setdefault(key(o), []).append(o)
    candidates = {n: [o for o in by_name.get(key(n), []) if fits(o, n)] for n in new_ids}
    taken = Counter(o for found in candidates.values() for o in found)
    matched = {}
    for n, found in candidates.items():
        if len(found) == 1 and taken[found[0]] == 1:
            matched[n] = found[0]
    return matched


def rekeyed(old_tests: dict[str, Entry], matches: dict[str, str]) -> dict[str, Entry]:
    """The baseline's tests under this run's ids where matched (match_tests), the others as they were."""
    renamed = {o: n for n, o in matches.items()}
    return {renamed.get(o, o): entry for o, entry in old_tests.items()}


@dataclass(frozen=True)
class Comparison:
    """A run against a baseline."""

    changes: tuple[Change, ...]  # in change_order: regressions first
    new_tests: tuple[str, ...]  # measured now, not in the baseline
    missing: tuple[str, ...]  # in the baseline, not measured now
    foreign: str = ""  # why the baseline is not used to fail ("" where it is)
    tolerances: tuple[Tolerance, ...] = ()
    compared: int = 0  # tests in both
    renamed: int = 0  # of those, matched under another id (match_tests)
    roots: tuple[str, str] = ("", "")  # the baseline's rootdir and this run's, where recorded

    @property
    def compared_nothing(self) -> bool:
        """Both sides have tests and none is in both: a gate that compared nothing."""
        return self.compared == 0 and bool(self.new_tests) and bool(self.missing)

    @property
    def regressions(self) -> tuple[Change, ...]:
        return () if self.foreign else tuple(c for c in self.changes if c.regressed)

    @property
    def improvements(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.improved)

    @property
    def failed(self) -> bool:
        """A regression beyond a tolerance, or a gate (tolerances given) that compared no test."""
        return bool(self.regressions) or bool(self.tolerances and self.compared_nothing and not self.foreign)


def compare(old: Report, new: Report, tolerances: tuple[Tolerance, ...] = ()) -> Comparison:
    """Two reports, the baseline first; tests matched by match_tests."""
    old_root, new_root = old.rootdir, new.rootdir
    matches = match_tests(old.tests, new.tests, old_root or None, new_root or None)
    old_tests, new_tests = rekeyed(old.tests, matches), new.tests
    changes = []
    both = sorted(set(old_tests) & set(new_tests))
    for nodeid in both:
        changes += compare_entry(nodeid, old_tests[nodeid], new_tests[nodeid], tolerances)
    changes += compare_residues(old, new, tolerances)
    changes.sort(key=change_order)
    return Comparison(
        tuple(changes),
        tuple(sorted(set(new_tests) - set(old_tests))),
        tuple(sorted(set(old_tests) - set(new_tests))),
        foreign(old.context, new.context, old.version, new.version),
        tolerances,
        compared=len(both),
        renamed=sum(1 for n, o in matches.items() if n != o),
        roots=(old_root, new_root),
    )
