"""Where the numbers come from: device statistics, live-array accounting, executables, host memory.

Everything here imports jax lazily, so importing this module costs nothing for suites that never
switch the plugin on.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable


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

    @property
    def used(self) -> int:
        """Bytes in use: the runtime's figure where it has one, else live arrays (the CPU stand-in)."""
        return self.in_use if self.in_use is not None else self.live_bytes


def local_devices() -> list[Any]:
    """The devices this process can read: every addressable device of the default backend."""
    import jax

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


def live_bytes_by_device() -> dict[str, int]:
    """Bytes of the addressable shards of every live array, per device label."""
    import jax

    out: dict[str, int] = {}
    for arr in jax.live_arrays():
        try:
            sharding = arr.sharding
            n = shard_bytes(arr.shape, arr.dtype, sharding)
            for dev in sharding.addressable_devices:
                label = device_label(dev)
                out[label] = out.get(label, 0) + n
        except Exception:
            # Extended dtypes (PRNG keys) or arrays deleted while we walk: count shard by shard.
            try:
                for shard in arr.addressable_shards:
                    label = device_label(shard.device)
                    out[label] = out.get(label, 0) + shard.data.nbytes
            except Exception:
                continue
    return out


def read_devices(devices: Iterable[Any] | None = None) -> dict[str, DeviceMemory]:
    """Read every source for every addressable device (or the ones given)."""
    devices = local_devices() if devices is None else list(devices)
    live = live_bytes_by_device()
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
        )
    return out


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


# --- executables -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompiledProgram:
    """A program compiled during a measurement and what XLA says it needs per device."""

    name: str
    devices: tuple[str, ...]
    peak: int
    arguments: int
    outputs: int
    temps: int

    @property
    def beyond_arguments(self) -> int:
        """Bytes the program needs on top of its arguments (which are already on the device)."""
        return max(0, self.peak - self.arguments)


def _client(devices: list[Any]) -> Any:
    return devices[0].client if devices else None


def executable_ids(devices: list[Any]) -> set[int]:
    client = _client(devices)
    if client is None:
        return set()
    try:
        return {id(e) for e in client.live_executables()}
    except Exception:
        return set()


def new_programs(devices: list[Any], before: set[int]) -> list[CompiledProgram]:
    """Programs the backend client holds now that it did not hold in ``before``."""
    client = _client(devices)
    if client is None:
        return []
    try:
        executables = [e for e in client.live_executables() if id(e) not in before]
    except Exception:
        return []
    out = []
    for exe in executables:
        try:
            stats = exe.get_compiled_memory_stats()
            peak = int(getattr(stats, "peak_memory_in_bytes", 0) or 0)
            args = int(stats.argument_size_in_bytes)
            outputs = int(stats.output_size_in_bytes)
            temps = int(stats.temp_size_in_bytes)
            alias = int(getattr(stats, "alias_size_in_bytes", 0) or 0)
            if peak <= 0 or exe.client.platform == "cpu":
                # XLA's CPU peak leaves temporaries out (it is arguments + outputs there): count them.
                peak = max(peak, args + outputs + temps - alias)
            names = [m.name for m in exe.hlo_modules()] if hasattr(exe, "hlo_modules") else []
            devs = tuple(device_label(d) for d in exe.local_devices())
        except Exception:
            continue
        out.append(CompiledProgram(names[0] if names else "?", devs, peak, args, outputs, temps))
    return out


# --- host -----------------------------------------------------------------------------------------


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def host_rss() -> int | None:
    """Resident set size of this process in bytes, or None where it cannot be read."""
    rss = _proc_status("VmRSS")
    if rss is not None:
        return rss
    try:
        import psutil  # optional, for platforms without /proc

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def reset_host_peak() -> bool:
    """Reset VmHWM (the host high-water mark) through /proc/self/clear_refs; False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def host_peak() -> int | None:
    """VmHWM in bytes: the host peak since the last reset (or process start)."""
    return _proc_status("VmHWM")


def trim_host() -> None:
    """Give freed heap back to the OS before RSS is read.

    Without malloc_trim, glibc keeps freed chunks of a large buffer in the heap and RSS moves by
    the buffer's size from one iteration to the next: noise as large as the allocation.
    """
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc


def backend_started() -> bool:
    """Whether jax's backend is up already (started by the suite, or by a measurement), found
    without importing jax or starting a backend: reading devices before the suite's modules have
    configured jax (``jax_num_cpu_devices``, ``XLA_FLAGS`` set at import) would change what they get."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge  # private; checked on jax 0.10.2 and 0.11.2

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # unknown on this jax: say nothing rather than start it
        return False


_DISTRIBUTIONS = ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda13-plugin")


def installed_versions() -> dict[str, str]:
    """Versions of jax and its backends as installed, read from package metadata (no import)."""
    from importlib import metadata

    out = {}
    for name in _DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def backend_summary() -> dict[str, Any]:
    """What the report header says: backend, devices, and which sources can be read."""
    import jax

    devices = local_devices()
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
        "host_peak_resettable": os.access("/proc/self/clear_refs", os.W_OK),
    }
