"""Every program jax runs, and every transfer it makes, while a watch is on: each read with the bytes
in use on its devices when it happened. These are the moments a peak is made of, and they do not
depend on timing: the same code gives the same readings on every run.

On a device, memory rises only when something is allocated: a program's outputs and temporaries,
or an array put there. So the peak is found at one of those moments: when a program starts, the
bytes in use (its arguments among them, whether made before the test or inside it) plus what XLA
says it needs beyond its arguments; after a transfer, the bytes in use with the new array.

jax runs a program from Python only the first time; later calls go through its C++ fast path,
which nothing in Python sees. While a watch is on, the fast path is kept off: jax is told that no
call may be cached in C++ (``pjit._get_fastpath_data`` answers None), and the C++ dispatch caches
are emptied when the first watch starts and when the last one ends (the entries made meanwhile
would stay on the slow path). Every call then reaches ``ExecuteReplicated.__call__`` in Python.
Nothing is compiled again: compiled programs stay in jax's Python caches. A call costs about
40-70 us more while a watch is on, and nothing once it is off.

Not seen: a program compiled ahead of time (``jit(f).lower(x).compile()``) and called again from
its own C++ path, and pmap's. The sampler (measuring/peak.py) still sees what they leave alive.

Reading the bytes in use walks the live arrays (CPU) and costs about 0.75 us an array, so a reading
is taken only once the programs and transfers since the last one could add at least ``floor``
bytes: a peak is then never more than ``floor`` below the exact one, and still the same every run.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import devices as device_readings
from . import jaxcompat
from .programs import program_name


@dataclass(frozen=True)
class Need:
    """What XLA says one compiled program needs per device, as its memory analysis gives it."""

    name: str
    devices: tuple[str, ...]
    peak: int  # per device; on CPU arguments + outputs + temporaries - aliased (XLA's CPU peak leaves temporaries out)
    arguments: int
    outputs: int
    temps: int

    @property
    def beyond_arguments(self) -> int:
        return max(0, self.peak - self.arguments)


def need_of(executable: Any, name: str = "") -> Need | None:
    """XLA's memory analysis of a loaded executable; None where it cannot be read. ``name``: the
    program's name where the caller knows it (else read from its HLO module, which costs more)."""
    try:
        stats = executable.get_compiled_memory_stats()
        peak = int(getattr(stats, "peak_memory_in_bytes", 0) or 0)
        args = int(stats.argument_size_in_bytes)
        outputs = int(stats.output_size_in_bytes)
        temps = int(stats.temp_size_in_bytes)
        alias = int(getattr(stats, "alias_size_in_bytes", 0) or 0)
        if peak <= 0 or executable.client.platform == "cpu":
            peak = max(peak, args + outputs + temps - alias)
        if not name:
            name = program_name(executable)
        devices = tuple(device_readings.device_label(d) for d in executable.local_devices())
    except Exception:
        return None
    return Need(name, devices, peak, args, outputs, temps)


@dataclass(frozen=True)
class Moment:
    """The highest reading on one device: what it was, and what made it."""

    bytes: int
    what: str  # "program jit_step", "transfer"


