"""The largest buffers of a compile, read from the buffer assignment XLA writes with ``xla_dump_to``.

The TPU compiler's memory analysis gives totals only (its serialized buffer assignment is empty),
and its refusal names two figures. Compiling again with ``compiler_options={"xla_dump_to": dir}``
makes XLA write, even for a program it refuses, ``*buffer-assignment.txt`` (every allocation: its
size as laid out, tile padding included, and the values in it), ``*buffer-assignment-values.txt``
(the HLO instruction behind each value, with jax's op_name and stack frame) and the optimized
module, whose header maps stack frames to files and lines. Only HBM (memory color 0) is counted.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .frames import short_path

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_VALUE = re.compile(r"^ value: <\d+ (\S+) @\d+> \(size=(\d+),offset=\d+\): (.+)$")
_INSTRUCTION = re.compile(r"^ from instruction: %(\S+) = .*?metadata=\{([^}]*)\}")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_SOURCE = re.compile(r'source_file="([^"]*)" source_line=(\d+)')
_LAYOUT = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Buffer:
    """One value the compiler placed in HBM."""

    size: int  # bytes, as laid out on the device (tile padding included)
    shape: str  # "bf16[524288,8192]"
    kind: str  # "argument 0", "output", "temporary"
    instruction: str  # the HLO instruction that defines it
    op: str  # jax's name for the operation: "jit(step)/dot_general", or the argument's name
    source: str  # "test_model.py:42 (step)", where jax recorded one
    converted_from: str = ""  # a float32 (or wider) value converted from this narrower float dtype: an upcast
    programs: tuple[str, ...] = ()  # the programs that make it, or take it as an argument ("jit_step")


def _kind(header: str) -> str:
    m = re.search(r"parameter (\d+)", header)
    if m:
        return f"argument {m[1]}"
    if "output" in header or "maybe-live-out" in header:
        return "output"
    if "constant" in header:
        return "constant"
    return "temporary"


def _frames(module_text: str) -> dict[str, str]:
    """stack_frame_id -> "file:line (function)", from the optimized module's header tables."""
    tables: dict[str, dict[str, str]] = {}
    section = None
    for line in module_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            tables[section] = {}
            continue
        if not line.strip() or line.startswith(("%", "HloModule", "ENTRY")):
            if line.startswith(("%", "ENTRY")):
                break
            continue
        if section is not None:
            number, _, rest = line.partition(" ")
            tables[section][number] = rest.strip().strip('"')
    names, functions = tables.get("FileNames", {}), tables.get("FunctionNames", {})
    locations = {}
    for number, rest in tables.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", rest))
        path = names.get(fields.get("file_name_id", ""), "?")
        locations[number] = (
            f"{short_path(path)}:{fields.get('line', '?')} ({functions.get(fields.get('function_name_id', ''), '?')})"
        )
    out = {}
    for number, rest in tables.get("StackFrames", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", rest))
        out[number] = locations.get(fields.get("file_location_id", ""), "")
    return out


def _first(root: Path, pattern: str) -> Path | None:
    return next(iter(sorted(root.glob(pattern))), None)


_SPACE = re.compile(r"^Memory Space: (\S+) \(color=(\d+)\)\s*\nTotal bytes: (\d+)", re.M)


def memory_spaces(dump_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Bytes allocated per memory space ("default" is HBM; "vmem" is on-chip scratch), from the
    memory-usage report; {} where none was written."""
    report = _first(Path(dump_dir), "*memory-usage-report.txt")
    if report is None:
        return {}
    return {m[1]: int(m[3]) for m in _SPACE.finditer(report.read_text(errors="replace"))}


def _meta(metadata: str, frames: dict[str, str]) -> tuple[str, str]:
    """jax's op_name and the source ("file:line (function)") in an HLO instruction's metadata."""
    op_name, frame, source = _OP_NAME.search(metadata), _FRAME.search(metadata), _SOURCE.search(metadata)
    where = frames.get(frame[1], "") if frame else (f"{short_path(source[1])}:{source[2]}" if source else "")
    return (op_name[1] if op_name else "", where)


def largest_buffers(dump_dir: str | os.PathLike[str], count: int = 5) -> tuple[Buffer, ...]:
    """The ``count`` largest HBM values of the one module dumped in ``dump_dir``; () where none was written."""
    root = Path(dump_dir)
    assignment = _first(root, "*buffer-assignment.txt")
    if assignment is None:
        return ()
    values_file = _first(root, "*buffer-assignment-values.txt")
    module_file = _first(root, "*after_optimizations.txt")
    frames = _frames(module_file.read_text(errors="replace")) if module_file else {}
    meta: dict[str, tuple[str, str]] = {}
    for line in values_file.read_text(errors="replace").splitlines() if values_file is not None else ():
        m = _INSTRUCTION.match(line)
        if m:
            meta[m[1]] = _meta(m[2], frames)
    found = _hbm_values(assignment.read_text(errors="replace"), meta)
    return tuple(sorted(found.values(), key=lambda b: (-b.size, b.kind, b.instruction))[:count])


def _hbm_values(assignment: str, meta: dict[str, tuple[str, str]]) -> dict[str, Buffer]:
    """Each HBM value of a buffer assignment, at the largest size it is given, with its allocation's
    kind and the op_name and source of the instruction behind it."""
    found: dict[str, Buffer] = {}
    kind, hbm = "temporary", True
    for line in assignment.splitlines():
        m = _ALLOCATION.match(line)
        if m:
            header = m[3]
            hbm = not re.search(r"\bcolor [1-9]", header) and "thread-local" not in header
            kind = _kind(header)
            continue
        v = _VALUE.match(line)
        if not v or not hbm:
            continue
        name, size, shape = v[1], int(v[2]), _LAYOUT.sub("", v[3]).strip()
        op, where = meta.get(name, ("", ""))
        if name not in found or found[name].size < size:
            found[name] = Buffer(size, shape, kind, name, op, where)
    return found


# --- the run's own programs: their optimized HLO ---------------------------------------------------

_DTYPE_BYTES = {
    "pred": 1,
    "s2": 1,
    "s4": 1,
    "u4": 1,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}
_HLO = re.compile(r"^\s*(ROOT\s+)?%(\S+) = ([a-z0-9]+)\[([\d,]*)\]\S* ([a-z-]+)\((.*?)\)(.*)$")
_NOT_A_BUFFER = {"get-tuple-element", "bitcast", "tuple", "constant", "after-all", "partition-id", "replica-id"}


def hlo_buffers(module_text: str) -> tuple[Buffer, ...]:
    """The arrays an optimized HLO module's entry computation materializes (its arguments, the
    results of its fusions and other top-level instructions, its outputs), each with its size from
    its shape, jax's op_name and source line. Sizes are per device, unpadded, and ignore that XLA
    may reuse one temporary's memory for another: what the program makes, not a buffer assignment."""
    frames = _frames(module_text)
    entry = _entry(module_text)
    out = []
    dtypes: dict[str, str] = {}  # instruction -> its dtype, to tell what a conversion converted
    for line in entry:
        m = _HLO.match(line)
        if not m:
            continue
        dtypes[m[2]] = m[3]
        if m[5] not in _NOT_A_BUFFER and m[3] in _DTYPE_BYTES:
            out.append(_hlo_buffer(m, frames, dtypes))
    outputs = _root_tuple(entry)  # a program with several results returns them in a tuple
    return tuple(replace(b, kind="output") if b.instruction in outputs else b for b in out)


def _entry(module_text: str) -> list[str]:
    """The lines of an HLO module's entry computation, between its ENTRY line and its closing
    brace; [] where it has none."""
    lines = module_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ENTRY")), None)
    if start is None:
        return []
    return list(itertools.takewhile(lambda line: not line.startswith("}"), lines[start + 1 :]))


def _hlo_buffer(m: re.Match[str], frames: dict[str, str], dtypes: dict[str, str]) -> Buffer:
    """The array one instruction of the entry computation makes; where it converts a narrow float to
    a wide one, the narrow dtype."""
    root, name, dtype, dims, opcode, operands, rest = m.groups()
    size = math.prod(map(int, filter(None, dims.split(","))), start=_DTYPE_BYTES[dtype])
    op, where = _meta(rest, frames)
    kind = f"argument {operands}" if opcode == "parameter" else ("output" if root else "temporary")
    converted = ""
    if dtype in _WIDE and (opcode == "convert" or op.endswith("convert_element_type")):
        narrow = [dtypes.get(o.strip().lstrip("%")) for o in operands.split(",")]
        converted = next((d for d in narrow if d in _NARROW), "")
    return Buffer(size, f"{dtype}[{dims}]", kind, name, op, where, converted)


_ROOT_TUPLE = re.compile(r"^\s*ROOT\s+%\S+ = \(.*\) tuple\((.*?)\)")


def _root_tuple(entry: list[str]) -> set[str]:
    """The instructions the entry computation's root tuple returns (its results); none where its root is not a tuple."""
    for line in entry:
        m = _ROOT_TUPLE.match(line)
        if m:
            return {o.strip().lstrip("%") for o in m[1].split(",")}
    return set()


def wide_arrays(buffers: tuple[Buffer, ...]) -> list[Buffer]:
    """The float32 and float64 arrays a program makes (not its arguments, not its constants)."""
    return [b for b in buffers if b.shape.split("[", 1)[0] in _WIDE and not b.kind.startswith(("argument", "constant"))]


_NARROW = ("bf16", "f16", "f8e4m3fn", "f8e5m2")
_WIDE = ("f32", "f64")
