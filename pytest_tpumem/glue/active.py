"""The active parts, registered as plugins under --tpumem only, and the devices they read.

The Reporter (glue/reporter.py, per run), the Measurer (glue/measure.py, per test) and the suite
ledger (glue/ledger.py) are registered under ``NAMES`` and reach each other through
``config.stash``, by the key each module defines beside its class: ``REPORTER``, ``MEASURER`` and
``LEDGER`` (absent where ``-p no:tpumem-ledger`` blocks the ledger)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..readings.devices import local_devices

if TYPE_CHECKING:
    import jax

NAMES = ("tpumem-reporter", "tpumem-measurer", "tpumem-ledger")  # the names they are registered under, as plugins

_DEVICES: pytest.StashKey[list[jax.Device]] = pytest.StashKey()


def devices(config: pytest.Config) -> list[jax.Device]:
    """The devices the active parts read: what a ``pytest_tpumem_devices`` hook returns, else every
    local device, chosen once. Starts jax's backend: called when the first measured test starts."""
    if _DEVICES not in config.stash:
        chosen = config.hook.pytest_tpumem_devices(config=config)
        config.stash[_DEVICES] = list(local_devices() if chosen is None else chosen)
    return config.stash[_DEVICES]
