"""Host memory: RSS, the host high-water mark (VmHWM) and giving freed heap back to the OS."""

from __future__ import annotations


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
    """Resident set size of this process in bytes, or None where it cannot be read."""
    rss = _proc_status("VmRSS")
    if rss is not None:
        return rss
    try:
        import psutil  # optional, for platforms without /proc

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def host_peak_resettable() -> bool:
    import os

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
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc
