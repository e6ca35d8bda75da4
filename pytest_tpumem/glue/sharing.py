"""pytest-xdist on an accelerator host: each worker's share of it, TPU chips (glue/chips.py,
--tpumem-tpu-chips) or GPUs (glue/gpus.py, --tpumem-gpus), set in the controller and in each
worker before jax starts. Nothing here imports jax."""

from __future__ import annotations

from typing import Any

from . import chips, gpus
from .options import Settings


def share_out(config: Any, settings: Settings) -> list[str]:
    """pytest-xdist on a TPU or GPU host: each worker's chips (--tpumem-tpu-chips) or GPUs
    (--tpumem-gpus), in the controller and in each worker; the header's lines of what was set.
    SettingError where they cannot be shared out."""
    chips.check_controller(config, settings)
    chips.apply(config, settings)
    said = gpus.check_controller(config, settings)
    gpus.apply(config, settings)
    return [said] if said else []
