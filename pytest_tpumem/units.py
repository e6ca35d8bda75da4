"""Byte sizes: parse what users write ("20GB", "1.5GiB", 512) and print sizes for people.

What format_size prints ("40.0MB", "98.3kB") parses back to the same number of bytes."""

from __future__ import annotations

import re

_UNITS = {
    "B": 1,
    "kB": 10**3,  # what format_size prints (SI spelling)
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
ACCEPTED = 'an int of bytes or a string like "512MB", "20GB" (10^9) or "1.5GiB" (2^30); units: ' + ", ".join(_UNITS)
_SIZE = r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$"  # compiled (and cached by re) on first use, not at import


class SizeError(ValueError):
    """A size that cannot be parsed; the message names the value and what is accepted."""


def parse_size(value: object, *, what: str = "size", allow_zero: bool = False) -> int:
    """Return ``value`` in bytes. ``what`` names where the value came from, for the error."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SizeError(f"{what}: {value!r} is not a size; expected {ACCEPTED}")
    if isinstance(value, int):
        n = value
    else:
        m = re.match(_SIZE, value)
        if not m:
            raise SizeError(f"{what}: {value!r} is not a size; expected {ACCEPTED}")
        number, unit = m.groups()
        unit = unit or "B"
        if unit not in _UNITS:
            raise SizeError(f"{what}: unknown unit {unit!r} in {value!r}; units are case-sensitive: {', '.join(_UNITS)}")
        n = int(float(number) * _UNITS[unit])
    if n < 0 or (n == 0 and not allow_zero):
        raise SizeError(f"{what}: {value!r} must be {'at least 0' if allow_zero else 'more than 0'} bytes; expected {ACCEPTED}")
    return n


def format_size(n: float | int | None) -> str:
    """A human size in decimal units (1 MB = 10^6 bytes), matching what users write in budgets."""
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{sign}{n / scale:.1f}{unit}"
    return f"{sign}{int(n)}B"


def format_delta(n: float | int) -> str:
    """A signed human size: +1.2MB, -3.0kB, +0B."""
    s = format_size(n)
    return s if s.startswith("-") else "+" + s
