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
  ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` and a memory fraction of 0.75 divided by the workers on
  that GPU (what one process would preallocate, split; the rest stays for each process's CUDA
  context and libraries).

What jaxlib reads (jaxlib/xla_client.py, ``generate_pjrt_gpu_plugin_options``, the same in jax
0.10 to 0.12): the fraction under ``XLA_CLIENT_MEM_FRACTION``, or under the deprecated
``XLA_PYTHON_CLIENT_MEM_FRACTION`` where the new name is empty; both set is a ValueError, which
jax only logs (``xla_bridge.discover_pjrt_plugins``) before running the worker without its GPU.
So the fraction is written under the name the installed jaxlib reads, never beside one the user
set, and every worker's environment is put through that builder first: what jaxlib would refuse
is a usage error here, naming the variables.

A ``CUDA_VISIBLE_DEVICES`` already set is the GPUs to share: each worker gets entries of it (an
index or a UUID), not indices into it, as CUDA matches every process's mask against the whole
host (NVIDIA's CUDA Programming Guide, "CUDA environment variables"; jax's own conftest does the
same with ``ROCR_VISIBLE_DEVICES``). A memory variable the user set is kept and said in the header.

Nothing here imports jax; jaxlib.xla_client is imported to check a worker's environment.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping

from ..readings import jaxcompat
from ..telling import sharing as said
from ..telling.header import gpus_line
from ..units import shown_value
from .options import SettingError

FLAG = "--tpumem-gpus"
CHOSEN = "CUDA_VISIBLE_DEVICES"  # the GPUs this process may use: where set, the ones shared out
FRACTION = "XLA_CLIENT_MEM_FRACTION"  # the name jaxlib reads first
OLD_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"  # deprecated, read where FRACTION is empty
PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"  # no XLA_CLIENT_ twin: only "false", "False", "0" turn it off
ALLOCATOR = "XLA_PYTHON_CLIENT_ALLOCATOR"  # "platform" ignores the fraction and preallocation
MEMORY = (PREALLOCATE, FRACTION, OLD_FRACTION, ALLOCATOR)  # set by the user: kept, and said
JAX_DEFAULT_FRACTION = 0.75  # what one JAX process preallocates of its GPU by default


def host_gpus(root: str = "/", environ: Mapping[str, str] | None = None) -> int:
    """The GPUs this run may share: the entries of ``CUDA_VISIBLE_DEVICES`` where ``environ`` sets
    it, else the NVIDIA GPUs on this host, counted from /dev (``/dev/nvidia<N>``, one a GPU; not
    ``nvidiactl`` or ``nvidia-uvm``) without importing jax; 0 where there are none."""
    visible = _visible(environ or {})
    if visible is not None:
        return len(visible)
    try:
        names = os.listdir(os.path.join(root, "dev"))
    except OSError:
        return 0
    return sum(1 for n in names if re.fullmatch(r"nvidia\d+", n))


def _visible(environ: Mapping[str, str]) -> list[str] | None:
    """The entries of a ``CUDA_VISIBLE_DEVICES`` that is set (indices, UUIDs or MIG ids; empty
    shows no GPU), None where it is not."""
    value = environ.get(CHOSEN)
    if value is None:
        return None
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _set(environ: Mapping[str, str], name: str) -> bool:
    """Whether the user set ``name``: jaxlib takes an empty value as unset (``if memory_fraction:``)."""
    return bool(environ.get(name))


def worker_env(slot: int, workers: int, gpus: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of worker ``slot`` of ``workers`` sharing ``gpus`` GPUs: the first ``gpus``
    entries of ``environ``'s ``CUDA_VISIBLE_DEVICES`` where it is set, else the host's GPUs 0 to
    ``gpus - 1``. A memory variable the user set wins. SettingError where it cannot be done, or where
    jaxlib would refuse the environment the worker ends up with."""
    environ = environ or {}
    if workers < 1 or not 0 <= slot < workers:
        raise ValueError(f"worker {slot} of {workers}")
    ids = _ids(gpus, environ)
    if workers <= gpus:
        per = gpus // workers
        env = {CHOSEN: ",".join(ids[slot * per : (slot + 1) * per])}
    else:
        sharing = len(range(slot % gpus, workers, gpus))  # the workers on this worker's GPU, itself included
        env = {CHOSEN: ids[slot % gpus]}
        if not _set(environ, PREALLOCATE):
            env[PREALLOCATE] = "false"
        if not (_set(environ, FRACTION) or _set(environ, OLD_FRACTION)):
            env[fraction_name()] = f"{JAX_DEFAULT_FRACTION / sharing:.3f}"
    _accepted(environ, env)
    return env


def _ids(gpus: int, environ: Mapping[str, str]) -> list[str]:
    """The GPUs shared out, as ``CUDA_VISIBLE_DEVICES`` entries."""
    visible = _visible(environ)
    if visible is not None and not visible:
        raise SettingError(said.mask_shows_none(FLAG, CHOSEN, environ[CHOSEN]))
    if gpus < 1:
        raise SettingError(said.nothing_to_share(FLAG, "GPU", "GPUs"))
    if visible is None:
        return [str(g) for g in range(gpus)]
    if gpus > len(visible):
        raise SettingError(said.mask_too_small(FLAG, gpus, CHOSEN, environ[CHOSEN], len(visible)))
    return visible[:gpus]


@functools.cache
def fraction_name() -> str:
    """The memory-fraction variable the installed jaxlib reads: ``XLA_CLIENT_MEM_FRACTION`` where its
    option builder takes it, else the name every jaxlib before it read."""
    try:
        options = jaxcompat.gpu_plugin_options({FRACTION: "0.5"})
    except ValueError:
        options = None
    return FRACTION if options is not None and options.get("memory_fraction") == 0.5 else OLD_FRACTION


def _accepted(environ: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Put a worker's environment (``environ`` with ``env`` over it) through jaxlib's own option
    builder: what it refuses (both fraction names set, a fraction that is not a number, an allocator
    this jaxlib lacks), jax would only log. The error names what the user set."""
    try:
        jaxcompat.gpu_plugin_options({**environ, **env})
    except ValueError as error:
        raise SettingError(said.jaxlib_refuses(FLAG, ", ".join(_given(environ)), str(error))) from None


def _given(environ: Mapping[str, str]) -> list[str]:
    """The memory variables the user set, as "NAME='value'"."""
    return [f"{name}={shown_value(environ[name])}" for name in MEMORY if _set(environ, name)]


def plan_line(workers: int, gpus: int, environ: Mapping[str, str] = os.environ) -> str:
    """The header's line (telling.header.gpus_line): what each worker gets, and what the user set
    that is kept."""
    mask = environ.get(CHOSEN)
    return gpus_line(
        workers,
        gpus,
        JAX_DEFAULT_FRACTION,
        _given(environ),
        fraction_name=fraction_name(),
        visible=None if mask is None else shown_value(mask),
    )
