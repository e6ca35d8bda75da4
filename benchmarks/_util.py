"""Shared helpers for the benchmarks: summary statistics, tables, subprocess timing, a copy of the
checkout."""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    """(q1, median, q3); for fewer than 4 values q1/q3 are min/max."""
    xs = sorted(xs)
    if len(xs) < 4:
        return xs[0], statistics.median(xs), xs[-1]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def spread(xs: Sequence[float], fmt: str = "{:.3f}") -> str:
    """'median [q1-q3] (min-max)': the median with its interquartile range and extremes."""
    q1, med, q3 = quartiles(xs)
    return f"{fmt.format(med)} [IQR {fmt.format(q1)}-{fmt.format(q3)}] (min {fmt.format(min(xs))}, max {fmt.format(max(xs))})"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def timed_run(
    cmd: Sequence[str], cwd: str | None = None, env: dict | None = None
) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall time and CPU time (user + sys, all threads) of one subprocess, and its result.

    CPU time is read from RUSAGE_CHILDREN around the run (runs are sequential, so the delta is
    this child's); it is far less disturbed than wall time by other load on a shared machine.
    """
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, proc


def alternate_rounds(
    cmd: dict[str, Sequence[str]],
    rounds: int,
    check: Callable[[str, subprocess.CompletedProcess], None],
    cwd: str | None = None,
    env: dict | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Run every variant once a round, the order rotated each round so none always runs first;
    ``check(name, result)`` stops the benchmark on a bad run. Wall and CPU seconds per variant."""
    names = list(cmd)
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    width = max(map(len, names))
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t, c, proc = timed_run(cmd[name], cwd=cwd, env=env)
            check(name, proc)
            wall[name].append(t)
            cpu[name].append(c)
            print(f"  round {r + 1} {name:{width}s} wall {t:6.2f} s  cpu {c:6.2f} s", flush=True)
    return wall, cpu


def per_round(values: Sequence[float], base: Sequence[float]) -> list[float]:
    """Each round's value over the baseline's of the same round."""
    return [a / b for a, b in zip(values, base)]


def load_average() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average ?"


def machine() -> str:
    from importlib.metadata import version

    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"jax {version('jax')}, jaxlib {version('jaxlib')}, pytest {version('pytest')}, "
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}"
    )


def base_env() -> dict:
    """The environment for child processes: this one, CPU backend pinned, no stray pytest options."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    # bytecode is written and read as where the package is installed (pip compiles it): without it
    # each run compiles the plugin's modules again, 0.2 s here that no user pays
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


PY = sys.executable


REPO = Path(__file__).resolve().parents[1]


def copy_checkout(dest: Path) -> None:
    """The files git knows of (tracked, and new ones not ignored), as they are in the working tree,
    copied under ``dest``."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
