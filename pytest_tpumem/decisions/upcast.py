"""What the widenings of a test's programs cost, and which float32 arrays nobody asked for.

The jaxpr says where the code turned narrow floats wide (readings.precision); a compiled program's
HLO says what float32 arrays it makes, each with the line and operation jax recorded for it. Every
such array (not an argument: that is another program's, or the test's own data) is placed in
exactly one of these, checked in this order:

- ``upcast``: it is in the region of a widening the code asked for (same line, operation and element
  count, or another operation of the line with the same count: XLA names a fusion after one of them) (a cast, a promotion, a matmul's
  ``preferred_element_type``, a library function that returns the wider type): named with its line;
- ``accumulator``: in the region of a library function that computes wide inside and returns the
  narrow type (``jnp.mean`` of bf16 sums in float32): explained, not an upcast;
- ``wide inputs``: made by an operation whose float inputs were float32 already, or in the region
  of a gradient's widening (the backward pass casts a float32 value's narrow cotangent back to
  float32: the gradient of a float32 parameter is float32): not an upcast;
- ``compiler's own``: in a program with narrow floats, an array with no jax operation behind it, or
  one at a line where the jaxpr has no wide value of its size (the key is (line, primitive, element
  count): a reshape or bitcast keeps the count): the compiler chose float32 (XLA's CPU backend
  computes bf16 and f16 through float32 temporaries that a TPU or GPU does not make);
- ``unexplained``: none of the above (a program the test did not lower, an operation without a line).

A promotion caused by another widening's result joins that widening: the root, whose cause is a
constant, a literal or an argument, names the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..readings.buffers import wide_arrays

UPCAST, ACCUMULATOR, WIDE_INPUTS, COMPILERS_OWN, UNEXPLAINED = (
    "upcast",
    "accumulator",
    "wide inputs",
    "compiler's own",
    "unexplained",
)
GRADIENT = "gradient"  # readings.precision.Widening.how of a widening in a gradient's backward pass
_BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2}


def element_bytes(dtype: str) -> int:
    """Bytes of an element of an XLA float dtype ("bf16": 2, "f8e4m3fn": 1)."""
    return _BYTES.get(dtype, 1 if dtype.startswith("f8") or dtype.startswith("f4") else 0)


def named(w: Any) -> bool:
    """A widening the code asked for (an upcast to name), not one a library keeps inside."""
    return w.how in ("astype", "promotion", "preferred") or (w.how == "inside" and w.kept)


@dataclass(frozen=True)
class Cost:
    """What one upcast's float32 arrays take on one backend or target."""

    where: str  # "cpu", "v5e:2x2"
    wide: int  # bytes of float32 arrays in its region
    beyond: int  # of which more than the same arrays in the narrow type
    buffers: tuple[Any, ...] = ()  # readings.buffers.Buffer, the largest first (XLA may reuse their memory)

    @property
    def wide_type(self) -> str:
        return "/".join(sorted({_dtype(b.shape) for b in self.buffers})) or "wider"


@dataclass(frozen=True)
class Upcast:
    """A group of widenings (a root and what its wide result promoted in turn) and what it costs."""

    root: Any  # readings.precision.Widening
    also: tuple[Any, ...]  # the widenings it promoted
    costs: tuple[Cost, ...]
    times: int = 1  # the same upcast at the same line, in so many places of the programs (a model's layers)

    @property
    def named(self) -> bool:
        return named(self.root) or any(named(w) for w in self.also)

    def cost(self, where: str) -> Cost | None:
        return next((c for c in self.costs if c.where == where), None)


@dataclass(frozen=True)
class PrecisionReport:
    """A test's upcasts (named first, the costliest first) and the float32 arrays of each kind."""

    upcasts: tuple[Upcast, ...]
    kinds: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)  # where -> kind -> buffers
    run: str = ""  # which of the wheres is the run's own backend ("cpu")

    @property
    def named(self) -> tuple[Upcast, ...]:
        return tuple(u for u in self.upcasts if u.named)

    def of_kind(self, where: str, kind: str) -> tuple[Any, ...]:
        return self.kinds.get(where, {}).get(kind, ())


def _line(source: str) -> str:
    """ "m.py:5" of "m.py:5 (f)": the function is last; a folder may have " (" in its name."""
    return source.rsplit(" (", 1)[0]


def _prim(op: str) -> str:
    return op.rsplit("/", 1)[-1]


def _dtype(shape: str) -> str:
    return shape.split("[", 1)[0]


def _elements(shape: str) -> int:
    """Elements of an HLO array shape ("f32[8,128]": 1024; "f32[]": 1)."""
    dims = shape.partition("[")[2].rstrip("]")
    try:
        return math.prod(int(d) for d in dims.split(",") if d)
    except ValueError:
        return -1


def _root(widenings: list[Any], i: int) -> int:
    seen = set()
    while widenings[i].via >= 0 and i not in seen:
        seen.add(i)
        i = widenings[i].via
    return i


def _flat(precisions: list[Any]) -> list[Any]:
    """Every widening of the programs, with its program's offset applied to ``via``."""
    flat: list[Any] = []
    for p in precisions:
        base = len(flat)
        flat += [w if w.via < 0 else replace(w, via=w.via + base) for w in p.widenings]
    return flat


