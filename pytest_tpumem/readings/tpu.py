"""What a program needs on a TPU target, from a compile for that target.

No TPU is needed: libtpu compiles for a topology's compile-only devices (:func:`topology_devices`). Every compile runs with
XLA's dump on (it costs no measurable time next to the compile): its buffer assignment gives the
HBM the program is laid out in, per device, tile padding included (the total the compiler itself
compares with the chip's capacity when it refuses a program), and its largest buffers. XLA's
``peak_memory_in_bytes`` on TPU can count on-chip scratch too (VMEM, SMEM: 64 MiB for one plain
matmul on v5e), so it is kept as ``xla_peak`` and only used where no dump was written.
"""

from __future__ import annotations

import collections
import functools
import importlib.util
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import LIBTPU_INSTALL, first_line
from ..targets import Target, parse_target
from .buffers import Buffer, hlo_buffers, largest_buffers, memory_spaces, wide_arrays
from .capture import own_lowering
from .devices import libtpu_startup_filtered
from .retarget import retarget

_REFUSAL = re.compile(r"required for .*?\(([\d.]+)([KMGT]?)\) exceeds available HBM \(([\d.]+)([KMGT]?)\)")
_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_CACHE: collections.OrderedDict[Any, HbmEstimate] = collections.OrderedDict()  # compiled programs, by their text
_CACHE_SIZE = 256


@dataclass(frozen=True)
class HbmEstimate:
    """Per-device figures of one program compiled for one target."""

    target: str  # topology, "v5e:2x2"
    devices: int  # devices the program was laid out on
    peak: int  # HBM the program needs per device: its buffer assignment's total (else XLA's peak)
    arguments: int
    outputs: int
    temps: int
    generated_code: int
    capacity: int  # usable HBM per device
    refused: bool = False  # the compiler itself said it does not fit
    compiler_message: str = ""
    program: str = ""
    xla_peak: int = 0  # XLA's peak_memory_in_bytes: HBM plus on-chip scratch
    spaces: tuple[tuple[str, int], ...] = field(default=())  # bytes per memory space from the buffer assignment
    buffers: tuple[Buffer, ...] = field(default=())  # the largest HBM buffers
    wide: tuple[Buffer, ...] = field(default=())  # every float32/float64 array the program makes (its HLO), for
    # decisions.upcast to tell what its upcasts cost on the target

    @property
    def headroom(self) -> int:
        return self.capacity - self.peak


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


def _text(lowered: Any) -> str:
    """The lowered module with its source locations (two programs that differ only in where they
    come from must not share a cached estimate: its buffers name source lines)."""
    try:
        return lowered.as_text(debug_info=True)
    except TypeError:  # an older jax without the keyword
        return lowered.as_text()


def _size(number: str, unit: str) -> int:
    return int(float(number) * _BINARY[unit])


def compile_estimate(jitted: Any, args: Any, kwargs: Any, target: Target, devices: int) -> HbmEstimate:
    """Lower and compile ``jitted`` for ``target`` from abstract arguments and read what it needs.

    A refusal by the TPU compiler ("exceeds available HBM") comes back as ``refused=True`` with its
    figures; any other compile error is raised. The same program text compiled for the same target
    is answered from a cache of this process.
    """
    name = getattr(jitted, "__name__", "") or ""
    with own_lowering():
        lowered = jitted.lower(*args, **kwargs)
        key = (target.topology, devices, _text(lowered))
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return replace(cached, program=name)
        with tempfile.TemporaryDirectory(prefix="tpumem-xla-dump-") as dump:
            try:
                compiled = lowered.compile(compiler_options={"xla_dump_to": dump})
            except Exception as e:
                m = _REFUSAL.search(str(e))
                if m is None:
                    raise
                estimate = HbmEstimate(
                    target=target.topology,
                    devices=devices,
                    peak=_size(m[1], m[2]),
                    arguments=0,
                    outputs=0,
                    temps=0,
                    generated_code=0,
                    capacity=_size(m[3], m[4]),
                    refused=True,
                    compiler_message=m.group(0),
                    program=name,
                    xla_peak=_size(m[1], m[2]),
                )
            else:
                ma = compiled.memory_analysis()
                estimate = HbmEstimate(
                    target=target.topology,
                    devices=devices,
                    peak=int(ma.peak_memory_in_bytes),
                    arguments=int(ma.argument_size_in_bytes),
                    outputs=int(ma.output_size_in_bytes),
                    temps=int(ma.temp_size_in_bytes),
                    generated_code=int(ma.generated_code_size_in_bytes),
                    capacity=target.hbm_per_device,
                    program=name,
                    xla_peak=int(ma.peak_memory_in_bytes),
                )
            spaces = memory_spaces(dump)
            estimate = replace(
                estimate, buffers=largest_buffers(dump), spaces=tuple(spaces.items()), wide=_wide_arrays(dump, name)
            )
            if "default" in spaces and not estimate.refused:
                estimate = replace(estimate, peak=spaces["default"])
    _CACHE[key] = estimate
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return estimate


