"""What other tests left alive when a measured test begins: read by the suite ledger at
the start of the test's call, so that a budget judges the test's own use whatever ran before it,
and its failure names who left the rest and where."""

from __future__ import annotations

import pytest

from ..decisions.ledger import fixture_owner
from ..decisions.peak import LeftBehind
from ..measuring.ledger import BEFORE_TESTS, made_by_line
from .ledger import LEDGER, Ledger
from .pytestcompat import fixture_defs, fixture_location

SHOWN = 5  # the owners a test's report names (the largest); the figures count them all


def own_owners(item: pytest.Item) -> set[str]:
    """The ledger's owners whose arrays are the test's own: the test (what its function-scoped
    fixtures made), the fixtures of a wider scope it uses, and what was alive before the first test
    (made at import: there whatever runs, and in whichever order)."""
    owners = {item.nodeid, BEFORE_TESTS}
    for name, defs in fixture_defs(item).items():
        for fixturedef in defs:
            if getattr(fixturedef, "scope", "function") != "function":
                owners.add(fixture_owner(fixturedef.scope, name, fixture_location(fixturedef)))
    return owners


def left_behind(item: pytest.Item) -> tuple[LeftBehind, ...]:
    """What other tests (and fixtures of a wider scope the test does not use) left alive now, the
    most first; () where the ledger is off or no backend runs."""
    ledger = item.config.stash.get(LEDGER, None)
    if ledger is None:
        return ()
    reading = ledger.take(item.nodeid)  # arrays first seen now (made by its setup) are the test's
    if not reading.started:
        return ()
    own = own_owners(item)
    left = [
        LeftBehind(owner, {label: n for label, n in on.items() if n > 0})
        for owner, on in reading.owned_on.items()
        if owner not in own and any(n > 0 for n in on.values())
    ]
    return tuple(sorted(left, key=lambda b: (-b.nbytes, b.owner)))


def explained(item: pytest.Item, left: tuple[LeftBehind, ...]) -> tuple[LeftBehind, ...]:
    """``left`` with, for the SHOWN largest, the line that made them and what keeps them (read now:
    for a failure's text); the rest as they are."""
    ledger = item.config.stash.get(LEDGER, None)
    if ledger is None:
        return left
    return tuple(_explained(ledger, b.owner, b.devices) if i < SHOWN else b for i, b in enumerate(left))


def _explained(ledger: Ledger, owner: str, devices: dict[str, int]) -> LeftBehind:
    """``owner``'s arrays with the line that made most of them and what keeps them: from the
    ledger's explanation of the test where it named it, else the line read off the arrays now."""
    explanation = next((line.explanation for line in ledger.lines if line.test == owner and line.explanation), None)
    made = explanation.made if explanation is not None else made_by_line(ledger.reader.arrays_of(owner))
    held = explanation.held if explanation is not None else ()
    site = next((m.site for m in made if m.site is not None), None)
    return LeftBehind(owner, devices, str(site) if site is not None else "", held[0].holder if held else "")
