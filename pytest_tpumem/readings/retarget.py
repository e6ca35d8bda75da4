"""A captured program moved onto a TPU target's devices, ready to compile there.

The program keeps the layout the test gave it: device number k of the run (cpu:k) becomes device
k of the target topology, so a test sharded over a 4-device CPU mesh is laid out the same way on
v5e:2x2's 4 chips, and a single-device program lands on one chip. Every sharding the program
names is moved (its arguments, its outputs, and the ones inside it, such as
with_sharding_constraint). What cannot be moved raises NotRetargetable with the reason.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

from . import jaxcompat
from .capture import CapturedProgram
from .frames import user_frame


class NotRetargetable(ValueError):
    """The program cannot be laid out on the target; the message says why."""


class DeviceMap:
    """Maps the run's devices (and meshes and shardings over them) onto the target's devices."""

    def __init__(self, target_devices: tuple[Any, ...], topology: str, traceback: Any = None):
        self.target = target_devices
        self.topology = topology
        self.traceback = traceback  # the source of equations that record none (an eager operation's)
        self.used: set[int] = set()  # indices of target devices the program was laid out on
        self._abstract_device: Any = None

    def abstract_mesh(self, mesh: Any) -> Any:
        """A device-free mesh (shard_map, explicit sharding) that still says which kind of device it
        is for: the same axes, for the target's kind."""
        if self._abstract_device is None:
            self._abstract_device = jaxcompat.abstract_device(self.target)
        return jaxcompat.with_abstract_device(mesh, self._abstract_device)

    def device(self, d: Any) -> Any:
        index = d.id
        if index >= len(self.target):
            raise NotRetargetable(
                f"it uses {d.platform}:{d.id}, and {self.topology} has {len(self.target)} devices; "
                "pick a topology with at least as many devices as the test's mesh"
            )
        self.used.add(index)
        return self.target[index]

    def mesh(self, mesh: Any) -> Any:
        import numpy as np
        from jax.sharding import Mesh

        if getattr(mesh, "empty", False):  # no mesh in context: nothing to move
            return mesh
        devices = np.array([self.device(d) for d in mesh.devices.flat], dtype=object).reshape(mesh.devices.shape)
        axis_types = getattr(mesh, "axis_types", None)
        if axis_types is not None:
            return Mesh(devices, mesh.axis_names, axis_types=axis_types)
        return Mesh(devices, mesh.axis_names)

    def sharding(self, s: Any) -> Any:
        from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding

        if isinstance(s, NamedSharding):
            mesh = self.mesh(s.mesh) if isinstance(s.mesh, Mesh) else self.abstract_mesh(s.mesh)
            return s if mesh is s.mesh else NamedSharding(mesh, s.spec, memory_kind=s.memory_kind)
        if isinstance(s, SingleDeviceSharding):
            return SingleDeviceSharding(self.device(next(iter(s.device_set))), memory_kind=s.memory_kind)
        raise NotRetargetable(f"its {type(s).__name__} cannot be moved to another device kind")

    def placement(self, s: Any) -> Any:
        """A placement (an argument's or a result's) moved; None (jax's choice) stays None."""
        return self.sharding(s) if hasattr(s, "device_set") else None

    def value(self, v: Any) -> Any:
        """Any jaxpr parameter: shardings, meshes, devices and sub-programs are moved; the rest kept."""
        import jax
        from jax.sharding import Mesh

        if isinstance(v, jax.sharding.Sharding):
            return self.sharding(v)
        if isinstance(v, Mesh):
            return self.mesh(v)
        if jaxcompat.is_abstract_mesh(v):
            return self.abstract_mesh(v)
        if isinstance(v, jax.Device):
            return self.device(v)
        if isinstance(v, (tuple, list)):
            moved = [self.value(x) for x in v]
            return v if all(a is b for a, b in zip(moved, v)) else type(v)(moved)
        if hasattr(v, "eqns"):
            return self.jaxpr(v)
        return v

    def jaxpr(self, j: Any) -> Any:
        """The program with every sharding in its equations (and their sub-programs) moved."""
        inner = getattr(j, "jaxpr", j)
        if inner is not j:  # jax 0.10's ClosedJaxpr wraps a Jaxpr (0.11's Jaxpr is its own .jaxpr)
            moved = self.jaxpr(inner)
            return j if moved is inner else j.replace(jaxpr=moved)
        eqns, changed = [], False
        for eqn in j.eqns:
            params = {k: self.value(v) for k, v in eqn.params.items()}
            if any(params[k] is not eqn.params[k] for k in params):
                eqn, changed = eqn.replace(params=params), True
            ctx = self._context(eqn.ctx)
            if ctx is not eqn.ctx:
                eqn, changed = eqn.replace(ctx=ctx), True
            if self.traceback is not None and user_frame(jaxcompat.eqn_traceback(eqn)) is None:
                # An eager operation's equation was traced inside jax, once for every caller: its
                # source is where the test lowered it.
                eqn, changed = jaxcompat.with_traceback(eqn, self.traceback), True
            eqns.append(eqn)
        return j.replace(eqns=eqns) if changed else j

    def _context(self, ctx: Any) -> Any:
        """An equation's context names the abstract mesh it was traced under (shard_map bodies,
        explicit sharding); jax checks it against its operands' meshes, so it moves too."""
        mesh = jaxcompat.context_mesh(ctx)
        moved = self.abstract_mesh(mesh) if mesh is not None else None
        if moved is mesh:
            return ctx
        try:
            return jaxcompat.with_context_mesh(ctx, moved)
        except Exception as e:
            raise NotRetargetable(f"the mesh its operations were traced under cannot be moved ({e})") from None


