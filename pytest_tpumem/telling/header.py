"""The report header and the top of the summary: what is installed, the settings, and the backend
with its devices and sources (once, or per pytest-xdist worker where they differ)."""

from __future__ import annotations

from typing import Any

from ..units import format_size
from .words import plural


def versions_line(versions: dict[str, str]) -> str:
    """The header before any device is read: what is installed, and when the devices will be read."""
    installed = ", ".join(f"{name} {v}" for name, v in versions.items()) or "jax not installed"
    return (
        f"tpumem: {installed}; devices are read when the first measured test starts "
        "(after the suite has configured jax) and listed in the summary"
    )


XDIST_CONTROLLER_LINE = "tpumem: devices are read in the pytest-xdist workers and listed in the summary"


def settings_line(max_hbm: int | None, leak_threshold: int, leak_host: bool | int = True) -> str:
    budget = format_size(max_hbm) if max_hbm else "none"
    host = (
        ""
        if leak_host is True
        else (", host RSS not judged" if leak_host is False else f", host RSS {format_size(leak_host)}/iteration")
    )
    return f"tpumem: default budget {budget}, leak threshold {format_size(leak_threshold)}/iteration{host}"


def backend_lines(s: dict[str, Any]) -> list[str]:
    """The backend, its devices, the sources they offer and what this jax lacks (``readings.devices.backend_summary()``)."""
    if "error" in s:
        return [f"tpumem: the jax backend did not start, so no device can be read: {s['error']}"]
    known = s["known_stats"]
    if not s["memory_stats"]:
        stats = "no memory_stats"
    else:
        stats = f"memory_stats ({', '.join(known) if known else 'every field unknown (-1)'})"
    stand_in = "" if "bytes_in_use" in known else "; live arrays stand in for device memory"
    host = ("host malloc, " if s.get("host_malloc") else "") + (
        "host RSS + VmHWM" if s["host_peak_resettable"] else "host RSS (per-test host peak unavailable)"
    )
    limit = f", bytes_limit {format_size(s['bytes_limit'])}" if s["bytes_limit"] else ""
    devices = s["devices"]
    unavailable = s.get("unavailable", {})
    programs = "" if "program runs" in unavailable else ", programs run"
    lines = [
        f"tpumem: jax {s['jax']}, backend {s['backend']} ({s['device_kind']}), "
        f"{plural(len(devices), 'local device')}: {', '.join(devices[:8])}{' ...' if len(devices) > 8 else ''}{limit}",
        f"tpumem: sources: live arrays, {stats}{programs}, {host}{stand_in}",
    ]
    lines += [f"tpumem: {feature} unavailable on this jax: {reason}" for feature, reason in unavailable.items()]
    return lines


def worker_backend_lines(backends: dict[str, dict[str, Any]]) -> list[str]:
    """The backend of every pytest-xdist worker: once where they agree, else per worker."""
    distinct = {repr(sorted(b.items())): b for b in backends.values()}
    if len(distinct) == 1:
        return backend_lines(next(iter(distinct.values())))
    return [f"{worker}: {line}" for worker, b in sorted(backends.items()) for line in backend_lines(b)]


def gpus_line(
    workers: int,
    gpus: int,
    fraction: float,
    kept: list[str],
    fraction_name: str = "XLA_CLIENT_MEM_FRACTION",
    visible: str | None = None,
) -> str:
    """--tpumem-gpus in the header: what each pytest-xdist worker gets (glue/gpus.py), the memory
    variables the user set, which are kept (``kept``: "NAME=value"), the fraction's name the
    installed jaxlib reads, and the ``CUDA_VISIBLE_DEVICES`` shared out where the user set one."""
    if workers <= gpus:
        per = gpus // workers
        said = f"each worker {plural(per, 'GPU')} of its own (CUDA_VISIBLE_DEVICES)"
        idle = gpus - per * workers
        if idle:
            said += f"; {plural(idle, 'GPU')} left idle"
    else:
        said = (
            "each worker a share of one GPU's memory, taken on demand (CUDA_VISIBLE_DEVICES, "
            f"XLA_PYTHON_CLIENT_PREALLOCATE=false, {fraction_name}={fraction} split "
            "between the workers on a GPU)"
        )
    tail = f"; kept as set: {', '.join(kept)}" if kept and workers > gpus else ""
    where = plural(gpus, "GPU") + ("" if visible is None else f" of CUDA_VISIBLE_DEVICES={visible}")
    return f"tpumem: --tpumem-gpus: {plural(workers, 'pytest-xdist worker')} on {where}: {said}{tail}"
