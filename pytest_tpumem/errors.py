"""Error text every layer may need, with no layer of its own: a library error's first line, how
to get libtpu, and ReportError, for a report that cannot be used. (telling/ words everything else;
readings/ and targets.py import only this.)"""

from __future__ import annotations

LIBTPU_INSTALL = (
    'pip install "jax[tpu]" (from a checkout of pytest-tpumem: pip install ".[tpu]"; '
    'once it is published: pip install "pytest-tpumem[tpu]")'
)


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of an error's message (its type's name where it has none); one longer than
    ``limit`` is cut at the last space before it (never inside a word) and ends with "..."."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if len(line) <= limit:
        return line
    cut = line[: max(limit - 3, 1)]
    space = cut.rfind(" ")
    return (cut[:space] if space > 0 else cut).rstrip(" ,;:") + "..."


class ReportError(ValueError):
    """A report that cannot be used: missing, unreadable, not JSON, or not in this schema. The
    message names the file and what is wrong with it."""
