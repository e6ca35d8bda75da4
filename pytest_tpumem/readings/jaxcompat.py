"""Every private jax API the plugin uses, in one place, with one availability check per feature.

jax moves its internals between releases. Each feature below names what it needs; where the
installed jax lacks it, :func:`unavailable` says so (the summary prints it: "tpumem: compiled
programs unavailable on this jax: ...") and the code that would use it reports the gap in its
result instead of dropping it silently. Checked on jax 0.10.2 and 0.11.2.

Nothing here starts a backend, and nothing imports jax at import time: each function imports
what it uses when called. :func:`backends_started` and :func:`distributed_process` import nothing
where jax is not imported already; :func:`unavailable` imports jax (readings.devices.backend_summary
calls it once the backend is read, after the suite configured jax).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

COMPILED_PROGRAMS = "compiled programs"  # Client.live_executables(): programs compiled during a test
PROGRAM_CAPTURE = "program capture"  # jax._src.pjit._resolve_and_lower: what a TPU-target test lowers
RETARGETING = "retargeting"  # jax._src.core.eval_jaxpr, AbstractMesh.update: a captured program on TPU devices
BACKEND_STATE = "backend state"  # jax._src.xla_bridge.backends_are_initialized: read devices only once started
# jax._src.source_info_util: a program tpumem compiles names the user's lines, not tpumem's
SOURCE_LINES = "source lines"
PROGRAM_RUNS = "program runs"  # pjit's fast-path data, ExecuteReplicated.__call__, device_put's impl: each run read (readings.executions)
# jax._src.util._caches and jaxlib's weak-keyed cache types: which programs jax alone holds (clear_value_caches)
VALUE_CACHES = "value-keyed caches"
FEATURES = (COMPILED_PROGRAMS, PROGRAM_CAPTURE, RETARGETING, BACKEND_STATE, SOURCE_LINES, PROGRAM_RUNS, VALUE_CACHES)


class Unavailable(RuntimeError):
    """A feature this jax lacks; the message names it and the missing API."""


def _missing(feature: str) -> str | None:
    """Why ``feature`` cannot be used on the installed jax, or None where it can."""
    import jax

    try:
        if feature == COMPILED_PROGRAMS:
            from jax._src.lib import _jax

            ok = callable(getattr(getattr(_jax, "Client", None), "live_executables", None))
            need = "jaxlib's Client.live_executables()"
        elif feature == PROGRAM_CAPTURE:
            from jax._src import pjit

            ok = callable(getattr(pjit, "_resolve_and_lower", None))
            need = "jax._src.pjit._resolve_and_lower"
        elif feature == RETARGETING:
            from jax._src import core, mesh

            ok = callable(getattr(core, "eval_jaxpr", None)) and hasattr(getattr(mesh, "AbstractMesh", None), "update")
            need = "jax._src.core.eval_jaxpr and AbstractMesh.update"
        elif feature == BACKEND_STATE:
            from jax._src import xla_bridge

            ok = callable(getattr(xla_bridge, "backends_are_initialized", None))
            need = "jax._src.xla_bridge.backends_are_initialized"
        elif feature == SOURCE_LINES:
            from jax._src import source_info_util

            ok = all(callable(getattr(source_info_util, f, None)) for f in ("register_exclusion", "current"))
            need = "jax._src.source_info_util.register_exclusion and current"
        elif feature == PROGRAM_RUNS:
            from jax._src import dispatch, pjit
            from jax._src.interpreters import pxla
            from jax._src.lib import _jax

            ok = (
                callable(getattr(pjit, "_get_fastpath_data", None))
                and "__call__"
                in vars(getattr(pxla, "ExecuteReplicated", object))  # the class's own, patched by the watch
                and callable(getattr(dispatch, "_batched_device_put_impl", None))
                and callable(getattr(getattr(_jax, "PjitFunctionCache", None), "clear_all", None))
            )
            need = (
                "jax._src.pjit._get_fastpath_data, pxla.ExecuteReplicated, dispatch._batched_device_put_impl "
                "and PjitFunctionCache.clear_all"
            )
        elif feature == VALUE_CACHES:
            from jax._src import util

            ok = isinstance(getattr(util, "_caches", None), dict | weakref.WeakKeyDictionary) and bool(
                _weak_cache_types()
            )
            need = "jax._src.util._caches and jaxlib's WeakrefLRUCache"
        else:
            raise ValueError(feature)
    except ImportError as e:
        return f"jax {jax.__version__}: {e}"
    return None if ok else f"jax {jax.__version__} has no {need}"


def unavailable() -> dict[str, str]:
    """The features the installed jax lacks, with the reason; {} where every one is there."""
    out = {}
    for feature in FEATURES:
        reason = _missing(feature)
        if reason is not None:
            out[feature] = reason
    return out


# --- backend state -------------------------------------------------------------------------------


def backends_started() -> bool:
    """Whether jax's backend is up already, found without importing jax or starting a backend.
    False where jax is not imported, and where this jax cannot tell (never start it to find out)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:
        return False