class ExecutionWatch:
    """``with ExecutionWatch(devices) as w: ...`` then ``w.highest``: per device the highest of the
    moments above (a Moment), ``w.executables``: every program run meanwhile, once each, and
    ``w.needs``: what XLA says each needs (where it could be read)."""

    def __init__(self, devices: list[Any], floor: int = 2**20):
        self.devices = list(devices)
        self.labels = {device_readings.device_label(d) for d in self.devices}
        self.floor = floor
        self.highest: dict[str, Moment] = {}
        self.executables: dict[int, Any] = {}  # id -> LoadedExecutable, held until the watch is dropped
        self.needs: dict[int, Need] = {}
        self._pending = floor  # the first moment is always read

    def __enter__(self) -> ExecutionWatch:
        _start(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stop(self)

    def _note(self, figures: dict[str, int], what: str) -> None:
        for label, n in figures.items():
            if label in self.labels and n > self.highest.get(label, Moment(-1, "")).bytes:
                self.highest[label] = Moment(n, what)

    def before_program(self, executable: Any, need: Need | None, arguments: int) -> None:
        """A program is about to run; ``arguments``: what its arguments add to the bytes in use (executions._arguments)."""
        if id(executable) not in self.executables:
            self.executables[id(executable)] = executable
            if need is not None:
                self.needs[id(executable)] = need
        beyond = (need.beyond_arguments if need is not None else 0) + arguments
        self._pending += max(beyond, 0)
        if self._pending < self.floor:
            return
        self._pending = 0
        used = device_readings.read_used(self.devices)
        where = need.devices if need is not None else tuple(used)
        self._note(
            {label: max(0, used.get(label, 0) + beyond) for label in where}, f"program {need.name if need else '?'}"
        )

    def after_transfer(self, nbytes: int) -> None:
        self._pending += nbytes
        if self._pending < self.floor:
            return
        self._pending = 0
        self._note(device_readings.read_used(self.devices), "transfer")


class ProgramsRan:
    """``with ProgramsRan() as ran: ...`` then ``ran.executables``: every program run meanwhile
    (id -> LoadedExecutable), held until it is dropped, and nothing read. It costs what any watch
    costs: jax's C++ fast path is off while it is on. Raises jaxcompat.Unavailable on entering
    where this jax cannot be watched."""

    def __init__(self) -> None:
        self.executables: dict[int, Any] = {}

    def __enter__(self) -> ProgramsRan:
        _start(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stop(self)

    def before_program(self, executable: Any, need: Need | None, arguments: int) -> None:
        self.executables.setdefault(id(executable), executable)

    def after_transfer(self, nbytes: int) -> None:
        pass


# --- the hooks, installed while at least one watch is on ----------------------------------------

_lock = threading.Lock()
_active: list[ExecutionWatch | ProgramsRan] = []
_undo: list[Callable[[], None]] = []  # while a watch is active: what puts jax's functions back
_needs: weakref.WeakKeyDictionary[Any, Need | None] = weakref.WeakKeyDictionary()


def _nbytes(x: Any) -> int:
    try:
        return int(x.nbytes)
    except Exception:
        return 0


def _arguments(args: tuple[Any, ...]) -> int:
    """What a program's arguments add to the bytes in use read before it runs: the numpy arrays it
    copies to the device (not in use yet), less its scalar arguments on the device (in use, but
    left out: the 4-byte fill value ``jnp.ones(n)`` passes would put a 20 MB array at 20,000,004
    bytes, and a budget of exactly 20MB over it)."""
    import jax

    out = 0
    for a in args:
        if getattr(a, "ndim", 0) == 0:
            out -= _nbytes(a) if isinstance(a, jax.Array) else 0
        elif not isinstance(a, jax.Array):
            out += _nbytes(a)
    return out


def _executing(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, *args: Any) -> Any:
        watches = list(_active)
        if watches:
            try:
                need = (
                    _needs[self]
                    if self in _needs
                    else _needs.setdefault(self, need_of(self.xla_executable, str(self.name)))
                )
                extra = _arguments(args)
                for w in watches:
                    w.before_program(self.xla_executable, need, extra)
            except Exception:
                pass  # a reading never breaks the user's program
        return original(self, *args)

    return __call__


def _transferring(original: Callable[..., Any]) -> Callable[..., Any]:
    def transfer(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        watches = list(_active)
        if watches:
            try:
                nbytes = sum(_nbytes(a) for a in out)
                for w in watches:
                    w.after_transfer(nbytes)
            except Exception:
                pass
        return out

    return transfer


def _start(watch: ExecutionWatch | ProgramsRan) -> None:
    with _lock:
        if not _active:
            _install()
        _active.append(watch)


def _stop(watch: ExecutionWatch | ProgramsRan) -> None:
    with _lock:
        if watch in _active:
            _active.remove(watch)
        if not _active and _undo:
            _uninstall()


def _install() -> None:
    _undo.append(jaxcompat.patch_program_runs(_executing, _transferring))


def _uninstall() -> None:
    _undo.pop()()
