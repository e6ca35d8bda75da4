"""Programs compiled during a measurement, and what XLA says each needs per device.

The backend client lists the executables it holds; the ones it holds after a measurement and not
before are the programs compiled during it. Listing them is private to jaxlib (see jaxcompat);
where this jax cannot, :func:`executable_ids` returns None and the measurement says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import jaxcompat
from .devices import device_label


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


def executable_ids(devices: list[Any]) -> set[int] | None:
    """Identities of the executables the client holds now; None where this jax cannot list them."""
    executables = jaxcompat.live_executables(_client(devices))
    return None if executables is None else {id(e) for e in executables}


def new_executables(devices: list[Any], before: set[int] | None) -> list[Any]:
    """The executables the backend client holds now that it did not hold in ``before``."""
    if before is None:
        return []
    return [e for e in jaxcompat.live_executables(_client(devices)) or [] if id(e) not in before]


def program_buffers(executables: list[Any]) -> tuple[Any, ...]:
    """What each program's optimized HLO materializes (readings.buffers.hlo_buffers), all programs together."""
    from .buffers import hlo_buffers

    out: list[Any] = []
    for exe in executables:
        try:
            for module in exe.hlo_modules():
                out.extend(hlo_buffers(module.to_string()))
        except Exception:
            continue
    return tuple(out)


def _name(exe: Any) -> str:
    """The program's name, as its HLO module is named ("jit_step"); "?" where it cannot be read."""
    names = [m.name for m in exe.hlo_modules()] if hasattr(exe, "hlo_modules") else []
    return names[0] if names else "?"


def new_programs(executables: list[Any]) -> list[CompiledProgram]:
    """What XLA says each of ``executables`` (new_executables()) needs per device."""
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
            name = _name(exe)
            devs = tuple(device_label(d) for d in exe.local_devices())
        except Exception:
            continue
        out.append(CompiledProgram(name, devs, peak, args, outputs, temps))
    return out


@dataclass(frozen=True)
class ProgramMade:
    """A program compiled during one run of a leak check: which, and the user's line that compiled it."""

    name: str  # "jit_step"
    site: Any  # frames.Frame, or None


def held_now(devices: list[Any]) -> list[Any] | None:
    """The executables the client holds now (strong references: while they are held, no new
    executable can take one of their ids); None where this jax cannot list them."""
    return jaxcompat.live_executables(_client(devices))


def compiled_since(devices: list[Any], before: list[Any] | None) -> list[ProgramMade]:
    """The programs the client holds now that were not in ``before`` (held_now() taken before the run)."""
    if before is None:
        return []
    from .frames import user_frame

    out = []
    for exe in new_executables(devices, {id(e) for e in before}):
        try:
            out.append(ProgramMade(_name(exe), user_frame(getattr(exe, "traceback", None))))
        except Exception:
            out.append(ProgramMade("?", None))
    return out


def held_by_site(devices: list[Any]) -> dict[Any, int]:
    """How many executables the client holds, by the user's line that compiled them (no HLO is
    read, but every executable's traceback is: about 10 us each)."""
    return count_by_site(jaxcompat.live_executables(_client(devices)) or [])


def count_by_site(executables: list[Any]) -> dict[Any, int]:
    """How many of ``executables`` each user's line compiled."""
    from .frames import user_frame

    out: dict[Any, int] = {}
    for exe in executables:
        try:
            site = user_frame(getattr(exe, "traceback", None))
        except Exception:
            site = None
        out[site] = out.get(site, 0) + 1
    return out
