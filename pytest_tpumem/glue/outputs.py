"""The files a run will write, checked when pytest is configured: a path that holds a
file the plugin did not write (a test source taken as an option's value), or a directory, is a
usage error before any test runs, so nothing is lost and no run is wasted. The same refusal is
made again where each file is written (telling.files), for what appears during the run."""

from __future__ import annotations

import os

import pytest

from ..telling.files import append_refusal, refusal
from .active import NAMES
from .options import Settings, outputs


def check(config: pytest.Config, settings: Settings) -> None:
    """pytest.UsageError naming the option (or ini key), the path and what is there, for the first
    output that may not be written. A pytest-xdist worker checks nothing: its controller did, and
    its own files (ledger.gw1.jsonl) are refused where they are opened, said in the summary."""
    if hasattr(config, "workerinput"):
        return
    ledger = not config.pluginmanager.is_blocked(NAMES[2])
    for name, path in outputs(settings):
        if name in ("tpumem_ledger", "picture") and not ledger:
            continue
        if name == "tpumem_summary":
            why = None if path == os.environ.get("GITHUB_STEP_SUMMARY") else append_refusal(path)
        else:
            why = refusal(path, appended=name == "tpumem_ledger")
        if why is not None:
            raise pytest.UsageError(f"pytest-tpumem: {_said(settings, name)} {path}: {why}")


def _said(settings: Settings, name: str) -> str:
    if name == "picture":
        beside = settings.where("tpumem_json" if settings.json_path is not None else "tpumem_ledger")
        return f"the session's picture (beside {beside})"
    return settings.where(name)
