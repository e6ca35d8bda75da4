"""--tpumem-tpu-chips: under pytest-xdist on a TPU host, each worker gets chips of its own.

libtpu takes a process's chips from its environment when jax starts the backend, so each worker's
``os.environ`` is set in its pytest_configure, before any test module can start jax. Each worker
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
from typing import Any

import pytest

from ..readings import jaxcompat
from ..telling.words import plural as _plural
from .options import SettingError, Settings

FLAG = "--tpumem-tpu-chips"
# Chips per process -> TPU_CHIPS_PER_PROCESS_BOUNDS, as jax/_src/test_multiprocess.py has them
# (8: a whole 8-chip host, laid out 2x4 as on v6e); it refuses any other count.
BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}
PORT_BASE = 8471  # libtpu's default slice-builder port (as Ray has it); worker slot i listens on PORT_BASE + i
# Spellings an older libtpu reads; where the environment already has them they are set to agree.
LEGACY = {"TPU_CHIPS_PER_HOST_BOUNDS": "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_HOST_BOUNDS": "TPU_PROCESS_BOUNDS"}
CHOSEN = ("TPU_VISIBLE_CHIPS", "TPU_VISIBLE_DEVICES")  # the user's own choice of chips, never overridden
SLOT = "tpumem_chip_slot"  # workerinput keys the controller sets
CHIPS = "tpumem_chips"
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


def worker_env(worker_index: int, workers: int, chips: int) -> dict[str, str]:
    """The environment that gives worker ``worker_index`` of ``workers`` its own ``chips // workers``
    of the host's ``chips`` chips; SettingError where the workers cannot have chips of their own."""
    if workers < 1 or not 0 <= worker_index < workers:
        raise ValueError(f"worker {worker_index} of {workers}")
    if chips < 1:
        raise SettingError(f"{FLAG}: no TPU chip to share; give the number of chips on this host")
    if workers > chips:
        raise SettingError(
            f"{FLAG}: {_plural(workers, 'pytest-xdist worker')} but {_plural(chips, 'TPU chip')} on this host, "
            f"and workers must not share a chip: run with -n {chips} or fewer"
        )
    per = chips // workers
    if per not in BOUNDS:
        raise SettingError(
            f"{FLAG}: {_plural(chips, 'TPU chip')} over {_plural(workers, 'pytest-xdist worker')} is {per} each, "
            f"and libtpu takes {_listed(BOUNDS)} chips a process: run with {_suggest(workers, chips)}"
        )
    first = worker_index * per
    port = PORT_BASE + worker_index
    return {
        "TPU_VISIBLE_CHIPS": ",".join(str(c) for c in range(first, first + per)),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": BOUNDS[per],
        "TPU_PROCESS_BOUNDS": "1,1,1",  # a slice of its own: the workers do not form one job
        "TPU_PROCESS_ADDRESSES": f"localhost:{port}",
        "TPU_PROCESS_PORT": str(port),
        "CLOUD_TPU_TASK_ID": "0",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "true",
    }


