"""--tpumem-gpus: under pytest-xdist on an NVIDIA GPU host, each worker gets GPUs of its own, or a
share of one.

Each JAX process on a GPU preallocates 75% of its memory when its backend starts
(``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION``: JAX's "GPU memory
allocation" page), so ``pytest -n 2`` on one GPU fails at once: the second worker finds a quarter
left. As --tpumem-tpu-chips does for TPUs (glue/chips.py), each worker's ``os.environ`` is set in
its pytest_configure, before any test module can start jax:

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
from typing import Any

import pytest

from ..telling.header import gpus_line
from ..telling.words import plural as _plural
from .chips import ChipSlots, _local_workers, _not_started
from .options import SettingError, Settings

FLAG = "--tpumem-gpus"
CHOSEN = "CUDA_VISIBLE_DEVICES"  # the user's own choice of GPUs, never overridden
MEMORY = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")
JAX_DEFAULT_FRACTION = 0.75  # what one JAX process preallocates of its GPU by default
SLOT = "tpumem_gpu_slot"  # workerinput keys the controller sets
GPUS = "tpumem_gpus"


def host_gpus(root: str = "/") -> int:
    """The NVIDIA GPUs on this host, counted from /dev (``/dev/nvidia<N>``, one a GPU; not
    ``nvidiactl`` or ``nvidia-uvm``) without importing jax; 0 where there are none."""
    try:
        names = os.listdir(os.path.join(root, "dev"))
    except OSError:
        return 0
    return sum(1 for n in names if re.fullmatch(r"nvidia\d+", n))


def worker_env(slot: int, workers: int, gpus: int) -> dict[str, str]:
    """The environment of worker ``slot`` of ``workers`` on a host with ``gpus`` GPUs."""
    if workers < 1 or not 0 <= slot < workers:
        raise ValueError(f"worker {slot} of {workers}")
    if gpus < 1:
        raise SettingError(f"{FLAG}: no GPU to share; give the number of GPUs on this host")
    if workers <= gpus:
        per = gpus // workers
        return {CHOSEN: ",".join(str(g) for g in range(slot * per, (slot + 1) * per))}
    sharing = len(range(slot % gpus, workers, gpus))  # the workers on this worker's GPU, itself included
    return {
        CHOSEN: str(slot % gpus),
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{JAX_DEFAULT_FRACTION / sharing:.3f}",
    }


def plan_line(workers: int, gpus: int, environ: Any = os.environ) -> str:
    """The header's line (telling.header.gpus_line): what each worker gets, and what the user set
    that is kept."""
    kept = [f"{name}={environ[name]}" for name in MEMORY if name in environ]
    return gpus_line(workers, gpus, JAX_DEFAULT_FRACTION, kept)


def apply(config: Any, settings: Settings) -> None:
    """In a pytest-xdist worker under --tpumem-gpus: set this process's environment before jax
    starts its backend (a memory variable the user set is kept). SettingError where it cannot."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or settings.gpus is None:
        return
    worker = str(workerinput.get("workerid", "?"))
    _not_chosen_already(os.environ)
    _not_started(f"in worker {worker} before pytest-tpumem could give it GPUs", FLAG)
    workers = int(workerinput.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    slot = workerinput.get(SLOT)
    if slot is None:
        match = re.fullmatch(r"gw(\d+)", worker)
        slot = None if match is None else int(match.group(1))
    if workers < 1 or slot is None or not 0 <= slot < workers:
        raise SettingError(f"{FLAG}: cannot tell which GPUs pytest-xdist worker {worker!r} gets")
    gpus = workerinput.get(GPUS) or _resolve(settings.gpus)
    for name, value in worker_env(slot, workers, gpus).items():
        os.environ.setdefault(name, value)  # a memory variable the user set wins


def check_controller(config: Any, settings: Settings) -> str | None:
    """In the pytest-xdist controller under --tpumem-gpus: refuse once, as a usage error, what every
    worker would refuse; hand each worker its slot; return the header's line (None: nothing to do)."""
    if hasattr(config, "workerinput"):
        return None
    workers = _local_workers(config)
    if workers is None:
        return None
    if settings.gpus is None:
        _warn_if_shared(config, workers)
        return None
    _not_chosen_already(os.environ)
    _not_started("in the pytest-xdist controller before pytest-tpumem could share out the GPUs", FLAG)
    gpus = _resolve(settings.gpus)
    worker_env(0, workers, gpus)  # raises what the workers would

    config.pluginmanager.register(ChipSlots(workers, gpus, SLOT, GPUS), "tpumem-gpus")
    return plan_line(workers, gpus)


def _warn_if_shared(config: Any, workers: int, root: str = "/") -> None:
    """Without --tpumem-gpus, on a GPU host where nothing else chose the workers' GPUs or memory: a
    warning that each worker will take 75% of the same GPU (not an error: a conftest may still set
    the environment later)."""
    if workers < 2 or any(name in os.environ for name in (CHOSEN, *MEMORY)):
        return
    gpus = host_gpus(root)
    if gpus == 0:
        return

    config.issue_config_time_warning(
        pytest.PytestConfigWarning(
            f"pytest-tpumem: {_plural(workers, 'pytest-xdist worker')} on a host with {_plural(gpus, 'GPU')}, and "
            "nothing gives each worker GPUs or memory of its own: each JAX process takes 75% of its GPU when its "
            f"backend starts, so the others run out of memory; pass {FLAG} auto"
        ),
        stacklevel=2,
    )


def _resolve(gpus: int | str) -> int:
    if gpus != "auto":
        return int(gpus)
    found = host_gpus()
    if found == 0:
        raise SettingError(
            f"{FLAG}=auto: no NVIDIA GPU on this host (no /dev/nvidia<N>); give the number, e.g. {FLAG}=2, "
            "or leave out the option off a GPU host"
        )
    return found


def _not_chosen_already(environ: Any) -> None:
    if environ.get(CHOSEN):
        raise SettingError(
            f"{FLAG}: {CHOSEN}={environ[CHOSEN]} is set already, and pytest-tpumem does not override a choice of "
            f"GPUs: unset {CHOSEN} to give each worker GPUs of its own, or leave out the option"
        )
