"""Which file already at an output's path the plugin may replace: none but its own.

A typo such as ``pytest --tpumem --tpumem-json test_x.py`` (a test file taken as the option's
value) must not overwrite the test source. So every file the plugin writes may replace only an
empty file or one of its own, told by the first bytes of the file: a JSON report or baseline, a
flight recorder, an HTML page, an SVG picture, a device-memory profile (gzipped pprof), or the
figures for a benchmark chart (telling.benchmark). A job summary is appended to, never replaced:
only to an empty file or text (``may_append``). Nothing here opens a file: the caller reads the
head (telling.files.head)."""

from __future__ import annotations

import re
import zlib

HEAD_BYTES = 65536  # how much of a file is read to tell what it is

_SCHEMA = re.compile(rb'\A\s*\{\s*"schema"\s*:\s*"pytest-tpumem-(report|ledger)"')
_SVG = b'<svg xmlns="http://www.w3.org/2000/svg"'
_SVG_TITLES = (b">pytest-tpumem ledger", b">leak_check: growth since the baseline")  # the session's, a leak check's
_GZIP = b"\x1f\x8b"
BENCHMARK_START = b'[\n {\n  "extra": "pytest-tpumem'  # how telling.benchmark.dumps begins a file
_PYTHON = re.compile(
    r"^[ \t]*(import \w|from [\w.]+ import |def \w|async def \w|class \w|@\w|if __name__ ==|#!.*python)", re.M
)


def ours(head: bytes) -> str | None:
    """What file of the plugin's ``head`` (a file's first HEAD_BYTES) begins: "report" (a JSON
    report or baseline), "recorder", "page", "picture", "profile" or "benchmark"; None where it is
    none of them (an empty head too)."""
    schema = _SCHEMA.match(head)
    if schema:
        return "report" if schema.group(1) == b"report" else "recorder"
    text = head.lstrip()
    if text[:15].lower() == b"<!doctype html>" and b"<title>pytest-tpumem" in text:
        return "page"
    if text.startswith(_SVG) and any(title in text for title in _SVG_TITLES):
        return "picture"
    if head.startswith(_GZIP) and _pprof(head):
        return "profile"
    if head.startswith(BENCHMARK_START):
        return "benchmark"
    return None


def _pprof(head: bytes) -> bool:
    """A gzip stream whose content starts as jax's device-memory profile does (a pprof Profile:
    field 1, a length-delimited sample type)."""
    try:
        content = zlib.decompressobj(wbits=31).decompress(head, 16)
    except zlib.error:
        return False
    return content[:1] == b"\x0a"


def may_replace(head: bytes) -> bool:
    """Whether a file that begins with ``head`` may be replaced: an empty one, or the plugin's own."""
    return head == b"" or ours(head) is not None


def may_append(head: bytes) -> bool:
    """Whether a Markdown summary may be appended to a file that begins with ``head``: an empty one,
    or text (another step's summary); never a file of the plugin's, a program, an archive, binary,
    Python source, JSON, XML or HTML (a typo such as ``--tpumem-summary test_x.py``)."""
    return seems(head) == "a text file"  # an empty head too


def seems(head: bytes) -> str:
    """What a file that is not the plugin's seems to be, in a few words, for the line that refuses it."""
    if head.startswith(_GZIP):
        return "a gzip file"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    if head.startswith(b"\x7fELF"):
        return "a program"
    if b"\x00" in head:
        return "a binary file"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not only a character cut at the end of the head
            return "a binary file"
        text = head[: e.start].decode("utf-8")
    if _PYTHON.search(text):
        return "Python source"
    start = text.lstrip()[:1]
    if start in ("{", "["):
        return "JSON that pytest-tpumem did not write"
    if start == "<":
        return "XML or HTML that pytest-tpumem did not write"
    return "a text file"