def apply(config: Any, settings: Settings) -> None:
    """In a pytest-xdist worker under --tpumem-tpu-chips: set this process's environment so that the
    backend jax starts later holds only this worker's chips. SettingError where it cannot."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or settings.tpu_chips is None:
        return
    worker = str(workerinput.get("workerid", os.environ.get("PYTEST_XDIST_WORKER", "?")))
    _not_chosen_already(os.environ)
    _not_started(f"in worker {worker} before pytest-tpumem could give it chips")
    workers = int(workerinput.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    slot = workerinput.get(SLOT)
    if slot is None:  # no slot from the controller: the worker's own number, gw<n>
        match = re.fullmatch(r"gw(\d+)", worker)
        slot = None if match is None else int(match.group(1))
    if workers < 1 or slot is None:
        raise SettingError(f"{FLAG}: cannot tell which chips pytest-xdist worker {worker!r} gets")
    chips = workerinput.get(CHIPS) or _resolve(settings.tpu_chips)
    if not 0 <= slot < workers:
        raise SettingError(
            f"{FLAG}: pytest-xdist worker {worker} is not one of the first {_plural(workers, 'worker')}, "
            "whose chips pytest-tpumem shares out"
        )
    env = worker_env(slot, workers, chips)
    for legacy, name in LEGACY.items():
        if legacy in os.environ:
            env[legacy] = env[name]
    os.environ.update(env)


def check_controller(config: Any, settings: Settings) -> None:
    """In the pytest-xdist controller under --tpumem-tpu-chips: refuse once, as a usage error, what
    every worker would refuse; then hand each worker its chips' slot (a worker that replaces a
    crashed one gets the chips the crashed one held)."""
    if hasattr(config, "workerinput"):
        return
    workers = _local_workers(config)
    if workers is None:
        return
    if settings.tpu_chips is None:
        _warn_if_shared(config, workers)
        return
    _not_chosen_already(os.environ)
    # The same conftests run in the workers; and a backend here would hold the chips the workers need.
    _not_started("in the pytest-xdist controller before pytest-tpumem could share out the chips")
    chips = _resolve(settings.tpu_chips)
    worker_env(0, workers, chips)  # raises what the workers would
    config.pluginmanager.register(ChipSlots(workers, chips), "tpumem-chips")


def _warn_if_shared(config: Any, workers: int, root: str = "/") -> None:
    """Without --tpumem-tpu-chips, on a TPU host where nothing else chose the workers' chips: a
    warning that the workers will contend for the same chips (not an error: a conftest may still
    give each its chips later, as JAX's own does under JAX_ENABLE_TPU_XDIST)."""
    chosen_elsewhere = ("TPU_VISIBLE_CHIPS", "TPU_VISIBLE_DEVICES", "JAX_ENABLE_TPU_XDIST")  # the last: JAX's conftest
    if workers < 2 or any(name in os.environ for name in chosen_elsewhere):
        return
    chips = host_chips(root)
    if chips == 0:
        return

    config.issue_config_time_warning(
        pytest.PytestConfigWarning(
            f"pytest-tpumem: {_plural(workers, 'pytest-xdist worker')} on a TPU host with {_plural(chips, 'chip')}, and nothing "
            "gives each worker chips of its own: libtpu lets one process hold a chip, so the others will fail to "
            "start their backend; pass --tpumem-tpu-chips auto"
        ),
        stacklevel=2,
    )


class ChipSlots:
    """Controller side: which slot (which chips, or GPUs: glue/gpus.py) each worker holds, in
    ``workerinput``, under ``slot_key``, with the host's count under ``count_key``."""

    def __init__(self, workers: int, chips: int, slot_key: str = SLOT, count_key: str = CHIPS):
        self.chips = chips
        self.free = list(range(workers))
        self.held: dict[str, int] = {}
        self.slot_key, self.count_key = slot_key, count_key

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[self.count_key] = self.chips
        if self.free:
            self.held[node.gateway.id] = slot = self.free.pop(0)
            node.workerinput[self.slot_key] = slot

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        slot = self.held.pop(node.gateway.id, None)
        if slot is not None:
            self.free = sorted([*self.free, slot])


def _resolve(tpu_chips: int | str) -> int:
    if tpu_chips != "auto":
        return int(tpu_chips)
    chips = host_chips()
    if chips == 0:
        raise SettingError(
            f"{FLAG}=auto: no TPU chip on this host (no /dev/accel<N>, no /dev/vfio/<N>); "
            f"give the number, e.g. {FLAG}=4, or leave out the option off a TPU host"
        )
    return chips


def _not_started(where: str, flag: str = FLAG) -> None:
    if jaxcompat.backends_started():
        raise SettingError(
            f"{flag}: jax's backend was started {where} (a conftest or plugin called jax.devices() or ran a "
            "computation at import or configure time); start it inside the tests, or leave out the option"
        )


def _not_chosen_already(environ: Any) -> None:
    for name in CHOSEN:
        if environ.get(name):
            raise SettingError(
                f"{FLAG}: {name}={environ[name]} is set already, and pytest-tpumem does not override a choice "
                f"of chips: unset {name} to give each worker chips of its own, or leave out the option"
            )


def _local_workers(config: Any) -> int | None:
    """How many workers pytest-xdist starts on this host, from its --tx specs (what -n N became);
    None where it distributes nothing, or to other hosts too."""
    try:
        if config.getoption("collectonly") or config.getoption("dist", "no") == "no":
            return None
        tx = config.getoption("tx", None) or []
    except (ValueError, AttributeError):
        return None
    workers = 0
    for spec in tx:
        count, star, rest = str(spec).partition("*")
        if star and count.isdigit():
            workers, spec = workers + int(count), rest
        else:
            workers += 1
        if not any(part.startswith("popen") for part in str(spec).split("//")):
            return None  # ssh or socket workers run on another host, with its own chips
    return workers or None


def _suggest(workers: int, chips: int) -> str:
    # for each share libtpu takes, the most workers that get it (the fewest chips left idle)
    fits = [n for n in range(1, chips + 1) if chips // n in BOUNDS and (n == chips or chips // (n + 1) != chips // n)]
    below = [n for n in fits if n < workers]
    above = [n for n in fits if n > workers]
    options = ([f"-n {below[-1]} ({chips // below[-1]} each)"] if below else []) + (
        [f"-n {above[0]} ({chips // above[0]} each)"] if above else []
    )
    return " or ".join(options) or f"{FLAG} off"


def _listed(counts: Any) -> str:
    items = [str(c) for c in counts]
    return ", ".join(items[:-1]) + " or " + items[-1]