def _wide_arrays(dump: str, name: str) -> tuple[Buffer, ...]:
    """The float32 and float64 arrays of the optimized module dumped in ``dump`` (none where it was not written)."""
    module = next(iter(sorted(Path(dump).glob("*after_optimizations.txt"))), None)
    if module is None:
        return ()
    return tuple(replace(b, programs=(name,)) for b in wide_arrays(hlo_buffers(module.read_text(errors="replace"))))


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
    the TPU compiler refuses comes back with ``refused=True`` and the compiler's figures. Either way
    the estimate lists the program's largest buffers.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    t = parse_target(target) if isinstance(target, str) else target
    devices = topology_devices(t.topology)

    def named(spec: Any) -> Any:
        return NamedSharding(mesh, spec) if mesh is not None and isinstance(spec, PartitionSpec) else spec

    jit_kwargs = {}
    default: Any = SingleDeviceSharding(devices[0]) if mesh is None else NamedSharding(mesh, PartitionSpec())
    if in_shardings is not None:
        jit_kwargs["in_shardings"] = jax.tree.map(named, in_shardings, is_leaf=lambda x: isinstance(x, PartitionSpec))
        default = None
    if out_shardings is not None:
        jit_kwargs["out_shardings"] = jax.tree.map(named, out_shardings, is_leaf=lambda x: isinstance(x, PartitionSpec))
    n_devices = len(mesh.devices.flat) if mesh is not None else 1
    return compile_estimate(
        jax.jit(fn, **jit_kwargs),
        _abstract(args, default),
        _abstract(kwargs, default),
        t,
        n_devices,
    )


class LibtpuMissing(RuntimeError):
    """libtpu is not installed, so nothing can be compiled for a TPU target."""


class TopologyError(ValueError):
    """A topology libtpu cannot lay out; the message gives libtpu's reason."""


@functools.cache
def topology_devices(topology: str) -> tuple[Any, ...]:
    """The compile-only devices of a TPU topology, built by libtpu with no TPU attached."""
    if importlib.util.find_spec("libtpu") is None:
        raise LibtpuMissing(f"compiling for {topology} needs libtpu: {LIBTPU_INSTALL}")
    # Several processes (pytest-xdist workers) compiling at once would otherwise fail on libtpu's
    # lockfile; this only shares the compiler, it never opens a chip.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    dims = topology.split(":", 1)[1].split("x")
    kwargs = {}
    if all(d == "1" for d in dims):  # one chip: the default host bounds (2x2x1) do not divide it
        kwargs["chips_per_host_bounds"] = (1, 1, 1)
    try:
        with libtpu_startup_filtered():
            return tuple(topologies.get_topology_desc(topology, "tpu", **kwargs).devices)
    except Exception as e:  # a layout libtpu cannot build ("v5e:3x3"): say so, with libtpu's reason
        raise TopologyError(f"libtpu cannot lay out the topology {topology}: {first_line(e)}") from None


def _named_arguments(estimate: HbmEstimate, program: Any) -> HbmEstimate:
    """Argument buffers under the names the test's program gave them (the compile saw ``xs[i]``)."""
    named = []
    for b in estimate.buffers:
        m = re.fullmatch(r"xs\[(\d+)\]", b.op) if b.kind.startswith("argument") else None
        if m:
            index = int(m[1]) - len(program.consts)
            name = program.arg_name(index) if index >= 0 else "a constant of the program"
            b = replace(b, op=name or b.op)
        named.append(b)
    return replace(estimate, buffers=tuple(named))


def compile_captured(program: Any, target: Target) -> HbmEstimate:
    """A program a test lowered (readings.capture.CapturedProgram), laid out on ``target`` as the
    test laid it out and compiled there. Raises retarget.NotRetargetable where it cannot be moved."""
    moved = retarget(program, topology_devices(target.topology), target.topology)
    with moved.context():
        estimate = compile_estimate(moved.jitted, moved.args, {}, target, moved.devices)
    return _named_arguments(estimate, program)
