"""Files a failing check leaves for CI to keep: jax's device-memory profiles (pprof) and a leak
check's timeline (SVG), named from the test id, each written whole (a temporary file, then a rename)."""

from __future__ import annotations

import os
import re
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..decisions.budget import BudgetResult
    from ..decisions.leak import LeakReport


def stem(nodeid: str) -> str:
    """A file name from a test id, readable and one per id:
    ``tests/test_x.py::test_y[a b]`` -> ``tests.test_x.py--test_y-a-b-1c2d3e4f`` (a hash of the id
    tells apart ids that read the same once cleaned, or cut short)."""
    import hashlib

    name = nodeid.replace("::", "--").replace("/", ".").replace(os.sep, ".")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:150] or "test"
    return f"{readable}-{hashlib.sha1(nodeid.encode()).hexdigest()[:8]}"


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: a temporary file beside it, then a rename."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tpumem-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o644)  # readable, as an artifact: mkstemp makes it private
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save_leak(report: LeakReport, directory: str, nodeid: str) -> tuple[str, ...]:
    """The profiles (after the warmup, after the last run) and the timeline of a failing leak check."""
    from .svg import leak_timeline

    base = os.path.join(directory, stem(nodeid))
    paths = []
    for suffix, data in zip(("after-warmup", "after-last-run"), report.profiles):
        paths.append(f"{base}.leak.{suffix}.pb.gz")
        write_atomic(paths[-1], data)
    paths.append(f"{base}.leak.svg")
    write_atomic(paths[-1], leak_timeline(report, nodeid).encode())
    return tuple(paths)


def save_budget(result: BudgetResult, directory: str, nodeid: str) -> tuple[str, ...]:
    """The device-memory profile of a failing budget test, taken at the end of its body."""
    if result.peak.profile is None:
        return ()
    path = os.path.join(directory, stem(nodeid)) + ".budget.pb.gz"
    write_atomic(path, result.peak.profile)
    return (path,)
