"""How a check's result stays with its test, for the Measurer and the fixtures alike: its row on
the test's ``user_properties`` (which pytest-xdist carries to the controller), the files a failing
check leaves, and a leak check run with the session's devices, forecast and progress."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from ..checks import check_leaks_with
from ..decisions.leak import LeakReport
from ..decisions.leakoptions import LeakOptions
from ..targets import Target
from ..telling.files import save_leak
from ..telling.results import row
from ..telling.rows import PROPERTY, encode
from ..telling.words import files_not_written
from .options import SETTINGS

if TYPE_CHECKING:
    import jax

    from ..decisions.budget import BudgetResult

_Result = TypeVar("_Result", "BudgetResult", LeakReport)


class Session(Protocol):
    """What a leak check takes from the Measurer: its devices, forecast and progress."""

    def devices(self) -> list[jax.Device]: ...

    def capacity(self, target: Target | None = None) -> tuple[int, str] | None: ...

    def progress(self) -> Callable[[int, int], None] | None: ...


def record(item: pytest.Item, entry: dict[str, Any]) -> None:
    """Attach a check's row to the test's report (user_properties travel to the xdist controller)."""
    if item.config.stash[SETTINGS].enabled:
        item.user_properties.append((PROPERTY, encode(entry)))


def with_files(result: _Result, save: Callable[..., tuple[str, ...]], directory: str, nodeid: str) -> _Result:
    """``result`` with the files ``save`` wrote for it, or with a note that they could not be written."""
    try:
        files = save(result, directory, nodeid)
    except OSError as e:
        files = (files_not_written(directory, e),)
    return dataclasses.replace(result, files=files)


def run_leak_check(
    item: pytest.Item,
    call: Callable[[], Any],
    session: Session | None,
    options: LeakOptions,
    target: Target | None = None,
) -> LeakReport:
    """The leak check of a test, for the marker and the fixture alike: the devices, forecast and
    progress of ``session`` (the Measurer, where --tpumem is on; else None), files where a directory
    is given, and the row recorded."""
    profile_dir = item.config.stash[SETTINGS].profile_dir
    report = check_leaks_with(
        options,
        call,
        devices=session.devices() if session is not None else None,
        capacity=session.capacity(target) if session is not None else None,
        progress=session.progress() if session is not None else None,
        profile=profile_dir is not None,
    )
    if report.leaking and profile_dir is not None:
        report = with_files(report, save_leak, profile_dir, item.nodeid)
    record(item, row(report))
    return report
