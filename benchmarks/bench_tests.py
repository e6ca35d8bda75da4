"""(u) What the plugin's own tests cost: ``python -m pytest tests -n 2`` of an earlier commit and of
this checkout, one after the other, in one sitting.

    python benchmarks/bench_tests.py 0b1fafd            # that commit, then this checkout
    python benchmarks/bench_tests.py 0b1fafd --pairs 2  # before, after, before, after
    python benchmarks/bench_tests.py 0b1fafd -n auto    # the other arguments go to pytest

This machine's speed moves by 15-25% within an hour: ``--pairs`` alternates the two, and each pair's
ratio is shown beside the ratio of the sums.

Each runs in a copy (``git archive`` of the commit; this checkout's files as ``copy_checkout``
copies them), put first on ``PYTHONPATH``, with this interpreter. Its CPU time is counted in a
cgroup of its own (cgroup v1's cpuacct; run as root): the tests' planted runs are forked from a
server that pytest does not wait for, so the ``rusage`` of its children would miss them. The
cgroup is removed, with anything left in it, even when a run fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import REPO, copy_checkout, machine  # noqa: E402

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def timed(label: str, where: Path, args: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``python -m pytest tests ARGS`` in ``where``, and its last line."""
    group = CPUACCT / f"bench_tests_{os.getpid()}_{label}"
    group.mkdir()
    env = {**os.environ, "PYTHONPATH": str(where)}
    try:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())),
        )
        wall = time.perf_counter() - start
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    lines = done.stdout.strip().splitlines()
    return wall, cpu, re.sub(r" in [\d.]+s.*", "", lines[-1].strip("= ")) if lines else f"exit {done.returncode}"


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    commit, args, pairs = sys.argv[1], sys.argv[2:], 1
    if args[:1] == ["--pairs"]:
        pairs, args = int(args[1]), args[2:]
    args = args or ["-n", "2"]
    if not CPUACCT.is_dir():
        raise SystemExit(f"bench_tests.py: {CPUACCT} is not here: the CPU of forked runs cannot be counted")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp, "before"), Path(tmp, "after")
        before.mkdir()
        archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        copy_checkout(after)
        here = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True)
        rows = []
        for _ in range(pairs):
            rows.append((commit, *timed("before", before, args)))
            rows.append((here.stdout.strip(), *timed("after", after, args)))
    print(f"machine: {machine()}; load average at the start: {load:.2f}")
    print(f"python -m pytest tests {' '.join(args)}, {pairs} pair(s), one after the other\n")
    print("| code | wall | CPU | tests |\n|---|---|---|---|")
    for code, wall, cpu, said in rows:
        print(f"| {code} | {wall / 60:.1f} min | {cpu / 60:.1f} min | {said} |")
    print()
    for i in range(0, len(rows), 2):
        print(
            f"pair {i // 2 + 1}: after / before: wall {rows[i + 1][1] / rows[i][1]:.2f}, CPU {rows[i + 1][2] / rows[i][2]:.2f}"
        )
    before_runs, after_runs = rows[0::2], rows[1::2]
    wall, cpu = (sum(r[k] for r in after_runs) / sum(r[k] for r in before_runs) for k in (1, 2))
    print(f"all pairs: after / before: wall {wall:.2f}, CPU {cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
