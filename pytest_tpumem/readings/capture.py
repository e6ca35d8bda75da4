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
import functools
import inspect
import math
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
        import os

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
        return getattr(getattr(self.jaxpr, "jaxpr", self.jaxpr), "debug_info", None)


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


def _abstract_consts(jaxpr: Any) -> tuple[Any, tuple[tuple[Any, Any], ...]]:
    """The program with its constants reduced to their types and placements, so that recording
    it keeps no array alive (a closed-over array must be freed when the test drops it)."""
    import jax

    consts = list(getattr(jaxpr, "consts", ()))
    specs = []
    for c in consts:
        committed = isinstance(c, jax.Array) and jaxcompat.committed(c)
        specs.append((jax.typeof(c), c.sharding if committed else None))
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    if inner is not jaxpr:  # jax 0.10: a ClosedJaxpr around an open Jaxpr that holds no values
        return inner, tuple(specs)
    # jax 0.11: the Jaxpr carries its consts (their count is its number of constvars): keep the count
    placeholders = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a, _ in specs]
    return jaxpr.replace(consts=placeholders), tuple(specs)


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

    def __init__(self, devices: list[Any] | None = None) -> None:
        """Finds the hook point (jaxcompat.Unavailable where this jax has none); installs nothing
        yet. ``devices``: where the other arrays in use are read (default: every local device)."""
        import os

        pjit, original = jaxcompat.lowering_entry()
        # The hook's frame, and the compiles for a target, are tpumem's: never a program's source line.
        jaxcompat.exclude_from_source_lines(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.devices = device_readings.local_devices() if devices is None else list(devices)
        self.programs: list[CapturedProgram] = []
        self.errors: list[str] = []  # recordings that failed; reported, never raised into the test
        self._seen: set[Any] = set()
        self._module, self._original = pjit, original
        self._signature = inspect.signature(original)
        self._installed = False

    def __enter__(self) -> ProgramCapture:
        original, signature, capture = self._original, self._signature, self

        @functools.wraps(original)  # a capture inside this one reads the lowering's signature through it
        def recording(*args: Any, **kwargs: Any) -> Any:
            if not _OWN.get():
                try:
                    capture._record(signature.bind(*args, **kwargs).arguments)
                except Exception as e:  # never break the user's program: it is reported at judgement
                    capture.errors.append(f"a program could not be recorded: {type(e).__name__}: {e}")
            return original(*args, **kwargs)

        jaxcompat.install_lowering(self._module, recording)
        self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            jaxcompat.install_lowering(self._module, self._original)
            self._installed = False

    def _record(self, bound: dict[str, Any]) -> None:
        import jax

        if bound.get("lowering_platforms"):
            return  # lowered for named platforms (jax.export and the like): not a program this test runs here
        metas = tuple(bound["args"])
        in_shardings = tuple(bound.get("in_shardings") or (None,) * len(metas))
        avals = tuple(m.aval for m in metas)
        shardings = tuple(
            s if _specified(s) else (m.sharding if getattr(m, "committed", True) else None)
            for s, m in zip(in_shardings, metas)
        )
        jaxpr, consts = _abstract_consts(bound["jaxpr"])
        name = str(bound.get("name") or "program")
        program = CapturedProgram(
            name=name,
            jaxpr=jaxpr,
            consts=consts,
            avals=avals,
            shardings=shardings,
            out_shardings=tuple(bound.get("out_shardings") or ()),
            donated=tuple(bool(d) for d in bound.get("donated_invars") or (False,) * len(metas)),
            keep_unused=bool(bound.get("keep_unused", False)),
            resident=0,
            x64=bool(jax.config.read("jax_enable_x64")),
            ctx_mesh=bound.get("ctx_mesh"),
            traceback=jaxcompat.current_traceback(),
        )
        # The same program lowered again (a leak check's next iteration, a loop over jit(lambda))
        # is recorded once; its structure, types and placements are what the target sees.
        key = (name, program.source, len(getattr(jaxpr, "eqns", ())), avals, shardings, consts, program.x64)
        if key in self._seen:
            return
        self._seen.add(key)
        used = device_readings.read_used(self.devices)
        args = _arg_bytes(avals, tuple(m.sharding for m in metas))
        resident = max((n - args.get(label, 0) for label, n in used.items()), default=0)
        self.programs.append(replace(program, resident=max(resident, 0)))
