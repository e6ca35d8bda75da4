"""A captured program moved onto a TPU target's devices, ready to compile there.

The program keeps the layout the test gave it: device number k of the run (cpu:k) becomes device
k of the target topology, so a test sharded over a 4-device CPU mesh is laid out the same way on
v5e:2x2's 4 chips, and a single-device program lands on one chip. Every sharding the program
names is moved (its arguments, its outputs, and the ones inside it, such as
with_sharding_constraint). What cannot be moved raises NotRetargetable with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

from .capture import CapturedProgram


class NotRetargetable(ValueError):
    """The program cannot be laid out on the target; the message says why."""


class DeviceMap:
    """Maps the run's devices (and meshes and shardings over them) onto the target's devices."""

    def __init__(self, target_devices: tuple[Any, ...], topology: str):
        self.target = target_devices
        self.topology = topology
        self.used: set[int] = set()  # indices of target devices the program was laid out on

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
            if not isinstance(s.mesh, Mesh):  # an AbstractMesh names no devices
                return s
            return NamedSharding(self.mesh(s.mesh), s.spec, memory_kind=s.memory_kind)
        if isinstance(s, SingleDeviceSharding):
            return SingleDeviceSharding(self.device(next(iter(s.device_set))), memory_kind=s.memory_kind)
        raise NotRetargetable(f"its {type(s).__name__} cannot be moved to another device kind")

    def value(self, v: Any) -> Any:
        """Any jaxpr parameter: shardings, meshes, devices and sub-programs are moved; the rest kept."""
        import jax
        from jax.sharding import Mesh

        if isinstance(v, jax.sharding.Sharding):
            return self.sharding(v)
        if isinstance(v, Mesh):
            return self.mesh(v)
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
            eqns.append(eqn)
        return j.replace(eqns=eqns) if changed else j


def retarget(program: CapturedProgram, target_devices: tuple[Any, ...], topology: str) -> tuple[Callable[..., Any], list[Any], int]:
    """``(jitted, abstract_args, devices_used)``: ``jitted.lower(*abstract_args)`` compiles the
    program for the target's devices."""
    import jax
    from jax.extend.core import jaxpr_as_fun

    moved = DeviceMap(target_devices, topology)
    args = []
    for aval, sharding in zip(program.avals, program.shardings):
        if not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
            raise NotRetargetable(f"it takes a {type(aval).__name__} argument, which has no shape and dtype")
        placed = moved.sharding(sharding) if hasattr(sharding, "device_set") else None
        args.append(jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=placed, weak_type=getattr(aval, "weak_type", False)))
    if all(a.sharding is None for a in args):
        moved.used.add(0)
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=jax.sharding.SingleDeviceSharding(target_devices[0]), weak_type=a.weak_type) for a in args]
    outs = [moved.sharding(s) if hasattr(s, "device_set") else None for s in program.out_shardings]
    body = jaxpr_as_fun(moved.jaxpr(program.jaxpr))

    def run(*xs: Any) -> Any:  # its arguments are traced as xs[i]; estimate._named_arguments renames them
        results = body(*xs)
        return [jax.lax.with_sharding_constraint(r, s) if s is not None else r for r, s in zip(results, outs + [None] * len(results))]

    run.__name__ = run.__qualname__ = program.name  # the compiled program (and its buffers) keep the test's name
    donate = tuple(i for i, d in enumerate(program.donated) if d)
    jitted = jax.jit(run, donate_argnums=donate, keep_unused=program.keep_unused)
    return jitted, args, max(len(moved.used), 1)
