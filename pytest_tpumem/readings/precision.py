"""Where a program's narrow floats (bf16, f16, the fp8 kinds) become float32 or float64, read from
its jaxpr: the program as jax traced it, before any backend compiled it, with the user's line on
every equation.

Each place is a :class:`Widening`: how it came about (the code cast it, ``astype``; a wider operand
promoted an operation, ``promotion``; a matmul asked for a wider result, ``preferred``; a library
function computes in the wider type inside, ``inside``), its line, the wide value's type, and the
equations whose wide results derive from it (its region, as (line, primitive, elements), the key an
optimized HLO's metadata carries for every instruction XLA made from them: the line there is the
one jax writes when it lowers, its innermost frame outside jax, which is a library's where the
user's line called flax or optax, while the widening is told at the user's line). What it costs
is the compiled program's to say: decisions.upcast matches the HLO's float32 buffers to the regions.

Promotion is told from the data, not from jax's function names: a conversion whose result meets a
wider operand in the operation that takes it was made by that operand (jax.numpy's
``promote_dtypes``), and that operand is named (a constant, an argument, a literal, or another
widening, whose own cause is then the root). An explicit cast is told by the jax function the
user's line called (``astype``, ``asarray``, ``array``, ``lax.convert_element_type``).
"""

from __future__ import annotations

import ast
import functools
import linecache
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from . import jaxcompat
from .frames import Frame, is_user_file, short_path

SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}
CASTS = {"astype", "_astype", "asarray", "array", "convert_element_type"}  # jax functions that cast
MATMULS = {"dot_general", "conv_general_dilated", "ragged_dot", "ragged_dot_general"}
_SHAPE_OPS = {"broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "copy", "copy_p"}
_FORWARDERS = (
    "<locals>",
    "reraise_with_filtered_traceback",
    "cache_miss",
    "__call__",
    "Module.apply",  # flax.linen: a module's apply, and the wrapper of every module method
    "_call_wrapped_method",
)


def short_dtype(dtype: Any) -> str:
    """jax's dtype name as XLA writes it: "bf16", "f32", "f8e4m3fn"."""
    name = str(getattr(dtype, "name", dtype))
    return SHORT.get(name, name.replace("float", "f").replace("_", ""))


def _float_bytes(dtype: Any) -> int:
    """Bytes of a floating-point dtype's element; 0 for any other."""
    import numpy as np

    try:
        d = np.dtype(dtype)
    except TypeError:
        return 0
    name = d.name
    if not (name.startswith(("float", "bfloat")) or name == "float64"):
        return 0
    return int(d.itemsize)


def is_narrow(dtype: Any) -> bool:
    return 0 < _float_bytes(dtype) < 4


def is_wide(dtype: Any) -> bool:
    return _float_bytes(dtype) >= 4


@dataclass(frozen=True)
class Widening:
    """One place a narrow float value becomes a wider one."""

    how: str  # "astype", "promotion", "preferred" (a matmul's preferred_element_type), "inside" (a library's),
    # "gradient" (in a gradient's backward pass: the transpose of a narrowing cast; never the code's upcast)
    line: str  # the user's line ("src/norm.py:19"), "" where none is known
    function: str  # the user's function there
    op: str  # what did it: "add", "div", "dot_general", or the library function ("mean", "softmax")
    shape: str  # the wide value: "f32[8,128,96,96]"
    narrow: str  # "bf16"
    wide: str  # "f32"
    nbytes: int  # of the wide value
    program: str
    kept: bool = False  # wide values derived from it, as large as it, reach another line of the user's or the results
    cause: str = ""  # a promotion's wider operand, in words ("float32 constant EPS_F32 (src/norm.py:9)")
    via: int = -1  # a promotion caused by another widening's wide value: that widening's index
    region: frozenset[tuple[str, str, int]] = field(
        default=frozenset()
    )  # (line, primitive, elements) of its wide results


@dataclass(frozen=True)
class Precision:
    """What one program's jaxpr says of its floats."""

    program: str
    narrow: bool  # it has narrow float values
    widenings: tuple[Widening, ...]
    wide_lines: frozenset[tuple[str, str, int]]  # (line, primitive, elements) of wide results from wide inputs alone
    narrow_lines: frozenset[tuple[str, str, int]]  # (line, primitive, elements) of narrow float results


def _aval(v: Any) -> Any:
    return getattr(v, "aval", None)


def _dtype(v: Any) -> Any:
    return getattr(_aval(v), "dtype", None)


def _shape(v: Any) -> str:
    a = _aval(v)
    dims = ",".join(str(d) for d in getattr(a, "shape", ()))
    return f"{short_dtype(getattr(a, 'dtype', '?'))}[{dims}]"


def _count(v: Any) -> int:
    """Elements of a value: what a reshape or a bitcast of it keeps, as the HLO's array shows it."""
    try:
        return int(math.prod(getattr(_aval(v), "shape", ())))
    except Exception:
        return -1


def _nbytes(v: Any) -> int:
    return max(_count(v), 0) * int(getattr(_dtype(v), "itemsize", 0) or 0)


def _frames(eqn: Any) -> tuple[Frame | None, list[str], str]:
    """The equation's innermost user frame; the names of the functions between it and the
    operation, innermost first (jax's, a library's); and the line jax writes on the operation
    when it lowers it, as the HLO's arrays carry it (a library's, flax's, where one called it)."""
    tb = jaxcompat.eqn_traceback(eqn)
    names: list[str] = []
    lowered = ""
    for f in getattr(tb, "frames", None) or ():
        if not lowered and jaxcompat.lowered_line_file(f.file_name):
            lowered = f"{short_path(f.file_name)}:{int(f.line_num)}"
        if is_user_file(f.file_name):
            frame = Frame(short_path(f.file_name), int(f.line_num), str(f.function_name))
            return frame, names, lowered or f"{frame.file}:{frame.line}"
        names.append(str(f.function_name))
    return None, names, lowered


def _called(names: list[str]) -> str:
    """The function the user's line called (the outermost named one, past jax's and flax's
    forwarders); a module's class where it was a call of one ("BatchNorm")."""
    for name in reversed(names):
        owner, _, method = name.rpartition(".")
        if method == "__call__" and owner[:1].isupper() and "<" not in owner:
            return owner  # a module, a layer: BatchNorm.__call__
        if not any(part in name for part in _FORWARDERS):
            return method
    return ""


def _sub_jaxprs(eqn: Any) -> list[tuple[Any, list[Any]]]:
    """The programs inside an equation (jit, checkpoint, custom derivatives, control flow), each
    with the outer values its inputs are (None where they are not one to one)."""
    out = []
    p = eqn.params
    if "branches" in p:  # cond: the first input picks the branch
        return [(b, list(eqn.invars[1:])) for b in p["branches"]]
    if "body_jaxpr" in p:  # while: cond consts, body consts, carry
        nc, nb = p.get("cond_nconsts", 0), p.get("body_nconsts", 0)
        carry = list(eqn.invars[nc + nb :])
        return [
            (p["cond_jaxpr"], list(eqn.invars[:nc]) + carry),
            (p["body_jaxpr"], list(eqn.invars[nc : nc + nb]) + carry),
        ]
    for value in p.values():
        inner = getattr(value, "jaxpr", value)
        if hasattr(inner, "eqns"):
            out.append((value, list(eqn.invars)))
    return out


@dataclass(frozen=True)
class _Site:
    """An equation where it was traced: what it reads, the user's frame and line, the line its HLO
    carries, and the library and gradient's backward pass it is in."""

    eqn: Any
    prim: str
    ins: list[Any]  # its array operands
    in_taint: frozenset[int]  # the widenings they derive from
    frame: Frame | None
    names: list[str]  # the functions between the user's frame and it, innermost first
    line: str  # the user's line, "" where none is known
    key: str  # the line jax writes on its HLO, for matching arrays
    library: str  # "" in the user's code
    backward: bool


def _site(
    eqn: Any, taints: dict[Any, frozenset[int]], outer: Frame | None, library: str, backward: bool, outer_key: str
) -> _Site:
    frame, names, key = _frames(eqn)
    if frame is None:
        frame = outer
        if outer is not None and not library:
            library = "jax"  # traced inside a jitted library function: no frame of the user's
    ins = [v for v in eqn.invars if _aval(v) is not None]
    return _Site(
        eqn=eqn,
        prim=eqn.primitive.name,
        ins=ins,
        in_taint=_taint(ins, taints),
        frame=frame,
        names=names,
        line=f"{frame.file}:{frame.line}" if frame is not None else "",
        key=key or outer_key,  # an equation of a jitted function with no traceback: lowered at its caller's line
        library=library,
        # the backward pass of a gradient: jax names what it transposed "transpose(jvp(...))"
        backward=backward or "transpose(" in str(getattr(getattr(eqn, "source_info", None), "name_stack", "")),
    )


def _taint(values: list[Any], taints: dict[Any, frozenset[int]]) -> frozenset[int]:
    """The widenings ``values`` derive from (a literal from none)."""
    return frozenset().union(*(taints.get(v, frozenset()) for v in values if not _is_literal(v)))


def _narrow_operand(site: _Site) -> Any:
    """The narrow float operand an operation may widen: a conversion's, or one of an operation with
    no wide operand; None where there is none."""
    narrow_in = [v for v in site.ins if is_narrow(_dtype(v))]
    if not narrow_in or any(is_wide(_dtype(v)) for v in site.ins) and site.prim != "convert_element_type":
        return None
    return narrow_in[0]


def _library(site: _Site, called: str) -> str:
    """The library an operation was traced in: where jax lowers it at another line than the user's,
    the one the user's line called (flax, optax)."""
    if site.library or not site.key or not site.line or site.key == site.line:
        return site.library
    return called.strip("_") or "library"


def _how(prim: str, called: str, library: str) -> tuple[str, str] | None:
    """How an operation on a narrow float made a wide one, and what did it (Widening.how and .op);
    None where it made no widening."""
    if prim == "convert_element_type":
        if library:
            return "inside", library
        return ("astype" if called in CASTS else "promotion?"), (called.strip("_") if called else prim)
    if prim in MATMULS:
        return ("inside", library) if library else ("preferred", prim)
    return None


class _Reader:
    def __init__(self, program: str, arg_names: list[str]):
        self.program = program
        self.widenings: list[dict[str, Any]] = []
        self.wide_lines: set[tuple[str, str, int]] = set()
        self.narrow_lines: set[tuple[str, str, int]] = set()
        self.narrow = False
        self.arg_names = arg_names
        self.fresh: dict[Any, int] = {}  # a conversion's result, not yet taken by an operation -> its widening
        self.origin: dict[Any, str] = {}  # a wide value not from a narrow one -> what it is, in words

    def read(
        self,
        jaxpr: Any,
        taints: dict[Any, frozenset[int]],
        outer: Frame | None,
        library: str,
        backward: bool = False,
        outer_key: str = "",
    ) -> dict[Any, frozenset[int]]:
        inner = getattr(jaxpr, "jaxpr", jaxpr)
        for v in getattr(inner, "constvars", ()):  # a nested jit's own constants are constants too
            if is_wide(_dtype(v)):
                self.origin.setdefault(v, f"{_words(_dtype(v))} constant {_shape(v)} of the program")
        for eqn in inner.eqns:
            self._eqn(eqn, taints, outer, library, backward, outer_key)
        return taints

    def _eqn(
        self,
        eqn: Any,
        taints: dict[Any, frozenset[int]],
        outer: Frame | None,
        library: str,
        backward: bool,
        outer_key: str,
    ) -> None:
        site = _site(eqn, taints, outer, library, backward, outer_key)
        if any(is_narrow(_dtype(v)) for v in (*site.ins, *eqn.outvars)):
            self.narrow = True
        self._promoted(site, taints)
        subs = _sub_jaxprs(eqn)
        if subs:
            self._call(site, subs, taints)
            return
        for o in eqn.outvars:
            self._result(site, o, taints)

    def _promoted(self, site: _Site, taints: dict[Any, frozenset[int]]) -> None:
        """A conversion's result meeting a wider operand here: that operand promoted it."""
        for v in site.ins:
            if _is_literal(v) or v not in self.fresh:
                continue
            w = self.widenings[self.fresh.pop(v)]
            if w["how"] != "promotion?":
                continue
            others = [o for o in site.ins if o is not v and is_wide(_dtype(o))]
            if others:
                w.update(
                    how="promotion", op=site.prim, cause_of=[self._describe(o, taints, site.frame) for o in others]
                )
            else:
                w["how"] = "inside"

    def _call(self, site: _Site, subs: list[tuple[Any, list[Any]]], taints: dict[Any, frozenset[int]]) -> None:
        """An equation holding programs (jit, checkpoint, control flow): its wide results tainted by
        what comes out of them."""
        name = str(site.eqn.params.get("name", "")) if site.prim in ("pjit", "jit", "closed_call") else ""
        for o, t in zip(site.eqn.outvars, self._subs(site, subs, taints, name)):
            if not is_wide(_dtype(o)):
                continue
            taints[o] = _through(t or site.in_taint, site.backward)
            self._region(taints[o], site, o)
            if not taints[o]:
                self._made(o, site, name.strip("_") or site.prim)

    def _subs(
        self, site: _Site, subs: list[tuple[Any, list[Any]]], taints: dict[Any, frozenset[int]], name: str
    ) -> list[frozenset[int]]:
        """Each program inside an equation read with the taints of its inputs; the taints of the
        equation's results, from what comes out of them."""
        library = site.library
        outs_taint: list[frozenset[int]] = [frozenset()] * len(site.eqn.outvars)
        for sub, outer_ins in subs:
            inner = getattr(sub, "jaxpr", sub)
            sub_taints = self._enter(inner.invars, outer_ins, taints)
            if site.frame is not None and not _any_user_frame(inner) and name:
                library = library or name.strip("_")
            self.read(sub, sub_taints, site.frame, library, site.backward, site.key)
            if len(inner.outvars) == len(outs_taint):
                outs_taint = [a | sub_taints.get(o, frozenset()) for a, o in zip(outs_taint, inner.outvars)]
        return outs_taint

    def _enter(
        self, params: list[Any], args: list[Any], taints: dict[Any, frozenset[int]]
    ) -> dict[Any, frozenset[int]]:
        """A program's inputs, with the taints and words of the outer values they are; none where
        they are not one to one."""
        inside: dict[Any, frozenset[int]] = {}
        if len(params) != len(args):
            return inside
        for a, b in zip(params, args):
            if not _is_literal(b) and b in taints:
                inside[a] = taints[b]
            if not _is_literal(b) and b in self.origin:
                self.origin[a] = self.origin[b]
        return inside

    def _result(self, site: _Site, o: Any, taints: dict[Any, frozenset[int]]) -> None:
        """An operation's result: a narrow one noted, a wide one tainted by the widenings it derives
        from, or, where it derives from none, said in words."""
        dt = _dtype(o)
        if is_narrow(dt):
            self.narrow_lines.add((site.key, site.prim, _count(o)))
            return
        if not is_wide(dt):
            return
        new = self._widening(site, o)
        taint = _through(site.in_taint | ({new} if new is not None else frozenset()), site.backward)
        if taint:
            taints[o] = taint
            self._region(taint, site, o)
            return
        self.wide_lines.add((site.key, site.prim, _count(o)))
        first = site.ins[0] if site.ins and not _is_literal(site.ins[0]) else None
        if site.prim in _SHAPE_OPS and first is not None and first in self.origin:
            self.origin[o] = self.origin[first]  # a broadcast constant is still that constant
        else:
            self._made(o, site, site.prim)

    def _made(self, o: Any, site: _Site, what: str) -> None:
        """Words for a wide value not from a narrow one, where it has none yet."""
        self.origin.setdefault(o, f"{_words(_dtype(o))} value made at {site.line or 'an unknown line'} ({what})")

    def _region(self, taint: frozenset[int], site: _Site, value: Any) -> None:
        for i in taint:
            w = self.widenings[_index(i)]
            if site.key:
                w["region"].add((site.key, site.prim, _count(value)))
            # its wide value (not a reduction of it: a norm's float32 statistics) reached another line going forward
            if i >= 0 and site.line and site.line != w["line"] and _count(value) >= w["elements"]:
                w["kept"] = True

    def _widening(self, site: _Site, out: Any) -> int | None:
        narrow = _narrow_operand(site)
        if narrow is None:
            return None
        called = _called(site.names)
        how_op = _how(site.prim, called, _library(site, called))
        if how_op is None:
            return None
        how, op = how_op
        if site.backward:  # the transpose of a cast to the narrow type: the gradient of a wide value is wide
            how = "gradient"
        self.widenings.append(
            {
                "how": how,
                "line": site.line,
                "function": site.frame.function if site.frame is not None else "",
                "op": op,
                "shape": _shape(out),
                "narrow": short_dtype(_dtype(narrow)),
                "wide": short_dtype(_dtype(out)),
                "nbytes": _nbytes(out),
                "kept": False,
                "elements": _count(out),
                "region": {(site.key, site.prim, _count(out))},
                "cause_of": [],
            }
        )
        index = len(self.widenings) - 1
        if how == "promotion?":
            self.fresh[out] = index
        return index

    def _describe(self, v: Any, taints: dict[Any, frozenset[int]], frame: Frame | None) -> tuple[int, str]:
        """The wider operand that promoted an operation: (the widening it came from, or -1; words)."""
        dt = _dtype(v)
        if _is_literal(v):
            named = constant_names(frame, dt)
            return -1, f"{_words(dt)} constant {named}" if named else f"{_words(dt)} literal {getattr(v, 'val', '?')!r}"
        if taints.get(v):
            return min(_index(i) for i in taints[v]), ""
        named, said = constant_names(frame, dt), self.origin.get(v, "")
        if named and "constant" in said:
            return -1, f"{_words(dt)} constant {named}"
        return -1, said or f"{_words(dt)} value"

    def arguments(self, jaxpr: Any) -> None:
        """What the program's own inputs are, in words, for naming a promotion's cause."""
        inner = getattr(jaxpr, "jaxpr", jaxpr)
        for i, v in enumerate(inner.invars):
            if is_wide(_dtype(v)):
                name = self.arg_names[i] if i < len(self.arg_names) else ""
                self.origin[v] = f"{_words(_dtype(v))} argument {name or i} {_shape(v)}"


def _through(taint: frozenset[int], backward: bool) -> frozenset[int]:
    """A value's taint: the widenings whose wide values it derives from, each as its index, or as
    ``~index`` where it derives from it only through a gradient's backward pass (charged to it, but
    no sign that the code keeps it: the gradient of a float32 value is float32 whatever the code asked)."""
    return frozenset(~i if i >= 0 else i for i in taint) if backward else taint


def _index(i: int) -> int:
    return i if i >= 0 else ~i


def _is_literal(v: Any) -> bool:
    return type(v).__name__ == "Literal"


def _words(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _any_user_frame(jaxpr: Any) -> bool:
    return any(_frames(e)[0] is not None for e in getattr(jaxpr, "eqns", ())[:8])


def read_precision(program: str, jaxpr: Any, arg_names: list[str] | None = None) -> Precision:
    """Where ``jaxpr`` (a program's, open or closed) widens narrow floats."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    if arg_names is None:
        arg_names = [str(n) for n in getattr(jaxcompat.debug_info(jaxpr), "arg_names", None) or ()]
    reader = _Reader(program, list(arg_names))
    reader.arguments(jaxpr)
    taints: dict[Any, frozenset[int]] = {}
    reader.read(jaxpr, taints, None, "")
    for o in inner.outvars:
        for i in taints.get(o, frozenset()) if not _is_literal(o) else ():
            # a gradient's results carry a forward widening's taint only through the backward pass
            if i >= 0 and _count(o) >= reader.widenings[i]["elements"]:
                reader.widenings[i]["kept"] = True
    out = tuple(_widening(w, program) for w in reader.widenings)
    return Precision(program, reader.narrow, out, frozenset(reader.wide_lines), frozenset(reader.narrow_lines))


def _widening(w: dict[str, Any], program: str) -> Widening:
    """A widening as the reader noted it, told: a promotion caused by another widening's wide value
    names that one (``via``), any other its wider operand in words."""
    via = next((index for index, _ in w["cause_of"] if index >= 0), -1)
    return Widening(
        how="inside" if w["how"] == "promotion?" else w["how"],
        line=w["line"],
        function=w["function"],
        op=w["op"],
        shape=w["shape"],
        narrow=w["narrow"],
        wide=w["wide"],
        nbytes=w["nbytes"],
        program=program,
        kept=w["kept"],
        cause="" if via >= 0 else next((words for _, words in w["cause_of"] if words), ""),
        via=via,
        region=frozenset(w["region"]),
    )


# --- naming a constant: the module globals a line uses -------------------------------------------

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def constant_names(frame: Frame | None, dtype: Any) -> str:
    """The module-level names on the user's line that hold a value of ``dtype`` (a float32
    constant), each with the line that defines it: ``EPS_F32 (src/norm.py:9)``; "" where none."""
    if frame is None:
        return ""
    try:
        return _constant_names(frame.file, frame.line, str(getattr(dtype, "name", dtype)))
    except Exception:  # naming is a courtesy: never an error
        return ""


@functools.lru_cache(maxsize=256)
def _constant_names(file: str, line: int, dtype: str) -> str:
    path = os.path.abspath(file)
    module = next(
        (m for m in list(sys.modules.values()) if os.path.abspath(getattr(m, "__file__", None) or "") == path), None
    )
    if module is None:
        return ""
    text = linecache.getline(path, line)
    defined = _definitions(path)
    found = []
    for name in dict.fromkeys(_NAME.findall(text)):
        value = getattr(module, name, None)
        if str(getattr(getattr(value, "dtype", None), "name", "")) == dtype and name in defined:
            found.append(f"{name} ({file}:{defined[name]})")
    return ", ".join(found)


@functools.lru_cache(maxsize=64)
def _definitions(path: str) -> dict[str, int]:
    """Module-level names and the line that assigns each."""
    tree = ast.parse("".join(linecache.getlines(path)))
    out: dict[str, int] = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Name):
                out.setdefault(t.id, node.lineno)
    return out