def _placed(aval: Any, sharding: Any) -> Any:
    import jax

    if not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
        raise NotRetargetable(f"it takes a {type(aval).__name__} argument, which has no shape and dtype")
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding, weak_type=getattr(aval, "weak_type", False))


class Retargeted(NamedTuple):
    """``with context: jitted.lower(*args)`` lowers the program for the target's devices."""

    jitted: Callable[..., Any]
    args: list[Any]  # abstract: the program's constants first (the capture kept no array), then its arguments
    devices: int  # target devices the program is laid out on
    context: Callable[[], Any]  # a new context manager: the trace context the test had (x64, its mesh)


def retarget(program: CapturedProgram, target_devices: tuple[Any, ...], topology: str) -> Retargeted:
    """The program moved onto the target's devices."""
    import jax

    moved = DeviceMap(target_devices, topology, program.traceback)
    jaxpr = moved.jaxpr(program.jaxpr)
    inputs = [*program.consts, *zip(program.avals, program.shardings)]
    args = [_placed(aval, moved.placement(s)) for aval, s in inputs]
    outs = [moved.placement(s) for s in program.out_shardings]
    mesh = program.ctx_mesh
    concrete = _target_mesh(moved, mesh) if mesh is not None and not getattr(mesh, "empty", True) else None
    if not moved.used:  # nothing names a device: the program runs on one, as jax would place it
        moved.used.add(0)
        one = jax.sharding.SingleDeviceSharding(target_devices[0])
        args = [_placed(a, one) for a in args]
    n_consts = len(program.consts)

    def run(*xs: Any) -> Any:  # traced as xs[i]; tpu._named_arguments gives the names back
        results = jaxcompat.eval_jaxpr(jaxpr, list(xs[:n_consts]), *xs[n_consts:])
        return [
            jax.lax.with_sharding_constraint(r, s) if s is not None else r
            for r, s in zip(results, outs + [None] * len(results))
        ]

    run.__name__ = run.__qualname__ = program.name  # the compiled program (and its buffers) keep the test's name
    donate = tuple(n_consts + i for i, d in enumerate(program.donated) if d)
    jitted = jax.jit(run, donate_argnums=donate, keep_unused=program.keep_unused)

    @contextlib.contextmanager
    def context() -> Any:
        with jax.enable_x64(program.x64):
            if concrete is None:
                yield
            else:
                with (getattr(jax, "set_mesh", None) or jax.sharding.use_mesh)(concrete):  # type: ignore[attr-defined]
                    yield

    return Retargeted(jitted, args, max(len(moved.used), 1), context)


def _target_mesh(moved: DeviceMap, mesh: Any) -> Any:
    """A mesh of the target's devices shaped as the test's context mesh (jax.set_mesh) was."""
    import numpy as np
    from jax.sharding import Mesh

    sizes = tuple(mesh.axis_sizes) if hasattr(mesh, "axis_sizes") else tuple(mesh.devices.shape)
    if math.prod(sizes) > len(moved.target):
        raise NotRetargetable(f"its mesh has {math.prod(sizes)} devices, and {moved.topology} has {len(moved.target)}")
    devices = np.array(moved.target[: math.prod(sizes)], dtype=object).reshape(sizes)
    moved.used.update(range(math.prod(sizes)))
    return Mesh(devices, tuple(mesh.axis_names), axis_types=tuple(mesh.axis_types))
