"""TPU targets: what each generation offers per device, and how a target is named (``v5e``,
``v6e:4x4``). Compiling for one is in readings/tpu.py.

The usable HBM per device is what the TPU compiler (libtpu 0.0.42) reports when it refuses a
program ("exceeds available HBM (15.75G)", binary units); libtpu 0.0.50 reports 0.01G less for
v5p, v6e and tpu7x. A refused compile's own figure is used where there is one; see
docs/design/tpu-targets.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GiB = 2**30

# generation: (usable HBM per device, what a device is, devices per chip, default topology)
GENERATIONS: dict[str, tuple[int, str, int, str]] = {
    "v2": (int(7.48 * GiB), "TensorCore", 2, "2x2"),
    "v3": (int(15.48 * GiB), "TensorCore", 2, "2x2"),
    "v4": (int(15.25 * GiB), "TensorCore", 2, "2x2x1"),
    "v5e": (int(15.75 * GiB), "chip", 1, "2x2"),
    "v5p": (int(95.74 * GiB), "chip", 1, "2x2x1"),
    "v6e": (int(31.25 * GiB), "chip", 1, "2x2"),
    "tpu7x": (int(94.75 * GiB), "TensorCore", 2, "2x2x1"),
}
_NAME = re.compile(r"^(?P<gen>[a-z0-9]+)(?::(?P<topo>\d+(?:x\d+){1,2}))?$")


class TargetError(ValueError):
    """A target name that is not known; the message lists the known ones."""


@dataclass(frozen=True)
class Target:
    generation: str
    topology: str  # "v5e:2x2"
    hbm_per_device: int
    device: str  # "chip" or "TensorCore"
    devices_per_chip: int


def parse_target(name: object, *, what: str = "target") -> Target:
    """``"v5e"`` or ``"v5e:4x4"`` -> Target."""
    m = _NAME.match(name.strip().lower()) if isinstance(name, str) else None
    if not m or m["gen"] not in GENERATIONS:
        known = ", ".join(GENERATIONS)
        raise TargetError(
            f"{what}: {name!r} is not a TPU target; use one of {known}, optionally with a topology (v5e:2x2, v6e:4x4)"
        )
    hbm, device, per_chip, default_topo = GENERATIONS[m["gen"]]
    topo = m["topo"] or default_topo
    return Target(m["gen"], f"{m['gen']}:{topo}", hbm, device, per_chip)
