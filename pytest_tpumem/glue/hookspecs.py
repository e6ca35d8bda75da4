"""Hooks pytest-tpumem offers to conftest files and other plugins."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_tpumem_devices(config: pytest.Config) -> list[Any] | None:
    """The devices tpumem reads for budgets and leak checks (default: every local device of jax's
    default backend). Called once, when tpumem first reads devices: at the first measured test,
    or for the report header where the suite's conftest has started jax's backend already. Return
    None to keep the default. Objects need ``id``, ``platform``, ``client`` and ``memory_stats()``
    as jax's devices have."""
