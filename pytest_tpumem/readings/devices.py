"""Device memory: the runtime's statistics (``memory_stats()``) and the bytes of live arrays per
device, which stand in for device memory where the backend has no statistics (CPU).

jax is imported lazily; nothing here runs before a measurement asks for it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from . import jaxcompat
from .host import host_peak_resettable, malloc_figures

# One reading at a time, in every thread. A walk of the live arrays holds a reference to each until
# it ends: an array the code dropped meanwhile stays alive (and its device memory in use) until then.
# Without this, a reading taken while the sampler thread walks counted arrays only the sampler still
# held (a test that holds one 5.2 MB array read 10.4 MB at its body's end, now and then, on a busy
# runner): every reading waits for the one in progress, whose references are gone when it returns.
_ONE_READING = threading.RLock()


@dataclass(frozen=True)
class DeviceMemory:
    """One reading of one addressable device.

    ``live_bytes`` is the sum of the addressable shards of ``jax.live_arrays()`` on the device.
    ``in_use``/``peak``/``limit`` come from ``Device.memory_stats()`` and are None where the
    backend does not report them (CPU always; -1 from PJRT plugins).
    """

    device: str
    live_bytes: int
    in_use: int | None = None
    peak: int | None = None
    limit: int | None = None
    largest_free: int | None = None  # largest_free_block_bytes: the allocator's largest free block (see pool)
    pool: int | None = None  # pool_bytes: what the allocator has taken from the device (BFC only); None elsewhere

    @property
    def used(self) -> int:
        """Bytes in use: the runtime's figure where it has one, else live arrays (the CPU stand-in)."""
        return self.in_use if self.in_use is not None else self.live_bytes


def local_devices() -> list[Any]:
    """The devices this process can read: every addressable device of the default backend.
    Starting the backend may load libtpu, whose start-up noise is kept off the terminal."""
    import jax

    if jaxcompat.backends_started():
        return list(jax.local_devices())
    with libtpu_startup_filtered():
        return list(jax.local_devices())


def device_label(device: Any) -> str:
    return f"{device.platform}:{device.id}"


def _stat(stats: dict[str, Any] | None, key: str) -> int | None:
    if not stats:
        return None
    value = stats.get(key)
    if value is None or value < 0:  # PJRT C API backends report -1 for fields they do not fill
        return None
    return int(value)


def memory_stats(device: Any) -> dict[str, Any] | None:
    try:
        return device.memory_stats()
    except Exception:  # a non-addressable device or a backend without stats
        return None


def shard_bytes(shape: Any, dtype: Any, sharding: Any) -> int:
    """Bytes of one shard of an array of ``shape`` and ``dtype`` laid out by ``sharding``."""
    return math.prod(sharding.shard_shape(shape)) * dtype.itemsize


def _layout(arr: Any) -> tuple[tuple[str, ...], int]:
    """The labels of the devices an array has a shard on, and the bytes of one shard."""
    sharding = arr.sharding
    try:
        n = shard_bytes(arr.shape, arr.dtype, sharding)
    except Exception:  # extended dtypes (PRNG keys)
        n = max((s.data.nbytes for s in arr.addressable_shards), default=0)
    return tuple(device_label(d) for d in sharding.addressable_devices), n


