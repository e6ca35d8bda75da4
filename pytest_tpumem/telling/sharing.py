"""What --tpumem-tpu-chips and --tpumem-gpus say (glue/sharing.py, glue/chips.py, glue/gpus.py):
the usage errors that refuse a share, and the warning where workers would contend for a host's
devices. Each names the option, the value and what to do instead."""

from __future__ import annotations

from collections.abc import Iterable

from ..units import shown_value
from .words import escaped, plural

# The Share tables' templates: {flag}, {noun} (the unit's plural), {worker}, {workers}, {devices}.
TPU_NONE_FOUND = (
    "{flag}=auto: no TPU chip on this host (no /dev/accel<N>, no /dev/vfio/<N>); give the number, "
    "e.g. {flag}=4, or leave out the option off a TPU host"
)
TPU_STRAY = (
    "{flag}: pytest-xdist worker {worker} is not one of the first {workers}, whose chips pytest-tpumem shares out"
)
TPU_WARNING = (
    "pytest-tpumem: {workers} on a TPU host with {devices}, and nothing gives each worker chips of its own: "
    "libtpu lets one process hold a chip, so the others will fail to start their backend; pass {flag} auto"
)
GPU_NONE_FOUND = (
    "{flag}=auto: no NVIDIA GPU to share (no /dev/nvidia<N>, or a CUDA_VISIBLE_DEVICES that shows none); "
    "give the number, e.g. {flag}=2, or leave out the option off a GPU host"
)
WORKER_UNKNOWN = "{flag}: cannot tell which {noun} pytest-xdist worker {worker!r} gets"
GPU_STRAY = WORKER_UNKNOWN  # a GPU worker past the ones shared out cannot be told its GPUs either
GPU_WARNING = (
    "pytest-tpumem: {workers} on a host with {devices}, and nothing gives each worker GPUs or memory of its "
    "own: each JAX process takes 75% of its GPU when its backend starts, so the others run out of memory; "
    "pass {flag} auto"
)


def started_too_soon(flag: str, where: str) -> str:
    return (
        f"{flag}: jax's backend was started {where} (a conftest or plugin called jax.devices() or ran "
        "a computation at import or configure time); start it inside the tests, or leave out the option"
    )


def chosen_already(flag: str, name: str, value: str, noun: str) -> str:
    """``value``: the environment's, escaped (a control character in it never reaches the terminal)."""
    return (
        f"{flag}: {name}={escaped(value)} is set already, and pytest-tpumem does not override a "
        f"choice of {noun}: unset {name} to give each worker {noun} of its own, or leave out "
        "the option"
    )


def worker_unknown(flag: str, noun: str, worker: str) -> str:
    return WORKER_UNKNOWN.format(flag=flag, noun=noun, worker=worker)


def nothing_to_share(flag: str, unit: str, units: str) -> str:
    """``unit``: "TPU chip"; ``units``: "chips"."""
    return f"{flag}: no {unit} to share; give the number of {units} on this host"


def chips_too_few(flag: str, workers: int, chips: int) -> str:
    return (
        f"{flag}: {plural(workers, 'pytest-xdist worker')} but {plural(chips, 'TPU chip')} on this host, "
        f"and workers must not share a chip: run with -n {chips} or fewer"
    )


def chips_uneven(flag: str, chips: int, workers: int, per: int, taken: Iterable[int], instead: str) -> str:
    """``taken``: the chip counts libtpu takes a process; ``instead``: the -n values that fit."""
    items = [str(c) for c in taken]
    listed = ", ".join(items[:-1]) + " or " + items[-1]
    return (
        f"{flag}: {plural(chips, 'TPU chip')} over {plural(workers, 'pytest-xdist worker')} is {per} each, "
        f"and libtpu takes {listed} chips a process: run with {instead}"
    )


def mask_shows_none(flag: str, name: str, value: str) -> str:
    return f"{flag}: {name}={shown_value(value)} shows no GPU; set it to the GPUs to share, or unset it"


def mask_too_small(flag: str, gpus: int, name: str, value: str, shown: int) -> str:
    return f"{flag}={gpus}: {name}={shown_value(value)} shows {shown}; give at most that many, or auto"


def jaxlib_refuses(flag: str, said: str, error: str) -> str:
    """``said``: the user's memory variables, "NAME='value', ..."; ``error``: jaxlib's ValueError."""
    return (
        f"{flag}: jaxlib refuses the GPU settings a worker would start with ({said}): {escaped(error)}; "
        "jax would only log this and run the worker without its GPU"
    )
