"""Where the active part is found, under --tpumem: ``config.stash[MEASURER]`` (glue/measure.py,
per test) and ``config.stash[REPORTER]`` (glue/reporter.py, per run); the suite ledger (glue/ledger.py) is registered beside them; absent while the plugin is off."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .measure import Measurer
    from .reporter import Reporter

MEASURER: pytest.StashKey[Measurer] = pytest.StashKey()
REPORTER: pytest.StashKey[Reporter] = pytest.StashKey()
NAMES = ("tpumem-reporter", "tpumem-measurer", "tpumem-ledger")  # the names they are registered under, as plugins
