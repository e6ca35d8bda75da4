"""The jitted programs a test runs, caught where jax lowers them, to be compiled again for a TPU target.

jax lowers every program it has to compile (a jit call that missed its cache, or an ahead-of-time
``.lower()``) in ``jax._src.pjit._resolve_and_lower``, which receives the traced program (a jaxpr)
and the abstract type and sharding of every argument: all a compile for another device needs.
While a :class:`ProgramCapture` is active that function is wrapped; each call is recorded and jax
goes on as before. Nothing is installed for tests that do not ask for a target. Programs already
in jit's cache never get there, so the caller clears jax's caches first.

The hook point is private to jax (see jaxcompat). Where it is missing, the capture raises
``jaxcompat.Unavailable`` instead of judging nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from . import devices as device_readings
from . import jaxcompat
from .frames import short_path

_OWN = contextvars.ContextVar("tpumem_own_lowering", default=False)


@dataclass(frozen=True)
class CapturedProgram:
    """One program as jax was about to lower it."""

    name: str
    jaxpr: Any  # the program without its constants' values: jax 0.10's open Jaxpr, or 0.11's Jaxpr
    consts: tuple[tuple[Any, Any], ...]  # (aval, sharding or None) of each constant, in order
    avals: tuple[Any, ...]  # per argument
    shardings: tuple[Any, ...]  # per argument: the jit's in_sharding where given, else a committed
    # argument's own; None where jax was free to place it
    out_shardings: tuple[Any, ...]
    donated: tuple[bool, ...]
    keep_unused: bool
    resident: int  # bytes of other arrays in use on the busiest device when it was lowered
    x64: bool  # jax_enable_x64 when it was traced; it is traced for the target under the same value
    ctx_mesh: Any = None  # the mesh in context (jax.set_mesh / use_mesh), if any
    traceback: Any = None  # the stack when it was lowered: the source of its operations that record none

    @property
    def eager(self) -> bool:
        """One primitive that jax ran outside of any jit (``jnp.ones(...)``, ``x + 1``), or a program
        with no operation at all (a conversion to the dtype it already has)."""
        eqns: Any = getattr(self.jaxpr, "eqns", ())
        return len(eqns) == 0 or (len(eqns) == 1 and eqns[0].primitive.name == self.name)

    @property
    def data_bytes(self) -> int:
        """Bytes of its arguments and results, at their full (unsharded) sizes on the run's devices."""
        outs = [v.aval for v in getattr(self.jaxpr, "outvars", ())]
        return sum(_nbytes(a) for a in (*self.avals, *outs))

    @property
    def source(self) -> str:
        """Where the traced function is defined ("test_model.py:12"), or "" for an operation jax ran eagerly."""
        import jax

        where = str(getattr(self._debug_info, "func_src_info", None) or "")
        _, _, path_line = where.rpartition(" at ")
        path, _, line = path_line.rpartition(":")
        if not path or os.path.dirname(jax.__file__) in path:
            return ""  # an operation jax ran eagerly: its own wrapper, not the user's line
        return f"{short_path(path)}:{line}"

    def arg_name(self, index: int) -> str:
        """The name jax gave argument ``index`` when it traced the program ("params['w']"), or ""."""
        names = getattr(self._debug_info, "arg_names", None) or ()
        return str(names[index]) if index < len(names) and names[index] else ""

    @property
    def _debug_info(self) -> Any:
        return jaxcompat.debug_info(self.jaxpr)


@contextlib.contextmanager
def own_lowering() -> Iterator[None]:
    """Lowerings inside are tpumem's own (compiles for a target) and are not recorded."""
    token = _OWN.set(True)
    try:
        yield
    finally:
        _OWN.reset(token)


def _specified(sharding: Any) -> bool:
    return hasattr(sharding, "device_set")


def _nbytes(aval: Any) -> int:
    try:
        return math.prod(aval.shape) * aval.dtype.itemsize
    except Exception:
        return 0


def _arg_bytes(avals: tuple[Any, ...], shardings: tuple[Any, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for aval, sharding in zip(avals, shardings):
        if not _specified(sharding) or not hasattr(aval, "shape"):
            continue
        try:
            n = device_readings.shard_bytes(aval.shape, aval.dtype, sharding)
            for dev in sharding.device_set:
                label = device_readings.device_label(dev)
                out[label] = out.get(label, 0) + n
        except Exception:
            continue
    return out


class ProgramCapture:
    """``with ProgramCapture() as cap: ...`` then ``cap.programs``: each distinct program lowered inside."""

    def __init__(self, devices: list[Any] | None = None, resident: bool = True) -> None:
        """Finds the hook point (jaxcompat.Unavailable where this jax has none); installs nothing
        yet. ``devices``: where the other arrays in use are read (default: every local device);
        ``resident=False`` reads none (the programs are wanted for their jaxprs alone)."""
        jaxcompat.lowering_available()
        # The hook's frame, and the compiles for a target, are tpumem's: never a program's source line.
        jaxcompat.exclude_from_source_lines(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.resident = resident
        self.devices = (device_readings.local_devices() if devices is None else list(devices)) if resident else []
        self.programs: list[CapturedProgram] = []
        self.errors: list[str] = []  # recordings that failed; reported, never raised into the test
        self._seen: set[Any] = set()
        self._undo: Any = None

    def __enter__(self) -> ProgramCapture:
        def record(lowering: jaxcompat.Lowering) -> None:
            if not _OWN.get():
                try:
                    self._record(lowering)
                except Exception as e:  # never break the user's program: it is reported at judgement
                    self.errors.append(f"a program could not be recorded: {type(e).__name__}: {e}")

        self._undo = jaxcompat.patch_lowering(record)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def _record(self, lowering: jaxcompat.Lowering) -> None:
        import jax

        if lowering.for_platforms:
            return  # lowered for named platforms (jax.export and the like): not a program this test runs here
        metas = lowering.args
        avals = tuple(m.aval for m in metas)
        shardings = tuple(
            s if _specified(s) else (m.sharding if getattr(m, "committed", True) else None)
            for s, m in zip(lowering.in_shardings, metas)
        )

        def spec(c: Any) -> tuple[Any, Any]:
            """A constant as its type and placement, so that recording it keeps no array alive (a
            closed-over array must be freed when the test drops it)."""
            committed = isinstance(c, jax.Array) and jaxcompat.committed(c)
            return (jax.typeof(c), c.sharding if committed else None)

        jaxpr, consts = jaxcompat.abstract_program(lowering.jaxpr, spec)
        name = lowering.name
        program = CapturedProgram(
            name=name,
            jaxpr=jaxpr,
            consts=consts,
            avals=avals,
            shardings=shardings,
            out_shardings=lowering.out_shardings,
            donated=lowering.donated,
            keep_unused=lowering.keep_unused,
            resident=0,
            x64=bool(jax.config.read("jax_enable_x64")),
            ctx_mesh=lowering.ctx_mesh,
            traceback=jaxcompat.current_traceback(),
        )
        # The same program lowered again (a leak check's next iteration, a loop over jit(lambda))
        # is recorded once; its structure, types and placements are what the target sees.
        key = (name, program.source, len(getattr(jaxpr, "eqns", ())), avals, shardings, consts, program.x64)
        if key in self._seen:
            return
        self._seen.add(key)
        if not self.resident:
            self.programs.append(program)
            return
        used = device_readings.read_used(self.devices)
        args = _arg_bytes(avals, tuple(m.sharding for m in metas))
        resident = max((n - args.get(label, 0) for label, n in used.items()), default=0)
        self.programs.append(replace(program, resident=max(resident, 0)))