def _one_at_a_time(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def reading(*args: Any, **kwargs: Any) -> Any:
        with _ONE_READING:
            return fn(*args, **kwargs)

    return reading


Shards = tuple[tuple[str, int | None], ...]  # (device label, buffer address or None) per addressable shard
_Known = tuple[Any, Shards, int, str]  # an array LiveBytesKept saw: weak reference, shards, bytes a shard, owner


def _walk(arrays: Iterable[Any], visit: Callable[[Any], None] | None = None) -> Iterator[tuple[Any, Shards, int]]:
    """Each array of ``arrays`` with its shards and the bytes of one shard; an array deleted while
    we walk is left out. ``visit(array)`` is called for each array on the way. The arrays hold
    their shardings for the walk, so a layout is read once per sharding, shape and dtype."""
    layouts: dict[tuple[int, Any, Any], tuple[tuple[str, ...], int]] = {}
    for arr in arrays:
        if visit is not None:
            visit(arr)
        try:
            key = (id(arr.sharding), arr.shape, arr.dtype)
            layout = layouts.get(key)
            if layout is None:
                layout = layouts[key] = _layout(arr)
            shards = _addresses(arr, layout[0])
        except Exception:  # deleted while we walk
            continue
        yield arr, shards, layout[1]


@_one_at_a_time
def live_bytes_by_device(visit: Callable[[Any], None] | None = None) -> dict[str, int]:
    """Bytes of the addressable shards of every live array, per device label, each device buffer
    counted once: jaxlib up to 0.11 makes a second ``jax.Array`` on the buffer of an array a jit
    closes over, and ``jax.live_arrays()`` lists both. ``visit(array)`` is called for each array on
    the way (one walk serves both). About 0.5 us an array."""
    import jax

    out: dict[str, int] = {}
    counted: set[tuple[str, int]] = set()
    for _, shards, n in _walk(jax.live_arrays(), visit):
        for label, address in shards:
            if address is not None and n:
                if (label, address) in counted:
                    continue
                counted.add((label, address))
            out[label] = out.get(label, 0) + n
    return out


class LiveBytesKept:
    """``live_bytes_by_device`` for a reading taken again and again (between every two tests), kept
    up to date instead of summed afresh: each array's layout and buffer addresses are read once,
    when it is first seen, and its bytes added to running totals; they are taken off when it leaves
    ``jax.live_arrays()`` (deleted, donated) or dies (a weak reference's callback: a freed array's id
    may be reused by the next one). A reading costs a set difference of ids and the work of the
    arrays that came and went (benchmarks/README.md (k), (l)).

    Each array also keeps the ``owner`` of the reading that first saw it (the suite ledger's test
    or fixture that made it), and ``owned`` holds the bytes alive per owner after each reading. A
    device buffer two jax.Arrays share is counted once, for the owner of the first."""

    def __init__(self) -> None:
        self._known: dict[int, _Known] = {}
        self._dead: list[int] = []  # ids of known arrays that died since the last reading
        self._buffers: dict[tuple[str, int], list[Any]] = {}  # (label, address) -> [arrays on it, owner, bytes]
        self._totals: dict[str, int] = {}
        self.owned: dict[str, int] = {}  # owner -> bytes of its arrays alive at the last reading
        self.owned_on: dict[str, dict[str, int]] = {}  # owner -> device label -> those bytes on that device

    def _entry(self, key: int, arr: Any, shards: Shards, n: int, owner: str) -> _Known:
        dead = self._dead

        def died(_: Any) -> None:
            dead.append(key)

        return weakref.ref(arr, died), shards, n, owner

    def _count(self, entry: _Known, sign: int) -> None:
        """Add (sign 1) or take off (-1) an array's bytes, each buffer once."""
        _, shards, n, owner = entry
        totals, owned, buffers = self._totals, self.owned, self._buffers
        for label, address in shards:
            if address is not None and n:
                shared = buffers.get((label, address))
                if shared is None:
                    if sign < 0:
                        continue
                    buffers[(label, address)] = shared = [0, owner, n]
                shared[0] += sign
                if (sign > 0 and shared[0] > 1) or (sign < 0 and shared[0] > 0):
                    continue  # a second jax.Array on a buffer already counted
                if shared[0] == 0:
                    del buffers[(label, address)]
                owner_of, size = shared[1], shared[2]
            else:
                owner_of, size = owner, n
            totals[label] = totals.get(label, 0) + sign * size
            owned[owner_of] = owned.get(owner_of, 0) + sign * size
            on = self.owned_on.setdefault(owner_of, {})
            on[label] = on.get(label, 0) + sign * size

    @_one_at_a_time
    def __call__(self, owner: str = "") -> dict[str, int]:
        import jax

        known = self._known
        while self._dead:  # died since the last reading: off before their ids can be taken again
            entry = known.pop(self._dead.pop(), None)
            if entry is not None:
                self._count(entry, -1)
        live = jax.live_arrays()  # held for the reading: no array in it dies meanwhile
        ids = set(map(id, live))
        if ids != known.keys():  # most readings: what a test made died with it, nothing else changed
            for key in known.keys() - ids:  # deleted or donated: alive, no longer an array's
                self._count(known.pop(key), -1)
            new = ids - known.keys()
            for arr, shards, n in _walk(a for a in live if id(a) in new) if new else ():
                entry = known[id(arr)] = self._entry(id(arr), arr, shards, n, owner)
                self._count(entry, 1)
        self.owned = {o: n for o, n in self.owned.items() if n}
        self.owned_on = {o: on for o, on in self.owned_on.items() if o in self.owned}
        return {label: n for label, n in self._totals.items() if n}

    def arrays_of(self, owner: str) -> list[Any]:
        """The arrays alive at the last reading that ``owner`` made (first seen at one of its
        readings): a second jax.Array on a buffer counted for another owner is that owner's."""
        out = []
        for ref, shards, _, made_by in self._known.values():
            if self._counted_for(shards, made_by) == owner:
                arr = ref()
                if arr is not None:
                    out.append(arr)
        return out

    def _counted_for(self, shards: Shards, made_by: str) -> str:
        """The owner an array's memory is counted for: the first array's on its buffer (jaxlib
        makes a second jax.Array on the buffer of an array a jit closes over), else its maker."""
        for label, address in shards:
            shared = self._buffers.get((label, address)) if address is not None else None
            if shared is not None:
                return str(shared[1])
        return made_by


def buffer_key(arr: Any) -> tuple[tuple[str, int], ...] | None:
    """The device buffers an array holds, as (device label, address) pairs: two arrays on the same
    buffers have the same key. None where an address cannot be read."""
    try:
        pairs = _addresses(arr, _layout(arr)[0])
    except Exception:
        return None
    if any(address is None for _, address in pairs):
        return None
    return pairs  # type: ignore[return-value]


def _addresses(arr: Any, labels: tuple[str, ...]) -> Shards:
    """(device label, buffer address or None) of each addressable shard of ``arr``, whose shards
    are on the devices ``labels``."""
    if len(labels) == 1:
        try:
            return ((labels[0], arr.unsafe_buffer_pointer()),)
        except Exception:
            return ((labels[0], None),)
    try:
        return tuple((device_label(s.device), s.data.unsafe_buffer_pointer()) for s in arr.addressable_shards)
    except Exception:
        return tuple((label, None) for label in labels)


@_one_at_a_time
def read_devices(
    devices: Iterable[Any] | None = None, visit: Callable[[Any], None] | None = None
) -> dict[str, DeviceMemory]:
    """Read every source for every addressable device (or the ones given); ``visit``: see live_bytes_by_device."""
    devices = local_devices() if devices is None else list(devices)
    live = live_bytes_by_device(visit)
    out = {}
    for dev in devices:
        label = device_label(dev)
        stats = memory_stats(dev)
        out[label] = DeviceMemory(
            device=label,
            live_bytes=live.get(label, 0),
            in_use=_stat(stats, "bytes_in_use"),
            peak=_stat(stats, "peak_bytes_in_use"),
            limit=_stat(stats, "bytes_limit"),
            largest_free=_stat(stats, "largest_free_block_bytes"),
            pool=_stat(stats, "pool_bytes"),
        )
    return out


@_one_at_a_time
def read_used(devices: Iterable[Any]) -> dict[str, int]:
    """Bytes in use per device, cheaply: runtime stats where present, else live arrays."""
    live: dict[str, int] | None = None
    out = {}
    for dev in devices:
        label = device_label(dev)
        in_use = _stat(memory_stats(dev), "bytes_in_use")
        if in_use is None:
            if live is None:
                live = live_bytes_by_device()
            in_use = live.get(label, 0)
        out[label] = in_use
    return out


@_one_at_a_time
def read_in_use_and_peaks(devices: Iterable[Any]) -> tuple[dict[str, int], dict[str, int]]:
    """The runtime's bytes in use and its high-water mark (peak_bytes_in_use since the process
    began), for the devices that report them (none on CPU): one memory_stats() call a device."""
    in_use: dict[str, int] = {}
    peaks: dict[str, int] = {}
    for dev in devices:
        stats = memory_stats(dev)
        label = device_label(dev)
        for out, key in ((in_use, "bytes_in_use"), (peaks, "peak_bytes_in_use")):
            value = _stat(stats, key)
            if value is not None:
                out[label] = value
    return in_use, peaks


def read_in_use(devices: Iterable[Any]) -> dict[str, int]:
    """The runtime's bytes in use, for the devices that report it (none on CPU): no live-array walk."""
    return read_in_use_and_peaks(devices)[0]


def memory_profile() -> bytes | None:
    """jax's device-memory profile now: gzipped pprof of every live array and executable, by the
    stack that made it (jax.profiler.device_memory_profile; temporaries are not in it). None where
    it cannot be taken."""
    try:
        import jax

        return bytes(jax.profiler.device_memory_profile())
    except Exception:
        return None


def reset_peak(device: Any) -> bool:
    """Reset the runtime high-water mark where the installed jax offers a way; False otherwise."""
    for name in ("reset_memory_stats", "clear_memory_stats"):
        fn = getattr(device, name, None)
        if callable(fn):
            try:
                fn()
                return True
            except Exception:
                return False
    return False


_DISTRIBUTIONS = ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda13-plugin")


def installed_versions() -> dict[str, str]:
    """Versions of jax and its backends as installed, read from package metadata (no import)."""
    out = {}
    for name in _DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def backend_summary(devices: list[Any] | None = None) -> dict[str, Any]:
    """What the summary says of the backend: its devices (default: every local device), which
    sources they offer, and the features this jax lacks. Starts the backend: call it only once
    the suite has configured jax."""
    import jax

    devices = local_devices() if devices is None else list(devices)
    stats = memory_stats(devices[0]) if devices else None
    limit = _stat(stats, "bytes_limit")
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [device_label(d) for d in devices],
        "device_kind": devices[0].device_kind if devices else "?",
        "memory_stats": stats is not None,
        "known_stats": [k for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit") if _stat(stats, k) is not None],
        "bytes_limit": limit,
        "host_peak_resettable": host_peak_resettable(),
        "host_malloc": malloc_figures() is not None,
        "unavailable": jaxcompat.unavailable(),
    }


# --- libtpu's start-up noise ---------------------------------------------------------------------

# Lines libtpu writes to stderr when it loads on a machine without a TPU (jax's backend start, or a
# compile for a TPU target): nothing is wrong, the CPU is used or the compile goes on.
_LIBTPU_NOISE = (
    r"could not determine TPU (accelerator type|worker hostnames)",
    r"^WARNING: Logging before InitGoogle\(\) is written to STDERR",
    r"^=== Source Location Trace: ===",
    r"^\S+/libtpu_init_utils\.cc:\d+\s*$",
)

# The filter runs in a process of its own, between the file descriptor 2 this process writes to
# and the real one: each line goes through as soon as it is written, and if this process dies
# inside the block (a fatal error while the backend starts), what it wrote last still gets out.
_FILTER = """
import re, sys
noise = [re.compile(p) for p in sys.argv[1:]]
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    if not any(p.search(line.decode(errors="replace")) for p in noise):
        out.write(line)
        out.flush()
"""


@contextlib.contextmanager
def libtpu_startup_filtered() -> Iterator[None]:
    """Around code that may load libtpu for the first time: what it writes to the process's stderr
    (file descriptor 2) passes through a filter process that drops libtpu's start-up noise and
    passes every other line on at once. Does nothing where libtpu is not installed, or where the
    filter cannot be started; harmless where libtpu has loaded already."""
    if importlib.util.find_spec("libtpu") is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen(
            [sys.executable, "-S", "-c", _FILTER, *_LIBTPU_NOISE], stdin=read_end, stdout=saved, close_fds=True
        )
    except OSError:
        for fd in (saved, read_end, write_end):
            os.close(fd)
        yield
        return
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # the pipe's last write end closes: the filter reads to the end and exits
        os.close(saved)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
