"""The run's context for a report a CI keeps: versions, the memory environment, the process's place
among jax.distributed's processes, the git commit. Read without starting jax's backend."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from . import jaxcompat
from .devices import installed_versions

# Environment variables that change how much device memory a run has or takes, or which devices it sees.
_ENV_PREFIXES = (
    "XLA_",
    "JAX_",
    "TPU_",
    "LIBTPU_",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ALLOW_MULTIPLE_LIBTPU_LOAD",
)
_ENV_EXCLUDED = ("JAX_COORDINATOR_ADDRESS",)  # hosts, not memory


def now() -> str:
    """The time as ISO 8601 with its zone (UTC), to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def memory_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The XLA/JAX/TPU/CUDA/ROCm variables set for this run, sorted: XLA_CLIENT_MEM_FRACTION,
    XLA_FLAGS, TPU_VISIBLE_CHIPS and the like."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in sorted(env) if k.startswith(_ENV_PREFIXES) and k not in _ENV_EXCLUDED}


def versions() -> dict[str, str]:
    """Python, pytest, pytest-tpumem and jax's packages as installed (package metadata: no import)."""
    out = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in ("pytest", "pytest-tpumem"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {**out, **installed_versions()}


def git(directory: str) -> dict[str, Any] | None:
    """The commit checked out in ``directory`` and whether the work tree differs from it; None
    outside a git work tree (or without git)."""

    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(("git", *args), cwd=directory, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        # bytes, decoded leniently: a file name git prints raw (core.quotepath=false) need not be UTF-8
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if not commit:
        return None
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def process() -> tuple[int, int]:
    """(index, count) of this process among jax.distributed's processes: from jax.distributed's
    state where it was initialized (a process that measured nothing has no backend started), else
    from the backend where it is started; (0, 1) otherwise (never started here to find out)."""
    known = jaxcompat.distributed_process()
    if known is not None:
        return known
    if not jaxcompat.backends_started():
        return 0, 1
    import jax

    return int(jax.process_index()), int(jax.process_count())
