"""A bounded CPU and memory load beside a measurement, started and stopped by the script that needs it.

``with background_load(cpus=2, mb=300):`` starts ``cpus`` processes; each keeps one core busy with
arithmetic and, every quarter second, allocates ``mb`` megabytes, touches every page and frees
them again (the churn a compile or a data loader makes on a shared CI runner). Every worker exits
on its own after ``max_s`` seconds and as soon as the process that started it is gone, so a script
killed halfway leaves nothing running. As a script (``python benchmarks/_load.py 60``) it loads
the machine for that many seconds.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

SPIN_S = 0.25  # arithmetic between two allocations

_WORKER = f"""
import os, sys, time
mb, max_s, parent = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
end = time.monotonic() + max_s
x = 0
while time.monotonic() < end and os.getppid() == parent:
    began = time.monotonic()
    while time.monotonic() - began < {SPIN_S!r}:
        for i in range(20000):
            x = (x * 1103515245 + i) & 0xFFFFFFFF
    if mb:
        block = bytearray(mb * 10**6)
        for i in range(0, len(block), 4096):   # every page touched: resident, not just reserved
            block[i] = 1
        del block
"""


@contextlib.contextmanager
def background_load(cpus: int = 2, mb: int = 300, max_s: float = 3600) -> Iterator[list[int]]:
    """Keep ``cpus`` cores busy and ``mb`` MB churning per core while the block runs; yields the pids."""
    procs = [
        subprocess.Popen([sys.executable, "-S", "-c", _WORKER, str(mb), str(max_s), str(os.getpid())])
        for _ in range(cpus)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def describe(cpus: int, mb: int) -> str:
    return f"{cpus} load process(es), each keeping one core busy and allocating, touching and freeing {mb} MB every {SPIN_S} s"


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    with background_load(max_s=seconds):
        time.sleep(seconds)
