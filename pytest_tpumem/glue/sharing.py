"""pytest-xdist on an accelerator host: each worker's share of it, TPU chips (--tpumem-tpu-chips,
glue/chips.py) or GPUs (--tpumem-gpus, glue/gpus.py), set before jax starts.

One flow for both: the controller resolves the count, refuses once what every worker would
refuse, and hands each worker its slot in ``workerinput``; each worker sets its environment in its
pytest_configure, before any test module can start jax. A choice of TPU chips the user made
already is refused (a CUDA_VISIBLE_DEVICES is shared out, glue/gpus.py); without the option,
workers that would contend for the host's devices are warned. What differs is a table, a
``Share``: ``TPU`` and ``GPUS``; what they say is in telling/sharing.py. Nothing here imports jax.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..readings import jaxcompat
from ..telling import sharing as said
from ..telling.words import plural
from . import chips, gpus
from .options import SettingError, Settings

if TYPE_CHECKING:
    from .reporter import Worker


@dataclass(frozen=True)
class Share:
    """What differs between sharing out TPU chips and GPUs; its methods are the flow both follow.

    The messages are templates: ``{flag}``, ``{noun}`` (the unit's plural), ``{worker}``,
    ``{workers}`` and ``{devices}`` (counted in words)."""

    flag: str
    setting: str  # the Settings field: "auto", a count, or None where the option is not given
    unit: str  # "chip": the devices' name in messages
    plugin: str  # the controller's plugin name
    slot_key: str  # workerinput keys the controller sets: the worker's slot, the host's count
    count_key: str
    chosen: tuple[str, ...]  # the user's own choice of devices, never overridden
    chosen_elsewhere: tuple[str, ...]  # beside ``chosen``: set, the workers need no warning
    count: Callable[[str, Mapping[str, str]], int]  # the devices to share: root directory, os.environ; no jax
    worker_env: Callable[[int, int, int, Mapping[str, str]], dict[str, str]]  # slot, workers, count, os.environ
    none_found: str  # --flag=auto on a host without the devices
    stray: str  # a worker beyond the ones the devices are shared out to
    warning: str  # without the option, the workers will contend for the host's devices
    line: Callable[[int, int], str] | None = None  # the header's line: workers, count

    @property
    def noun(self) -> str:
        return self.unit + "s"

    def _say(self, template: str, **values: Any) -> str:
        return template.format(flag=self.flag, noun=self.noun, **values)

    def check_controller(self, config: pytest.Config, settings: Settings) -> str | None:
        """In the pytest-xdist controller: refuse once, as a usage error, what every worker would
        refuse; then hand each worker its slot (a worker that replaces a crashed one gets the slot
        the crashed one held). The header's line, or None."""
        if hasattr(config, "workerinput"):
            return None
        workers = local_workers(config)
        if workers is None:
            return None
        value = getattr(settings, self.setting)
        if value is None:
            self.warn_if_shared(config, workers)
            return None
        self._not_chosen_already(os.environ)
        # The same conftests run in the workers; and a backend here would hold what the workers need.
        self._not_started(f"in the pytest-xdist controller before pytest-tpumem could share out the {self.noun}")
        count = self._resolve(value)
        for slot in range(workers):  # raises what the workers would
            self.worker_env(slot, workers, count, os.environ)
        config.pluginmanager.register(Slots(workers, count, self.slot_key, self.count_key), self.plugin)
        return None if self.line is None else self.line(workers, count)

    def apply(self, config: pytest.Config, settings: Settings) -> None:
        """In a pytest-xdist worker: set this process's environment so that the backend jax starts
        later holds only this worker's share. SettingError where it cannot."""
        workerinput = getattr(config, "workerinput", None)
        value = getattr(settings, self.setting)
        if workerinput is None or value is None:
            return
        worker = str(workerinput.get("workerid", os.environ.get("PYTEST_XDIST_WORKER", "?")))
        self._not_chosen_already(os.environ)
        self._not_started(f"in worker {worker} before pytest-tpumem could give it {self.noun}")
        workers = int(workerinput.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
        slot = workerinput.get(self.slot_key)
        if slot is None:  # no slot from the controller: the worker's own number, gw<n>
            match = re.fullmatch(r"gw(\d+)", worker)
            slot = None if match is None else int(match.group(1))
        if workers < 1 or slot is None:
            raise SettingError(said.worker_unknown(self.flag, self.noun, worker))
        if not 0 <= slot < workers:
            raise SettingError(self._say(self.stray, worker=worker, workers=plural(workers, "worker")))
        count = workerinput.get(self.count_key) or self._resolve(value)
        os.environ.update(self.worker_env(slot, workers, count, os.environ))

    def warn_if_shared(self, config: pytest.Config, workers: int, root: str = "/") -> None:
        """Without the option, on a host with the devices where nothing else chose the workers'
        share: a warning that the workers will contend for the same devices (not an error: a
        conftest may still give each its share later)."""
        if workers < 2 or any(os.environ.get(name) for name in (*self.chosen, *self.chosen_elsewhere)):
            return
        count = self.count(root, os.environ)
        if count == 0:
            return

        said = self._say(self.warning, workers=plural(workers, "pytest-xdist worker"), devices=plural(count, self.unit))
        config.issue_config_time_warning(pytest.PytestConfigWarning(said), stacklevel=2)

    def _resolve(self, value: int | str) -> int:
        if value != "auto":
            return int(value)
        count = self.count("/", os.environ)
        if count == 0:
            raise SettingError(self._say(self.none_found))
        return count

    def _not_started(self, where: str) -> None:
        if jaxcompat.backends_started():
            raise SettingError(said.started_too_soon(self.flag, where))

    def _not_chosen_already(self, environ: Mapping[str, str]) -> None:
        for name in self.chosen:
            if environ.get(name):
                raise SettingError(said.chosen_already(self.flag, name, environ[name], self.noun))


TPU = Share(
    flag=chips.FLAG,
    setting="tpu_chips",
    unit="chip",
    plugin="tpumem-chips",
    slot_key="tpumem_chip_slot",
    count_key="tpumem_chips",
    chosen=("TPU_VISIBLE_CHIPS", "TPU_VISIBLE_DEVICES"),
    chosen_elsewhere=("JAX_ENABLE_TPU_XDIST",),  # JAX's own conftest gives each worker a chip
    count=lambda root, environ: chips.host_chips(root),  # a choice of chips is refused, not shared
    worker_env=chips.worker_env,
    none_found=said.TPU_NONE_FOUND,
    stray=said.TPU_STRAY,
    warning=said.TPU_WARNING,
)

GPUS = Share(
    flag=gpus.FLAG,
    setting="gpus",
    unit="GPU",
    plugin="tpumem-gpus",
    slot_key="tpumem_gpu_slot",
    count_key="tpumem_gpus",
    chosen=(),  # a CUDA_VISIBLE_DEVICES the user set is the GPUs to share out (gpus.worker_env)
    chosen_elsewhere=(*gpus.MEMORY, "JAX_ENABLE_CUDA_XDIST"),  # JAX's own conftest gives each worker a GPU
    count=gpus.host_gpus,
    worker_env=gpus.worker_env,
    none_found=said.GPU_NONE_FOUND,
    stray=said.GPU_STRAY,
    warning=said.GPU_WARNING,
    line=gpus.plan_line,
)


def share_out(config: pytest.Config, settings: Settings) -> list[str]:
    """Each worker's chips (--tpumem-tpu-chips) or GPUs (--tpumem-gpus), in the controller and in
    each worker; the header's lines of what was set. SettingError where they cannot be shared out."""
    said = []
    for share in (TPU, GPUS):
        line = share.check_controller(config, settings)
        share.apply(config, settings)
        said += [line] if line else []
    return said


class Slots:
    """Controller side: which slot (which chips or GPUs) each worker holds, in ``workerinput``,
    under ``slot_key``, with the host's count under ``count_key``."""

    def __init__(self, workers: int, count: int, slot_key: str, count_key: str):
        self.count = count
        self.free = list(range(workers))
        self.held: dict[str, int] = {}
        self.slot_key, self.count_key = slot_key, count_key

    def pytest_configure_node(self, node: Worker) -> None:
        node.workerinput[self.count_key] = self.count
        if self.free:
            self.held[node.gateway.id] = slot = self.free.pop(0)
            node.workerinput[self.slot_key] = slot

    def pytest_testnodedown(self, node: Worker, error: object) -> None:
        slot = self.held.pop(node.gateway.id, None)
        if slot is not None:
            self.free = sorted([*self.free, slot])


def local_workers(config: pytest.Config) -> int | None:
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
            return None  # ssh or socket workers run on another host, with devices of its own
    return workers or None
