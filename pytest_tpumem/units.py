"""Byte sizes: parse what users write ("20GB", "1.5GiB", 512) and print sizes for people.

What format_size prints ("40.0MB", "98.3kB") parses back to the same number of bytes."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

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
ACCEPTED = (
    'an int of bytes or a string with a unit: "512MB", "20GB" (10^9), "1.5GiB" (2^30), "64B"; units: '
    + ", ".join(_UNITS)
)
_SIZE = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$"  # ASCII digits only: "١٢MB" is not a size  # compiled (and cached by re) on first use, not at import


MAX_SIZE = 2**63 - 1  # the largest size taken: more than any memory, and what JSON readers keep exact as int64


class SizeError(ValueError):
    """A size that cannot be parsed; the message names the value and what is accepted."""


def shown_value(value: object) -> str:
    """A value as the error names it, cut short past 40 characters (a size of 400 nines)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _unknown_unit(unit: str, value: str, number: str) -> str:
    """What to write instead of a unit that is not one of _UNITS."""
    guess = {"k": "kB", "K": "kB", "m": "MB", "M": "MB", "g": "GB", "G": "GB", "t": "TB", "T": "TB"}.get(unit[:1])
    if guess and unit.lower() in (unit[:1].lower(), unit[:1].lower() + "b", unit[:1].lower() + "ib"):
        binary = guess[0].upper() + "iB"  # KiB, MiB, GiB, TiB
        return (
            f"unknown unit {unit!r} in {value!r}: write {number}{guess} ({guess} is 10^{_POWER[guess]} bytes) or "
            f'{number}{binary} (2^{_POWER[guess] // 3 * 10}); XLA\'s messages ("19.54G") count in {binary}'
        )
    return f"unknown unit {unit!r} in {value!r}; units are case-sensitive: {', '.join(_UNITS)}"


_POWER = {"kB": 3, "MB": 6, "GB": 9, "TB": 12}


def parse_size(value: object, *, what: str = "size", allow_zero: bool = False) -> int:
    """Return ``value`` in bytes. ``what`` names where the value came from, for the error.

    An int is bytes; a string needs a unit ("10" is refused: 10 bytes is never what a budget or
    threshold means; "10B" says it). Decimal fractions are exact ("64.1kB" is 64100 bytes), rounded
    to the nearest byte; a size over MAX_SIZE is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SizeError(f"{what}: {shown_value(value)} is not a size; expected {ACCEPTED}")
    if isinstance(value, int):
        n = value
    else:
        m = re.match(_SIZE, value)
        if not m:
            raise SizeError(f"{what}: {shown_value(value)} is not a size; expected {ACCEPTED}")
        number, unit = m.groups()
        if len(number.split(".")[0].lstrip("0")) > 20:  # more digits than any byte count: no Decimal of 400 nines
            raise SizeError(f"{what}: {shown_value(value)} is larger than any memory (at most {MAX_SIZE} bytes)")
        if not unit and Decimal(number) == 0 and not allow_zero:
            raise SizeError(f"{what}: {value!r} must be more than 0 bytes; expected {ACCEPTED}")
        if not unit:
            raise SizeError(
                f"{what}: {value!r} has no unit: write {number}MB (10^6 bytes), {number}GB, or {number}B for bytes; "
                f"expected {ACCEPTED}"
            )
        if unit not in _UNITS:
            raise SizeError(f"{what}: {_unknown_unit(unit, value, number)}")
        n = int((Decimal(number) * _UNITS[unit]).to_integral_value(ROUND_HALF_UP))
    if n > MAX_SIZE:
        raise SizeError(f"{what}: {shown_value(value)} is larger than any memory (at most {MAX_SIZE} bytes)")
    if n < 0 or (n == 0 and not allow_zero):
        raise SizeError(
            f"{what}: {value!r} must be {'at least 0' if allow_zero else 'more than 0'} bytes; expected {ACCEPTED}"
        )
    return n


def format_size(n: float | int | None, digits: int = 1) -> str:
    """A human size in decimal units (1 MB = 10^6 bytes), matching what users write in budgets;
    what it prints parses back (parse_size) to the printed value exactly."""
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{sign}{n / scale:.{digits}f}{unit}"
    return f"{sign}{int(n)}B"


def format_apart(a: int, b: int) -> tuple[str, str]:
    """Two sizes printed so that different ones read differently ("64.12kB" and "64.1kB", not
    "64.1kB" twice in "peak 64.1kB is over the budget of 64.1kB"): more digits where one is not
    enough, bytes where none are."""
    if a == b or format_size(a) != format_size(b):
        return format_size(a), format_size(b)
    for digits in (2, 3):
        x, y = format_size(a, digits), format_size(b, digits)
        if x != y:
            return x, y
    return f"{a:,}B", f"{b:,}B"


def format_delta(n: float | int) -> str:
    """A signed human size: +1.2MB, -3.0kB, +0B."""
    s = format_size(n)
    return s if s.startswith("-") else "+" + s
