"""Words every check's text uses: plurals, aligned tables, how much a failure shows at -q, the
files a failing check left, the note that live arrays stand in for device memory, and the escape
that keeps what a report or a test id holds from driving the terminal."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from ..readings.frames import short_path

STAND_IN_NOTE = (
    "live arrays stand in for device memory (the backend reports no allocator figures: XLA's temporaries are "
    "counted from the memory analysis of each program the test runs)"
)


# C0 controls, DEL and C1 controls (Unicode's Cc: ESC, BEL, CR, CSI U+009B, ...) and lone surrogates
# (Cs: a test file's name that is not UTF-8 reaches a test id as U+DC80-U+DCFF, which no UTF-8 output can hold).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escaped(text: str, keep: str = "") -> str:
    """``text`` with each control character (C0, DEL, C1) and lone surrogate written as pytest
    writes one in a test id (``\\x1b``, ``\\n``, ``\\udcff``), but those in ``keep`` (a failure's
    text keeps its newlines). What a report or a test id puts into terminal text then cannot clear
    the screen, colour it, retitle the window or start a line of its own; anything else printable,
    ``test_ünïcode[α-β]`` too, is left as it is. Escaping twice changes nothing more."""
    if _UNPRINTABLE.search(text) is None:
        return text
    if not keep:
        return _UNPRINTABLE.sub(_escape, text)
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


def plural(n: int, word: str, words: str = "") -> str:
    """``1 test``, ``2 tests``; ``words`` where the plural is not ``word + "s"`` (processes)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as aligned columns, each cell escaped (a cell may be a test id); the last column (a
    test id, the longest) is not padded."""
    if not rows:
        return []
    rows = [[escaped(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


def shown(rows: tuple[Any, ...] | list[Any], verbosity: int) -> list[Any]:
    """The rows of a list a failure shows: the first under -q, every one otherwise."""
    return list(rows[:1]) if verbosity < 0 else list(rows)


def files_lines(files: tuple[str, ...]) -> list[str]:
    """How to read what a failing check left: the pprof command for its profiles, and the rest."""
    if not files:
        return []

    files = tuple(short_path(f) if os.path.isabs(f) else f for f in files)
    profiles = [f for f in files if f.endswith(".pb.gz")]
    others = [f for f in files if not f.endswith(".pb.gz")]
    lines = []
    if len(profiles) == 2:
        lines.append(f"  what grew, by the stack that made it: pprof -top --diff_base {profiles[0]} {profiles[1]}")
    elif profiles:
        lines.append(f"  what was held, by the stack that made it: pprof -top {profiles[0]}")
    lines += [f"  timeline: {f}" for f in others if f.endswith(".svg")]
    lines += [f"  {f}" for f in others if not f.endswith(".svg")]  # a note that the files could not be written
    return lines


def files_not_written(directory: str, error: BaseException) -> str:
    return f"(no files: writing to {directory} failed: {type(error).__name__}: {error})"