def _keyed(flat: list[Any]) -> tuple[dict[tuple[str, str, int], list[int]], dict[tuple[str, int], list[int]]]:
    """Each widening's index under the (line, primitive, elements) of its region's values, and
    under (line, elements): another operation on the line made the same value (a fusion's name)."""
    exact: dict[tuple[str, str, int], list[int]] = {}
    sized: dict[tuple[str, int], list[int]] = {}
    for i, w in enumerate(flat):
        for line, prim, n in w.region:
            exact.setdefault((line, prim, n), []).append(i)
            sized.setdefault((line, n), []).append(i)
    return exact, sized


class _Regions:
    """The widenings of a test's programs and the (line, primitive, elements) keys of their regions
    and of the programs' other values, to place each float32 array by."""

    def __init__(self, precisions: list[Any]):
        self.flat = _flat(precisions)
        self.roots = [_root(self.flat, i) for i in range(len(self.flat))]
        self.exact, self.sized = _keyed(self.flat)
        # a wide value of the program by line and count: another operation of its line with its count may hold it
        self.wide_sized = {(line, n) for p in precisions for line, _, n in p.wide_lines if line}
        lines = {k[0] for p in precisions for k in (*p.narrow_lines, *p.wide_lines) if k[0]}
        self.known = lines | {line for line, _ in self.sized}
        self.narrow = any(p.narrow for p in precisions)

    def place(self, b: Any) -> tuple[str, int]:
        """The kind of a float32 array, and the group (its root's index) it is charged to; -1 for none."""
        line, prim, n = _line(b.source), _prim(b.op), _elements(b.shape)
        # a shape that does not parse (n < 0) matches no count, not even one that could not be read
        takers = (self.exact.get((line, prim, n)) or self.sized.get((line, n))) if b.op and line and n >= 0 else None
        if not takers:
            return self._kind(b.op, line, n), -1
        best = min(takers, key=lambda i: (not named(self.flat[i]), i))
        return self._charged(best), self.roots[best]

    def _charged(self, best: int) -> str:
        """The kind of an array in the region of widening ``best``."""
        group = self.flat[self.roots[best]]
        if named(self.flat[best]) or named(group):
            return UPCAST
        if group.how == GRADIENT:
            return WIDE_INPUTS  # the gradient of a float32 value: float32 whatever the code asked
        return ACCUMULATOR

    def _kind(self, op: str, line: str, n: int) -> str:
        """The kind of an array in no widening's region."""
        if n >= 0 and (line, n) in self.wide_sized:
            return WIDE_INPUTS
        if self.narrow and (not op or line in self.known):
            return COMPILERS_OWN  # no wide value of its size at its line in the program: the compiler's
        return UNEXPLAINED

    def upcast(self, group: int, charged: dict[tuple[int, str], list[Any]], wheres: list[str]) -> Upcast:
        """The group whose root is widening ``group``, with what its arrays cost on each of ``wheres``."""
        root = self.flat[group]
        members = tuple(w for i, w in enumerate(self.flat) if self.roots[i] == group and i != group)
        return Upcast(
            root, members, tuple(_cost(where, root.narrow, charged.get((group, where), [])) for where in wheres)
        )


def _cost(where: str, narrow: str, arrays: list[Any]) -> Cost:
    arrays = sorted(arrays, key=lambda b: -b.size)
    beyond = sum(b.size - b.size * element_bytes(narrow) // max(element_bytes(_dtype(b.shape)), 1) for b in arrays)
    return Cost(where, sum(b.size for b in arrays), beyond, tuple(arrays))


def classify(precisions: list[Any], buffers: dict[str, tuple[Any, ...]]) -> PrecisionReport:
    """Each float32 array of ``buffers`` (per backend or target: readings.buffers.Buffer) placed in
    one kind, and the widenings of ``precisions`` (readings.precision.Precision, one per program)
    grouped with what their arrays cost."""
    regions = _Regions(precisions)
    charged: dict[tuple[int, str], list[Any]] = {}
    kinds: dict[str, dict[str, list[Any]]] = {}
    for where, bufs in buffers.items():
        mine = kinds.setdefault(where, {})
        for b in wide_arrays(bufs):
            kind, group = regions.place(b)
            if group >= 0:
                charged.setdefault((group, where), []).append(b)
            mine.setdefault(kind, []).append(b)
    upcasts = _once_each([regions.upcast(group, charged, list(buffers)) for group in sorted(set(regions.roots))])
    upcasts.sort(key=lambda u: (not u.named, -max((c.beyond for c in u.costs), default=0), -u.root.nbytes))
    return PrecisionReport(
        tuple(upcasts),
        {w: {k: tuple(sorted(v, key=lambda b: -b.size)) for k, v in m.items()} for w, m in kinds.items()},
    )


def _once_each(upcasts: list[Upcast]) -> list[Upcast]:
    """One upcast for each that the code wrote once and the programs repeat (a layer's line, traced
    for every layer of a model): the same widening, line, cause and shapes; its costs added up."""
    out: dict[tuple[Any, ...], Upcast] = {}
    for u in upcasts:
        w = u.root
        key = (w.how, w.line, w.op, w.cause, w.shape, w.narrow, w.wide, w.kept, w.program)
        key += tuple((m.how, m.line, m.op, m.shape) for m in u.also)
        seen = out.get(key)
        if seen is None:
            out[key] = u
            continue
        costs = tuple(
            Cost(
                a.where,
                a.wide + b.wide,
                a.beyond + b.beyond,
                tuple(sorted((*a.buffers, *b.buffers), key=lambda x: -x.size)),
            )
            for a, b in zip(seen.costs, u.costs)
        )
        out[key] = replace(seen, costs=costs, times=seen.times + u.times)
    return list(out.values())
