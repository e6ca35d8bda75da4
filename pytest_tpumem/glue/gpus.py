"""--tpumem-gpus: under pytest-xdist on an NVIDIA GPU host, each worker gets GPUs of its own, or a
share of one.

Each JAX process on a GPU preallocates 75% of its memory when its backend starts
(``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION``: JAX's "GPU memory
allocation" page), so ``pytest -n 2`` on one GPU fails at once: the second worker finds a quarter
left. As --tpumem-tpu-chips does for TPUs (glue/chips.py), each worker's ``os.environ`` is set
before any test module can start jax (glue/sharing.py); here, the host's GPUs and a worker's
environment:

- as many GPUs as workers, or more: ``CUDA_VISIBLE_DEVICES`` gives each worker ``gpus // workers``
  neighbouring GPUs of its own (GPUs left over stay idle);
- fewer GPUs than workers: the workers share them out in turn (worker slot i gets GPU
  ``i % gpus``), and each takes an even share of its GPU's memory on demand:
  ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` and ``XLA_PYTHON_CLIENT_MEM_FRACTION`` = 0.75 divided by
  the workers on that GPU (what one process would preallocate, split; the rest stays for each
  process's CUDA context and libraries).

A variable the user set is never overridden: a ``CUDA_VISIBLE_DEVICES`` already set is a usage
error, as a choice of TPU chips is; a memory variable already set is kept and said in the header.

Nothing here imports jax.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..telling.header import gpus_line
from .options import SettingError

FLAG = "--tpumem-gpus"
CHOSEN = "CUDA_VISIBLE_DEVICES"  # the user's own choice of GPUs, never overridden
MEMORY = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")
JAX_DEFAULT_FRACTION = 0.75  # what one JAX process preallocates of its GPU by default


def host_gpus(root: str = "/") -> int:
    """The NVIDIA GPUs on this host, counted from /dev (``/dev/nvidia<N>``, one a GPU; not
    ``nvidiactl`` or ``nvidia-uvm``) without importing jax; 0 where there are none."""
    try:
        names = os.listdir(os.path.join(root, "dev"))
    except OSError:
        return 0
    return sum(1 for n in names if re.fullmatch(r"nvidia\d+", n))


def worker_env(slot: int, workers: int, gpus: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of worker ``slot`` of ``workers`` on a host with ``gpus`` GPUs, less the
    variables ``environ`` holds already (a memory variable the user set wins)."""
    if workers < 1 or not 0 <= slot < workers:
        raise ValueError(f"worker {slot} of {workers}")
    if gpus < 1:
        raise SettingError(f"{FLAG}: no GPU to share; give the number of GPUs on this host")
    if workers <= gpus:
        per = gpus // workers
        env = {CHOSEN: ",".join(str(g) for g in range(slot * per, (slot + 1) * per))}
    else:
        sharing = len(range(slot % gpus, workers, gpus))  # the workers on this worker's GPU, itself included
        env = {
            CHOSEN: str(slot % gpus),
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{JAX_DEFAULT_FRACTION / sharing:.3f}",
        }
    return {name: value for name, value in env.items() if name not in (environ or {})}


def plan_line(workers: int, gpus: int, environ: Mapping[str, str] = os.environ) -> str:
    """The header's line (telling.header.gpus_line): what each worker gets, and what the user set
    that is kept."""
    kept = [f"{name}={environ[name]}" for name in MEMORY if name in environ]
    return gpus_line(workers, gpus, JAX_DEFAULT_FRACTION, kept)
