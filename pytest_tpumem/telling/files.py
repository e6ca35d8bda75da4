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
    """Write ``data`` to ``path`` whole or not at all, and damage nothing on the way.

    A regular file (or none yet) is replaced by a rename from a temporary file beside it, with
    the mode the old file had, else the one the umask gives a new file. A symlink is followed:
    the file it points to is replaced and the link kept. What is not a regular file (/dev/null, a
    FIFO, /dev/stdout) is written through, never renamed over: /dev/full's error is raised, and a
    FIFO without a reader is an error, not a hang. A directory is an error (OSError naming it)."""
    import errno
    import stat

    path = os.path.realpath(path)  # a symlink's target (a dangling link: the file it names)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(path, data, stat.S_ISFIFO(st.st_mode))
        return
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tpumem-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)  # mkstemp makes it private: the mode a file written there would get
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_through(path: str, data: bytes, fifo: bool) -> None:
    """Into a device node or FIFO, opened as it is (no truncation, no rename)."""
    import errno
    import fcntl

    try:
        fd = os.open(path, os.O_WRONLY | (os.O_NONBLOCK if fifo else 0))
    except OSError as e:
        if fifo and e.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO with no reader", path) from None
        raise
    try:
        if fifo:  # opened without waiting for a reader; the writes themselves may wait for it
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _umask() -> int:
    """This process's umask, read without changing it where Linux says it (/proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and put back at once
    os.umask(mask)
    return mask


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