def gpu_plugin_options(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """What jaxlib's own GPU option builder makes of the ``XLA_*`` variables in ``environ``: the
    options the CUDA and ROCm plugins pass to XLA when the backend starts (jaxlib/xla_client.py,
    ``generate_pjrt_gpu_plugin_options``, called by ``jax_plugins/cuda/__init__.py: initialize``).
    Raises its ValueError (both fraction variables set, a fraction that is not a number, an unknown
    allocator), which jax itself only logs (``xla_bridge.discover_pjrt_plugins`` catches every
    exception of ``initialize()``) before running without the GPU. None where this jaxlib has no
    builder. Imports jaxlib.xla_client, not jax: no backend starts; ``os.environ`` is as it was."""
    try:
        from jaxlib import xla_client
    except Exception:
        return None
    build = getattr(xla_client, "generate_pjrt_gpu_plugin_options", None)
    if build is None:
        return None
    # The builder reads os.environ (os.getenv, at each call): it sees environ's XLA_* variables only.
    saved = {n: v for n, v in os.environ.items() if n.startswith("XLA_")}
    try:
        for name in saved:
            del os.environ[name]
        os.environ.update({n: v for n, v in environ.items() if n.startswith("XLA_")})
        return dict(build())
    finally:
        for name in [n for n in os.environ if n.startswith("XLA_")]:
            del os.environ[name]
        os.environ.update(saved)


def distributed_process() -> tuple[int, int] | None:
    """(process id, process count) where jax.distributed.initialize was called, read from jax's
    distributed state without starting a backend; None where it was not (or this jax cannot tell)."""
    if "jax" not in sys.modules:
        return None
    try:
        from jax._src.distributed import global_state

        if global_state.client is None or global_state.num_processes is None:
            return None
        return int(global_state.process_id), int(global_state.num_processes)
    except Exception:
        return None


# --- patching ------------------------------------------------------------------------------------


def patch(owner: Any, name: str, replacement: Callable[..., Any]) -> Callable[[], None]:
    """Put ``replacement`` (made to look like the original with functools.wraps) in place of
    ``owner.name``; returns the function that puts the original back. It does so only where ours
    is still in place (as chex restores its patches): a wrapper someone installed over ours since
    is left alone, and ours, inside it, then passes every call through to the original."""
    original = getattr(owner, name)
    ours = functools.wraps(original)(replacement)
    setattr(owner, name, ours)

    def restore() -> None:
        if getattr(owner, name) is ours:
            setattr(owner, name, original)

    return restore


# --- compiled programs ---------------------------------------------------------------------------


def live_executables(client: Any) -> list[Any] | None:
    """The executables the backend client holds, or None where this jax cannot list them."""
    fn = getattr(client, "live_executables", None)
    if fn is None:
        return None
    try:
        return list(fn())
    except Exception:
        return None


def _weak_cache_types() -> tuple[type, ...]:
    """jaxlib's cache types keyed by a weak reference to their first argument (a function, a jaxpr)."""
    try:
        from jaxlib import weakref_lru_cache as lib
    except ImportError:
        return ()
    return tuple(
        t for t in (getattr(lib, n, None) for n in ("WeakrefLRUCache", "MultiWeakrefLRUCache")) if isinstance(t, type)
    )


def clear_value_caches() -> None:
    """Empty jax's caches keyed by values alone (``util.cache``: the programs of eager operations
    and control flow, keyed by their jaxpr and parameters, at most 4096 a cache), leaving the ones
    keyed by a weak reference to a function or jaxpr the code may still hold, and jit's own. What
    dies then was held by jax alone, in caches it bounds itself. Unavailable where this jax lacks them."""
    reason = _missing(VALUE_CACHES)
    if reason is not None:
        raise Unavailable(f"{VALUE_CACHES} unavailable: {reason}")
    from jax._src import util

    weak = _weak_cache_types()
    for cache in list(util._caches.keys()):
        if not isinstance(cache, weak) and callable(getattr(cache, "cache_clear", None)):
            cache.cache_clear()


# --- program runs --------------------------------------------------------------------------------


def patch_program_runs(
    executing: Callable[[Callable[..., Any]], Callable[..., Any]],
    transferring: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Callable[[], None]:
    """Every program run (``ExecuteReplicated.__call__``) goes through ``executing(original)``,
    every transfer (device_put's implementation) through ``transferring(original)``, and jit's
    C++ fast path is off, so that a call cached in C++ reaches Python too. Returns the function
    that undoes it. Unavailable where this jax lacks one of them."""
    reason = _missing(PROGRAM_RUNS)
    if reason is not None:
        raise Unavailable(f"{PROGRAM_RUNS} unavailable: {reason}")
    from jax._src import dispatch, pjit
    from jax._src.interpreters import pxla
    from jax._src.lib import _jax

    def clear() -> None:
        """Empty jax's C++ dispatch caches (compiled programs stay in its Python caches)."""
        for cache in (
            getattr(pjit, "_cpp_pjit_cache_fun_only", None),
            getattr(pjit, "_cpp_pjit_cache_explicit_attributes", None),
        ):
            if cache is not None:
                cache.clear()
        _jax.PjitFunctionCache.clear_all()

    restores = [
        patch(pjit, "_get_fastpath_data", lambda *args, **kwargs: None),
        patch(pxla.ExecuteReplicated, "__call__", executing(pxla.ExecuteReplicated.__call__)),
        patch(dispatch, "_batched_device_put_impl", transferring(dispatch._batched_device_put_impl)),
    ]
    clear()  # calls cached in C++ before now reach Python again

    def undo() -> None:
        for restore in reversed(restores):
            restore()
        clear()  # the calls made meanwhile were kept on the slow path: cached in C++ anew from the next call

    return undo


# --- program capture -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Lowering:
    """What jax's lowering entry (``pjit._resolve_and_lower``) was given, read by its parameters' names."""

    name: str
    args: tuple[Any, ...]  # per argument, its metadata: ``.aval`` and ``.sharding`` (``.committed`` where jax has it)
    in_shardings: tuple[Any, ...]  # per argument: the jit's in_sharding, or None
    out_shardings: tuple[Any, ...]
    donated: tuple[bool, ...]
    keep_unused: bool
    jaxpr: Any  # the traced program: jax 0.10's ClosedJaxpr, or 0.11's Jaxpr that carries its consts
    ctx_mesh: Any  # the mesh in context, or None
    for_platforms: bool  # lowered for named platforms (jax.export and the like), not to run here


def lowering_available() -> None:
    """Unavailable where this jax has no lowering entry to catch programs at."""
    reason = _missing(PROGRAM_CAPTURE)
    if reason is not None:
        raise Unavailable(
            f"{PROGRAM_CAPTURE} unavailable: {reason}, where tpumem catches the programs a test runs; "
            "judge them with the hbm_estimate fixture instead"
        )


def patch_lowering(record: Callable[[Lowering], None]) -> Callable[[], None]:
    """Calls ``record`` with every program jax lowers (before it lowers it) and returns the function
    that undoes it; Unavailable where this jax has no lowering entry. ``record`` must not raise."""
    lowering_available()
    from jax._src import pjit

    original = pjit._resolve_and_lower
    signature = inspect.signature(original)

    def recording(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs).arguments
        metas = tuple(bound["args"])
        record(
            Lowering(
                name=str(bound.get("name") or "program"),
                args=metas,
                in_shardings=tuple(bound.get("in_shardings") or (None,) * len(metas)),
                out_shardings=tuple(bound.get("out_shardings") or ()),
                donated=tuple(bool(d) for d in bound.get("donated_invars") or (False,) * len(metas)),
                keep_unused=bool(bound.get("keep_unused", False)),
                jaxpr=bound["jaxpr"],
                ctx_mesh=bound.get("ctx_mesh"),
                for_platforms=bool(bound.get("lowering_platforms")),
            )
        )
        return original(*args, **kwargs)

    return patch(pjit, "_resolve_and_lower", recording)


def abstract_program(jaxpr: Any, spec: Callable[[Any], Any]) -> tuple[Any, tuple[Any, ...]]:
    """The program without its constants' values, and ``spec(c)`` of each constant: jax 0.10's open
    Jaxpr inside the ClosedJaxpr (it holds no values), or 0.11's Jaxpr with a ShapeDtypeStruct in
    place of each constant (their count is its number of constvars)."""
    import jax

    consts = list(getattr(jaxpr, "consts", ()))
    specs = tuple(spec(c) for c in consts)
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    if inner is not jaxpr:
        return inner, specs
    avals = [jax.typeof(c) for c in consts]
    placeholders = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    return jaxpr.replace(consts=placeholders), specs


def debug_info(jaxpr: Any) -> Any:
    """The traced function's debug info (``func_src_info``, ``arg_names``), or None."""
    return getattr(getattr(jaxpr, "jaxpr", jaxpr), "debug_info", None)


def recorded_traceback(made: Any) -> Any:
    """The stack jax recorded when it made an array or compiled an executable (their
    ``traceback``), or None where it recorded none."""
    try:
        return made.traceback
    except Exception:
        return None


def committed(array: Any) -> bool:
    """Whether an array was placed on its device by the user (jax may not move it)."""
    return bool(getattr(array, "_committed", True))


# --- source lines --------------------------------------------------------------------------------


def exclude_from_source_lines(path: str) -> None:
    """jax names the innermost frame of a program's stack that is not its own as the program's
    source line; tpumem's frames (its lowering hook, its compiles for a target) are not the user's
    either. Once per path; a no-op where this jax cannot."""
    if _missing(SOURCE_LINES) is not None:
        return
    from jax._src import source_info_util

    path = path.rstrip(os.sep) + os.sep  # the package, not a sibling whose name starts the same
    if path not in getattr(source_info_util, "_exclude_paths", ()):
        source_info_util.register_exclusion(path)


def current_traceback() -> Any:
    """The stack jax would record for an operation made now (the user's call, while a test runs); None where unavailable."""
    if _missing(SOURCE_LINES) is not None:
        return None
    from jax._src import source_info_util

    return source_info_util.current().traceback


def eqn_traceback(eqn: Any) -> Any:
    return getattr(getattr(eqn, "source_info", None), "traceback", None)


def lowered_line_file(path: str) -> bool:
    """Whether jax writes a frame of ``path`` as an operation's line when it lowers it: mlir's
    source_info_to_location takes source_info_util.user_frame, the innermost frame that
    source_info_util.is_user_filename keeps (not jax's own; a library's, flax's, is kept)."""
    if _missing(SOURCE_LINES) is not None:
        return False
    from jax._src import source_info_util

    return bool(source_info_util.is_user_filename(path))


def with_traceback(eqn: Any, traceback: Any) -> Any:
    """An equation with ``traceback`` as its source."""
    if traceback is None:
        return eqn
    return eqn.replace(source_info=eqn.source_info.replace(traceback=traceback))


# --- retargeting ---------------------------------------------------------------------------------


def eval_jaxpr(jaxpr: Any, consts: list[Any], *args: Any) -> Any:
    reason = _missing(RETARGETING)
    if reason is not None:
        raise Unavailable(f"{RETARGETING} unavailable: {reason}")
    from jax._src.core import eval_jaxpr as run

    return run(jaxpr, consts, *args)


def is_abstract_mesh(value: Any) -> bool:
    return type(value).__name__ == "AbstractMesh"


def abstract_device(devices: tuple[Any, ...]) -> Any:
    """The abstract device (kind, platform) of ``devices``, as a device-free mesh names it."""
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(devices[:1]), ("_",)).abstract_mesh.abstract_device


def with_abstract_device(mesh: Any, device: Any) -> Any:
    """A device-free mesh with the same axes for another kind of device."""
    if getattr(mesh, "empty", False) or not hasattr(mesh, "update"):
        return mesh
    if getattr(mesh, "abstract_device", None) == device:
        return mesh
    return mesh.update(abstract_device=device)


def context_mesh(ctx: Any) -> Any:
    """The abstract mesh an equation was traced under (shard_map bodies, explicit sharding), or None."""
    return getattr(ctx, "cur_abstract_mesh", None)


def with_context_mesh(ctx: Any, mesh: Any) -> Any:
    """An equation's context with another abstract mesh: a context jax makes itself, under ``ctx``'s
    settings with the mesh swapped. jax interns contexts (one object per set of values, shared by
    every equation traced under them), so one is never copied or changed in place: a changed copy
    of the interned default would give every later equation of the process the target's mesh."""
    from jax._src import config, core
    from jax._src import mesh as mesh_lib

    # The state jax reads the current abstract mesh from: in jax._src.config up to 0.11, in
    # jax._src.mesh from 0.12.
    state = getattr(config, "abstract_mesh_context_manager", None) or mesh_lib.abstract_mesh_context_manager  # type: ignore[attr-defined]
    with ctx.manager:
        previous = state.swap_local(mesh)
        try:
            return core.JaxprEqnContext()
        finally:
            state.set_local(previous)
