"""The arrays alive at one moment, to tell later which ones are new, and what each new one is: its
bytes (every device together), the devices it is on, its dtype and shape, and the user's line that
made it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from . import jaxcompat
from .devices import buffer_key, device_label, shard_bytes
from .frames import Frame, user_frame


class ArrayBirths:
    """For every live array, the run of a leak check in which it was first seen alive (0: the
    baseline). Weak references only, so nothing is kept alive, and an array made later is told
    apart even where it reuses a freed one's id. Fed by the live-array walk every reading does,
    the baseline's included."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, int]] = {}

    def visitor(self, run: int) -> Any:
        """A ``visit(array)`` for readings.devices.read_devices: arrays not seen before were made in ``run``."""
        seen = self._seen

        def visit(a: Any) -> None:
            known = seen.get(id(a))
            if known is None or known[0]() is not a:
                seen[id(a)] = (weakref.ref(a), run)

        return visit

    def made_since_baseline(self) -> list[tuple[Any, int]]:
        """The arrays alive now that were made after the baseline, with the run that made them; of
        two arrays on the same device buffers (jaxlib up to 0.11 makes a second one for an array a
        jit closes over), the first only."""
        import jax

        out = []
        buffers: set[Any] = set()
        for a in jax.live_arrays():
            known = self._seen.get(id(a))
            if known is not None and known[0]() is a and known[1] > 0:
                key = buffer_key(a)
                if key is not None:
                    if key in buffers:
                        continue
                    buffers.add(key)
                out.append((a, known[1]))
        return out


@dataclass(frozen=True)
class ArrayInfo:
    """One array as a leak report names it."""

    nbytes: int  # bytes of its addressable shards, all devices together
    devices: tuple[str, ...]
    shape: str  # "f32[4000000]"
    site: Frame | None  # the user's line that made it; None where none was recorded


_SHORT_DTYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "s32",
    "int64": "s64",
    "int8": "s8",
    "uint8": "u8",
    "uint32": "u32",
    "bool": "pred",
}


def shape_text(dtype: Any, shape: Any) -> str:
    """``f32[4000000]``: a jax or numpy array's type and shape as the reports write them."""
    name = str(dtype)
    return f"{_SHORT_DTYPES.get(name, name)}[{','.join(map(str, shape))}]"


def describe(array: Any) -> ArrayInfo | None:
    """What a leak report says of ``array``; None where it was deleted meanwhile."""
    try:
        sharding = array.sharding
        devices = tuple(sorted(device_label(d) for d in sharding.addressable_devices))
        try:
            nbytes = shard_bytes(array.shape, array.dtype, sharding) * len(devices)
        except Exception:  # extended dtypes (PRNG keys): shard by shard
            nbytes = sum(s.data.nbytes for s in array.addressable_shards)
        return ArrayInfo(
            nbytes, devices, shape_text(array.dtype, array.shape), user_frame(jaxcompat.recorded_traceback(array))
        )
    except Exception:
        return None
