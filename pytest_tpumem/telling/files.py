"""Files the plugin writes, each whole (a temporary file, then a rename) and never over a file it
did not write (decisions.ours): the reports, the page and pictures, the flight recorder (put in
place at its first line, then appended to), and what a failing check leaves for CI to keep: jax's
device-memory profiles (pprof) and a leak check's timeline (SVG), named from the test id."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tempfile
from typing import TYPE_CHECKING, BinaryIO

from ..decisions.ours import HEAD_BYTES, may_append, may_replace, seems
from .svg import leak_timeline

if TYPE_CHECKING:
    from ..decisions.budget import BudgetResult
    from ..decisions.leak import LeakReport


def stem(nodeid: str) -> str:
    """A file name from a test id, readable and one per id:
    ``tests/test_x.py::test_y[a b]`` -> ``tests.test_x.py--test_y-a-b-1c2d3e4f`` (a hash of the id
    tells apart ids that read the same once cleaned, or cut short)."""
    name = nodeid.replace("::", "--").replace("/", ".").replace(os.sep, ".")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:150] or "test"
    return f"{readable}-{hashlib.sha1(nodeid.encode()).hexdigest()[:8]}"


class NotOurs(FileExistsError):
    """A file the plugin did not write is where it would write: it is left as it is."""


def head(path: str) -> bytes:
    """The first bytes of a regular file (decisions.ours.HEAD_BYTES), what tells whose it is."""
    with open(path, "rb") as f:
        return f.read(HEAD_BYTES)


def not_ours(path: str, data: bytes) -> NotOurs:
    return NotOurs(
        errno.EEXIST,
        f"a file pytest-tpumem did not write is there (it seems to be {seems(data)}), and is left as it is: "
        "give another path, or move that file away",
        path,
    )


def refusal(path: str, appended: bool = False) -> str | None:
    """Why the plugin may not write ``path`` (None: it may): a regular file that is neither empty nor
    the plugin's own (what it seems to be said); for a file ``appended`` to for the whole run (the
    flight recorder), also a directory, a FIFO or a device node (a one-shot write goes through a
    FIFO or device node, and says a directory's error where it writes). Read before the run, so
    that nothing is lost and no run is wasted."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # nothing there to lose (what stops the writing is said where it is written)
    if not stat.S_ISREG(st.st_mode):
        if appended and stat.S_ISDIR(st.st_mode):
            return "is a directory"
        if appended:
            return (
                f"is {_special(st.st_mode)}, not a file: the flight recorder is a file of its own, written a line "
                "at a time for the whole run (give a file's path, or off)"
            )
        return None
    if st.st_size == 0:
        return None

    try:
        data = head(path)
    except OSError as e:
        return f"cannot be read to tell whose it is: {e.strerror or e}"
    return None if may_replace(data) else str(not_ours(path, data).strerror)


def append_refusal(path: str) -> str | None:
    """Why a job summary may not be appended to ``path`` (None: it may): a directory, or a regular
    file that is neither empty nor text (decisions.ours.may_append: a test source, a report, a
    page). Other steps' summaries are text: what is there is kept, and the summary follows it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return None
    try:
        data = head(path)
    except OSError as e:
        return f"cannot be read to tell whose it is: {e.strerror or e}"
    if may_append(data):
        return None
    return (
        f"holds what is not a Markdown summary (it seems to be {seems(data)}), and is left as it is: give another "
        "path, or move that file away"
    )


def append_text(path: str, text: str, checked: bool = True) -> None:
    """Append ``text`` to ``path`` in one write (UTF-8), after ``append_refusal`` where ``checked``
    (GitHub's own $GITHUB_STEP_SUMMARY is not: appending to it is what it is for)."""
    why = append_refusal(path) if checked else None
    if why is not None:
        raise NotOurs(errno.EEXIST, why, path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_ours(path: str, st: os.stat_result) -> None:
    """NotOurs where the regular file at ``path`` is neither empty nor the plugin's."""
    if st.st_size == 0:
        return

    data = head(path)
    if not may_replace(data):
        raise not_ours(path, data)


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all, and damage nothing on the way.

    A regular file (or none yet) is replaced by a rename from a temporary file beside it, with
    the mode the old file had, else the one the umask gives a new file; a file that is neither
    empty nor one the plugin wrote is never replaced (NotOurs, an OSError naming it and what it
    seems to be). A symlink is followed: the file it points to is replaced and the link kept.
    What is not a regular file (/dev/null, a FIFO, /dev/stdout) is written through, never renamed
    over: /dev/full's error is raised, and a FIFO without a reader is an error, not a hang. A
    directory is an error (OSError naming it)."""
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
    if st is not None:
        _check_ours(path, st)
    f, tmp = _new_beside(path, st)
    try:
        with f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def _new_beside(path: str, st: os.stat_result | None) -> tuple[BinaryIO, str]:
    """A new file in ``path``'s directory, open to write, with the mode the old file at ``path``
    had (``st``), else the one the umask gives a new file: renamed into place by the caller, or
    removed (_discard)."""
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tpumem-", dir=directory)
    try:
        os.fchmod(fd, mode)  # mkstemp makes it private: the mode a file written there would get
    except BaseException:
        os.close(fd)
        _discard(tmp)
        raise
    return os.fdopen(fd, "wb"), tmp


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


class Appended:
    """A file written a line at a time for the whole run (the flight recorder), put in place at its
    first line: a new file beside ``path`` renamed over it, so that two runs at once never share
    one file (each writes its own, and the path names the last one to start: ``replaced`` says
    when that is not this one). Refused as write_atomic refuses, and also where ``path`` is a FIFO
    or device node (refusal)."""

    def __init__(self, path: str, first: bytes):
        self.path = os.path.realpath(path)
        why = refusal(self.path, appended=True)
        if why is not None:
            raise OSError(errno.EEXIST, why, self.path)
        try:
            st: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            st = None
        self._file, tmp = _new_beside(self.path, st)
        try:
            self.write(first)
            os.replace(tmp, self.path)
        except BaseException:
            self._file.close()
            _discard(tmp)
            raise
        mine = os.fstat(self._file.fileno())
        self._id = (mine.st_dev, mine.st_ino)

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    def replaced(self) -> bool:
        """Whether ``path`` now names another file than this one (another run started since)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._id

    def close(self) -> None:
        self._file.close()


def _write_through(path: str, data: bytes, fifo: bool) -> None:
    """Into a device node or FIFO, opened as it is (no truncation, no rename)."""
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
