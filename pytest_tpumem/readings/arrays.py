"""The arrays alive at one moment, to tell later which ones are new, and what each new one is: its
bytes per device, shape, dtype, placement and the user's line that made it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from .devices import device_label, shard_bytes
from .frames import Frame, user_frame


class ArraySnapshot:
    """Weak references to every live array of jax's default backend, taken now: holding them keeps
    nothing alive, and an array made later is told apart even where it reuses a freed one's id."""

    def __init__(self) -> None:
        import jax

        self._refs = {id(a): weakref.ref(a) for a in jax.live_arrays()}

    def new_arrays(self) -> list[Any]:
        """The arrays alive now that were not alive when the snapshot was taken."""
        import jax

        out = []
        for a in jax.live_arrays():
            ref = self._refs.get(id(a))
            if ref is None or ref() is not a:
                out.append(a)
        return out


@dataclass(frozen=True)
class ArrayInfo:
    """One array as a leak report names it."""

    nbytes: int  # bytes of its addressable shards, all devices together
    devices: tuple[str, ...]
    shape: str  # "f32[4000000]"
    site: Frame | None  # the user's line that made it; None where none was recorded


_SHORT_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "s32",
                 "int64": "s64", "int8": "s8", "uint8": "u8", "uint32": "u32", "bool": "pred"}


def describe(array: Any) -> ArrayInfo | None:
    """What a leak report says of ``array``; None where it was deleted meanwhile."""
    try:
        sharding = array.sharding
        devices = tuple(sorted(device_label(d) for d in sharding.addressable_devices))
        try:
            nbytes = shard_bytes(array.shape, array.dtype, sharding) * len(devices)
        except Exception:  # extended dtypes (PRNG keys): shard by shard
            nbytes = sum(s.data.nbytes for s in array.addressable_shards)
        dtype = str(array.dtype)
        shape = f"{_SHORT_DTYPES.get(dtype, dtype)}[{','.join(map(str, array.shape))}]"
        return ArrayInfo(nbytes, devices, shape, user_frame(array.traceback))
    except Exception:
        return None
