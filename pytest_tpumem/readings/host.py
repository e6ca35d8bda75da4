"""Host memory: RSS, the C allocator's figures (mallinfo2), the host high-water mark (VmHWM),
giving freed heap back to the OS, what a run left allocated by line (tracemalloc), and the
runner's memory limit and OOM kills (its memory cgroups)."""

from __future__ import annotations

import ctypes
import os
import tracemalloc
from typing import Any

from .frames import Frame, is_user_file, short_path

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def host_rss() -> int | None:
    """Resident set size of this process in bytes, or None where it cannot be read. From
    /proc/self/statm's second field, in pages (proc(5): the same figure as VmRSS of
    /proc/self/status, about a quarter of the cost to read: it is read two or three times a test)."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            return int(os.read(fd, 256).split()[1]) * _PAGE
        finally:
            os.close(fd)
    except (OSError, IndexError, ValueError):
        pass
    try:
        import psutil  # optional, for platforms without /proc

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def malloc_figures() -> tuple[int, int] | None:
    """(in use, obtained): the bytes the C allocator has handed out and not had back, and the bytes
    it has taken from the OS for them (its heaps and the chunks it mmapped), from glibc's
    ``mallinfo2`` over every arena; None where it cannot say (another libc, glibc before 2.33).

    Unlike RSS, "in use" does not move with freed memory the allocator keeps for later: a thread's
    arena kept a freed 16.8 MB block resident for a few runs (``malloc_trim`` trims only the main
    heap's top) and RSS moved by it while "in use" did not. RSS less "obtained" is the memory outside
    malloc's heaps: Python's small objects (pymalloc's arenas), memory mapped directly, code. About
    1 us a reading."""
    info = _mallinfo2()
    if info is None:
        return None
    try:
        m = info()
    except Exception:
        return None
    return int(m.uordblks + m.hblkhd), int(m.arena + m.hblkhd)


_MALLINFO2: list[Any] = []


def _mallinfo2() -> Any:
    if not _MALLINFO2:
        try:

            class Mallinfo2(ctypes.Structure):
                _fields_ = [
                    (name, ctypes.c_size_t)
                    for name in (
                        "arena",
                        "ordblks",
                        "smblks",
                        "hblks",
                        "hblkhd",
                        "usmblks",
                        "fsmblks",
                        "uordblks",
                        "fordblks",
                        "keepcost",
                    )
                ]

            fn = ctypes.CDLL(None).mallinfo2
            fn.restype = Mallinfo2
            fn.argtypes = []
            _MALLINFO2.append(fn)
        except (OSError, AttributeError):
            _MALLINFO2.append(None)
    return _MALLINFO2[0]


def host_peak_resettable() -> bool:
    return os.access("/proc/self/clear_refs", os.W_OK)


def reset_host_peak() -> bool:
    """Reset VmHWM (the host high-water mark) through /proc/self/clear_refs; False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def host_peak() -> int | None:
    """VmHWM in bytes: the host peak since the last reset (or process start)."""
    return _proc_status("VmHWM")


def trim_host() -> None:
    """Give freed heap back to the OS before RSS is read.

    Without malloc_trim, glibc keeps freed chunks of a large buffer in the heap and RSS moves by
    the buffer's size from one iteration to the next: noise as large as the allocation.
    """
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def traced_growth(run: Any, depth: int = 32) -> list[tuple[Any, int, int]]:
    """Run ``run()`` once under tracemalloc and return what it left allocated, by the innermost
    user frame (readings.frames.Frame, or None): (frame, bytes, allocations), bytes > 0 only.

    tracemalloc sees Python's and numpy's allocations (a numpy copy of a device array shows at the
    line that made it), not XLA's. Tracing slows the run; call it only once a host leak was found."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(depth)
    try:
        before = tracemalloc.take_snapshot()
        run()
        after = tracemalloc.take_snapshot()
    finally:
        if started:
            tracemalloc.stop()
    grown: dict[Any, list[int]] = {}
    for stat in after.compare_to(before, "traceback"):
        if stat.size_diff <= 0:
            continue
        site = None
        for frame in reversed(stat.traceback):  # innermost first
            if is_user_file(frame.filename):
                site = Frame(short_path(frame.filename), frame.lineno, "")
                break
        entry = grown.setdefault(site, [0, 0])
        entry[0] += stat.size_diff
        entry[1] += max(stat.count_diff, 0)
    return [(site, size, count) for site, (size, count) in grown.items()]


def allocated_at(obj: Any) -> Any:
    """The user's line that allocated ``obj`` (readings.frames.Frame), where tracemalloc traces
    (``python -X tracemalloc=4`` or ``PYTHONTRACEMALLOC=4``: one frame, the default, is numpy's own) and saw it made; else None."""
    if not tracemalloc.is_tracing():
        return None

    traceback = tracemalloc.get_object_traceback(obj)
    for frame in reversed(traceback or ()):  # innermost first
        if is_user_file(frame.filename):
            return Frame(short_path(frame.filename), frame.lineno, "")
    return None


# The kernel's v1 "no limit": the largest page-aligned signed 64-bit number (9223372036854771712)
_V1_UNLIMITED = 1 << 62


def _read(root: str, path: str) -> str | None:
    try:
        with open(os.path.join(root, path.lstrip("/"))) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _up_the_cgroups(root: str, v2_name: str, v1_name: str) -> list[str]:
    """The files ``v2_name`` (cgroup v2) or ``v1_name`` (the v1 memory controller) of this process's
    memory cgroup and of each cgroup above it, innermost first, as /proc/self/cgroup places them."""
    files = []
    for line in (_read(root, "/proc/self/cgroup") or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            base, name = "/sys/fs/cgroup", v2_name
        elif "memory" in controllers.split(","):
            base, name = "/sys/fs/cgroup/memory", v1_name
        else:
            continue
        parts = [p for p in path.split("/") if p]
        files += ["/".join([base, *parts[:depth], name]) for depth in range(len(parts), -1, -1)]
    return files


def runner_limit(root: str = "/") -> tuple[int, str] | None:
    """The memory this process may use before the kernel's OOM killer acts, and where that was
    read: the smallest limit of its memory cgroup and the cgroups above it (cgroup v2
    ``memory.max``, v1 ``memory.limit_in_bytes``; the kernel counts every process of a cgroup,
    pytest-xdist's workers together), else the machine's memory (``MemTotal``); None where none can
    be read. ``root``: where the file system is (tests give a made-up one)."""
    found: list[tuple[int, str]] = []
    for file in _up_the_cgroups(root, "memory.max", "memory.limit_in_bytes"):
        text = (_read(root, file) or "").strip()
        if text.isdecimal() and 0 < int(text) < _V1_UNLIMITED:  # v2 writes "max" for none
            found.append((int(text), file))
    if found:
        return min(found)
    for line in (_read(root, "/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:") and line.split()[1].isdecimal():
            return int(line.split()[1]) * 1024, "/proc/meminfo MemTotal (no memory cgroup limit)"
    return None


def oom_kills(root: str = "/") -> tuple[int, str] | None:
    """How many processes the kernel's OOM killer has killed in this process's memory cgroup and
    those above it (cgroup v2 ``memory.events`` "oom_kill", v1 ``memory.oom_control`` "oom_kill",
    summed up the path), and the innermost file read; None where none can be read."""
    total, first = 0, ""
    for file in _up_the_cgroups(root, "memory.events", "memory.oom_control"):
        for entry in (_read(root, file) or "").splitlines():
            key, _, value = entry.partition(" ")
            if key == "oom_kill" and value.strip().isdecimal():
                total += int(value)
                first = first or file
    return (total, first) if first else None
