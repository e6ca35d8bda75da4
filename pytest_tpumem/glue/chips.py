"""--tpumem-tpu-chips: under pytest-xdist on a TPU host, each worker gets chips of its own. Here:
the host's chips, and a worker's environment; glue/sharing.py sets it before jax starts.

libtpu takes a process's chips from its environment when jax starts the backend. Each worker
is a slice of its own (one process), holding ``chips // workers`` neighbouring chips; chips left
over (4 chips, -n 3) stay idle.

How JAX does it (jax-ml/jax at cec06d1):

- ``conftest.py``, ``pytest_collection`` under ``JAX_ENABLE_TPU_XDIST``: one chip per xdist
  worker, ``TPU_VISIBLE_CHIPS=<n of gw<n>>`` and ``ALLOW_MULTIPLE_LIBTPU_LOAD=true``, by
  ``setdefault`` (a value already set wins); "TPU tests should not specify more xdist workers than
  the number of TPU chips".
- ``jax/_src/test_multiprocess.py``: K chips per process, ``TPU_VISIBLE_CHIPS`` = chips
  ``i*K .. (i+1)*K-1``, ``TPU_CHIPS_PER_PROCESS_BOUNDS`` from a table (1: "1,1,1", 2: "1,2,1",
  4: "2,2,1", 8: "2,4,1"; any other count is a ValueError), ``ALLOW_MULTIPLE_LIBTPU_LOAD=1``, and,
  because its processes form one slice under jax.distributed, ``TPU_PROCESS_BOUNDS`` over all of
  them, ``TPU_PROCESS_ADDRESSES`` listing every process, ``TPU_PROCESS_PORT`` its own port and
  ``CLOUD_TPU_TASK_ID=i``.

xdist workers are independent, so here each worker is task 0 of a one-process slice
(``TPU_PROCESS_BOUNDS=1,1,1``, the recipe for independent processes on one host that Ray's
TPU manager and vLLM's TPU data-parallel example use too), with JAX's per-process bounds, and a
port of its own: independent slices on one host otherwise all take libtpu's default
slice-builder port 8471 (Ray offsets it by the sub-slice's index for that reason).

Nothing here imports jax.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..telling import sharing as said
from .options import SettingError

FLAG = "--tpumem-tpu-chips"
# Chips per process -> TPU_CHIPS_PER_PROCESS_BOUNDS, as jax/_src/test_multiprocess.py has them
# (8: a whole 8-chip host, laid out 2x4 as on v6e); it refuses any other count.
BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}
PORT_BASE = 8471  # libtpu's default slice-builder port (as Ray has it); worker slot i listens on PORT_BASE + i
# Spellings an older libtpu reads; where the environment already has them they are set to agree.
LEGACY = {"TPU_CHIPS_PER_HOST_BOUNDS": "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_HOST_BOUNDS": "TPU_PROCESS_BOUNDS"}
GOOGLE_PCI_VENDOR = "0x1ae0"


def host_chips(root: str = "/") -> int:
    """The TPU chips on this host, counted from /dev without importing jax; 0 where there are none.

    v4 and earlier show each chip as /dev/accel<N>, v5e and later as a numeric /dev/vfio/<group>,
    as libtpu opens them (the count Ray and torch_xla take the same way). A /dev/accel directory
    (NVIDIA drivers 570+) is no chip, nor a vfio group whose sysfs shows another vendor's device
    (a BlueField's management interface)."""
    dev = os.path.join(root, "dev")
    try:
        accel = [n for n in os.listdir(dev) if re.fullmatch(r"accel\d+", n) and not os.path.isdir(os.path.join(dev, n))]
    except OSError:
        accel = []
    if accel:
        return len(accel)
    try:
        groups = [n for n in os.listdir(os.path.join(dev, "vfio")) if n.isdigit()]
    except OSError:
        return 0
    return sum(1 for g in groups if not _other_vendor(root, g))


def _other_vendor(root: str, group: str) -> bool:
    """True where sysfs shows vfio ``group``'s devices and none is Google's; False where it cannot tell."""
    devices = os.path.join(root, "sys", "kernel", "iommu_groups", group, "devices")
    vendors = []
    try:
        for device in os.listdir(devices):
            with open(os.path.join(devices, device, "vendor"), encoding="ascii") as f:
                vendors.append(f.read().strip().lower())
    except (OSError, UnicodeDecodeError):
        return False
    return bool(vendors) and GOOGLE_PCI_VENDOR not in vendors


def worker_env(worker_index: int, workers: int, chips: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that gives worker ``worker_index`` of ``workers`` its own ``chips // workers``
    of the host's ``chips`` chips, with the older spellings ``environ`` holds made to agree;
    SettingError where the workers cannot have chips of their own."""
    if workers < 1 or not 0 <= worker_index < workers:
        raise ValueError(f"worker {worker_index} of {workers}")
    if chips < 1:
        raise SettingError(said.nothing_to_share(FLAG, "TPU chip", "chips"))
    if workers > chips:
        raise SettingError(said.chips_too_few(FLAG, workers, chips))
    per = chips // workers
    if per not in BOUNDS:
        raise SettingError(said.chips_uneven(FLAG, chips, workers, per, BOUNDS, _suggest(workers, chips)))
    first = worker_index * per
    port = PORT_BASE + worker_index
    env = {
        "TPU_VISIBLE_CHIPS": ",".join(str(c) for c in range(first, first + per)),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": BOUNDS[per],
        "TPU_PROCESS_BOUNDS": "1,1,1",  # a slice of its own: the workers do not form one job
        "TPU_PROCESS_ADDRESSES": f"localhost:{port}",
        "TPU_PROCESS_PORT": str(port),
        "CLOUD_TPU_TASK_ID": "0",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "true",
    }
    return env | {legacy: env[name] for legacy, name in LEGACY.items() if legacy in (environ or {})}


def _suggest(workers: int, chips: int) -> str:
    # for each share libtpu takes, the most workers that get it (the fewest chips left idle)
    fits = [n for n in range(1, chips + 1) if chips // n in BOUNDS and (n == chips or chips // (n + 1) != chips // n)]
    below = [n for n in fits if n < workers]
    above = [n for n in fits if n > workers]
    options = ([f"-n {below[-1]} ({chips // below[-1]} each)"] if below else []) + (
        [f"-n {above[0]} ({chips // above[0]} each)"] if above else []
    )
    return " or ".join(options) or f"{FLAG} off"
