"""Waiting for the work jax still has in flight, so that a reading does not depend on when it is taken.

A test body may return while programs it dispatched are still running: an output it dropped is
not a live array, so nothing can block on it, yet its buffers (on the CPU backend, host memory)
stay allocated until the program ends and are freed then by one of the runtime's threads. Read at
that moment, host RSS (and a GPU's bytes in use) counts them in one reading and not in the next:
on a busy 2-core runner the bundled decode example's RSS moved by one or two of its 33.5 MB cache
buffers from one iteration to the next, in both directions, and got a leak verdict.

The runtime's threads (XLA's, libtpu's, CUDA's) are not Python threads. While any of them is
running or runnable, work is in flight; :func:`wait_idle` waits until none is. Python threads are
left out: the user's (a data loader) and this plugin's sampler may run at any time without being
jax's work. A native thread still runnable when the wait runs out is taken for a spinner (a
polling thread that never sleeps) and not waited for again in this process.

Linux only (``/proc/self/task``); elsewhere nothing is waited for and :func:`wait_idle` says so.
"""

from __future__ import annotations

import os
import threading
import time

from .. import defaults

POLL_S = 0.001

_spinners: set[int] = set()  # native threads found runnable for a whole wait: not waited for again


def _runnable(skip: set[int]) -> set[int] | None:
    """Native ids of this process's threads that are running or runnable (state R), ``skip`` left
    out; None where the threads cannot be listed."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    busy = set()
    for name in tids:
        try:
            tid = int(name)
        except ValueError:
            continue
        if tid in skip:
            continue
        try:
            with open(f"/proc/self/task/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ")".
        end = stat.rfind(b")")
        if end >= 0 and stat[end + 2 : end + 3] == b"R":
            busy.add(tid)
    return busy


def wait_idle(timeout: float = defaults.WAIT_IDLE_S) -> bool | None:
    """Wait until no native thread of this process is running or runnable, seen twice in a row.
    True once idle, False where the wait ran out (the threads still runnable are then taken for
    spinners), None where this platform cannot tell (nothing waited for)."""
    skip = {t.native_id for t in threading.enumerate() if t.native_id is not None} | _spinners
    deadline = time.monotonic() + timeout
    quiet = 0
    while True:
        busy = _runnable(skip)
        if busy is None:
            return None
        if not busy:
            quiet += 1
            if quiet >= 2:  # two snapshots in a row (one listing of the threads apart): no hand-off between them
                return True
            continue
        quiet = 0
        if time.monotonic() >= deadline:
            _spinners.update(busy)
            return False
        time.sleep(POLL_S)
