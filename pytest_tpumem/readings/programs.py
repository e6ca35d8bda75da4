"""The programs jax's backend client holds: the ones compiled during a leak check's runs and the
lines that compiled them, and what a program's optimized HLO materializes. Listing them is
private to jaxlib (see jaxcompat); where this jax cannot, the readings say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import jaxcompat
from .buffers import Buffer, hlo_buffers
from .frames import user_frame


def _client(devices: list[Any]) -> Any:
    return devices[0].client if devices else None


def program_buffers(executables: list[Any]) -> tuple[Buffer, ...]:
    """What each program's optimized HLO materializes (readings.buffers.hlo_buffers), all programs together."""
    out: list[Buffer] = []
    for exe in executables:
        try:
            for module in exe.hlo_modules():
                out.extend(replace(b, programs=(module.name,)) for b in hlo_buffers(module.to_string()))
        except Exception:
            continue
    return tuple(out)


def program_name(exe: Any) -> str:
    """The program's name, as its HLO module is named ("jit_step"); "?" where it cannot be read."""
    names = [m.name for m in exe.hlo_modules()] if hasattr(exe, "hlo_modules") else []
    return names[0] if names else "?"


@dataclass(frozen=True)
class ProgramMade:
    """A program a leak check's run ran or compiled: which, and the user's line that compiled it."""

    name: str  # "jit_step"
    site: Any  # frames.Frame, or None
    earlier: bool = False  # compiled before the check began (by an earlier test): the process had it cached
    key: int = field(default=0, compare=False)  # the executable's id, while it is alive


def held_now(devices: list[Any]) -> list[Any] | None:
    """The executables the client holds now (strong references: while they are held, no new
    executable can take one of their ids); None where this jax cannot list them."""
    return jaxcompat.live_executables(_client(devices))


def program_made(exe: Any, earlier: bool = False) -> ProgramMade:
    """Which program ``exe`` is, and the user's line that compiled it (its HLO module's name and
    its recorded traceback are read: call it for the few programs a report names)."""
    try:
        return ProgramMade(program_name(exe), user_frame(jaxcompat.recorded_traceback(exe)), earlier, id(exe))
    except Exception:
        return ProgramMade("?", None, earlier, id(exe))


def held_by_site(devices: list[Any]) -> dict[Any, int]:
    """How many executables the client holds, by the user's line that compiled them (no HLO is
    read, but every executable's traceback is: about 10 us each)."""
    return count_by_site(jaxcompat.live_executables(_client(devices)) or [])


def count_by_site(executables: list[Any]) -> dict[Any, int]:
    """How many of ``executables`` each user's line compiled."""
    out: dict[Any, int] = {}
    for exe in executables:
        try:
            site = user_frame(jaxcompat.recorded_traceback(exe))
        except Exception:
            site = None
        out[site] = out.get(site, 0) + 1
    return out
