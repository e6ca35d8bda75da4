"""What a program needs on a TPU target, from XLA's memory analysis of a compile for that target.

No TPU is needed: libtpu compiles for a topology's compile-only devices. The figures are per
device, as the TPU compiler lays the program out (tile padding included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .targets import Target, parse_target, topology_devices
from .units import format_size

_REFUSAL = re.compile(r"required for .*?\(([\d.]+)([KMGT]?)\) exceeds available HBM \(([\d.]+)([KMGT]?)\)")
_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class HbmEstimate:
    """Per-device figures of one program compiled for one target."""

    target: str  # topology, "v5e:2x2"
    devices: int  # devices the program was laid out on
    peak: int
    arguments: int
    outputs: int
    temps: int
    generated_code: int
    capacity: int  # usable HBM per device
    refused: bool = False  # the compiler itself said it does not fit
    compiler_message: str = ""

    @property
    def headroom(self) -> int:
        return self.capacity - self.peak

    def describe(self) -> str:
        if self.refused:
            return (
                f"{self.target}: the TPU compiler refused the program: it needs {format_size(self.peak)} per device, "
                f"{format_size(self.capacity)} is available ({self.compiler_message})"
            )
        return (
            f"{self.target} ({self.devices} device{'s' if self.devices != 1 else ''}): peak {format_size(self.peak)} per device "
            f"of {format_size(self.capacity)} (headroom {format_size(self.headroom)}); arguments "
            f"{format_size(self.arguments)}, outputs {format_size(self.outputs)}, temporaries {format_size(self.temps)}, "
            f"code {format_size(self.generated_code)}"
        )


def target_mesh(target: str | Target, axes: dict[str, int] | None = None) -> Any:
    """A Mesh over the target's devices: ``target_mesh("v5e:2x2", {"data": 4})``; one axis of all by default."""
    import numpy as np
    from jax.sharding import Mesh

    t = parse_target(target) if isinstance(target, str) else target
    devices = topology_devices(t.topology)
    axes = axes or {"devices": len(devices)}
    shape = tuple(axes.values())
    if int(np.prod(shape)) != len(devices):
        raise ValueError(f"mesh axes {axes} need {int(np.prod(shape))} devices; {t.topology} has {len(devices)}")
    return Mesh(np.array(devices).reshape(shape), tuple(axes))


def _abstract(tree: Any, sharding: Any) -> Any:
    """Arrays and ShapeDtypeStructs as ShapeDtypeStructs placed on the target; other leaves as they are."""
    import jax

    def leaf(x: Any) -> Any:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            return x
        own = getattr(x, "sharding", None) if isinstance(x, jax.ShapeDtypeStruct) else None
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=own if own is not None else sharding)

    return jax.tree.map(leaf, tree)


def _size(number: str, unit: str) -> int:
    return int(float(number) * _BINARY[unit])


def estimate_hbm(
    fn: Callable[..., Any],
    *args: Any,
    target: str | Target = "v5e",
    mesh: Any = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
    **kwargs: Any,
) -> HbmEstimate:
    """Compile ``fn(*args, **kwargs)`` for ``target`` and return what each device needs.

    Arguments may be real arrays or ``jax.ShapeDtypeStruct`` (pytrees of them). Without a mesh
    the program is laid out on one device of the target; with ``mesh`` (see :func:`target_mesh`)
    and ``in_shardings`` (PartitionSpecs or shardings) it is laid out across the mesh. A program
    the TPU compiler refuses comes back with ``refused=True`` and the compiler's figures.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    t = parse_target(target) if isinstance(target, str) else target
    devices = topology_devices(t.topology)

    def named(spec: Any) -> Any:
        return NamedSharding(mesh, spec) if mesh is not None and isinstance(spec, PartitionSpec) else spec

    jit_kwargs = {}
    default = SingleDeviceSharding(devices[0]) if mesh is None else NamedSharding(mesh, PartitionSpec())
    if in_shardings is not None:
        jit_kwargs["in_shardings"] = jax.tree.map(named, in_shardings, is_leaf=lambda x: isinstance(x, PartitionSpec))
        default = None
    if out_shardings is not None:
        jit_kwargs["out_shardings"] = jax.tree.map(named, out_shardings, is_leaf=lambda x: isinstance(x, PartitionSpec))
    abstract_args = _abstract(args, default)
    abstract_kwargs = _abstract(kwargs, default)
    n_devices = len(mesh.devices.flat) if mesh is not None else 1
    try:
        compiled = jax.jit(fn, **jit_kwargs).lower(*abstract_args, **abstract_kwargs).compile()
    except Exception as e:
        m = _REFUSAL.search(str(e))
        if m is None:
            raise
        return HbmEstimate(
            target=t.topology, devices=n_devices, peak=_size(m[1], m[2]), arguments=0, outputs=0, temps=0,
            generated_code=0, capacity=_size(m[3], m[4]), refused=True, compiler_message=m.group(0),
        )
    ma = compiled.memory_analysis()
    return HbmEstimate(
        target=t.topology,
        devices=n_devices,
        peak=int(ma.peak_memory_in_bytes),
        arguments=int(ma.argument_size_in_bytes),
        outputs=int(ma.output_size_in_bytes),
        temps=int(ma.temp_size_in_bytes),
        generated_code=int(ma.generated_code_size_in_bytes),
        capacity=t.hbm_per_device,
    )

