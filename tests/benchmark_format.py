"""github-action-benchmark's input for its ``customSmallerIsBetter`` tool, as the action reads it,
written down from its source (benchmark-action/github-action-benchmark v1.22.0, commit c38cce98):

- src/extract.ts, ``extractCustomBenchmarkResult``: ``BenchmarkResults.parse(JSON.parse(output))``,
  where ``BenchmarkResults = z.array(BenchmarkResult)`` and ``BenchmarkResult = z.object({name:
  z.coerce.string(), value: z.coerce.number(), range: z.coerce.string().optional(), unit:
  z.coerce.string(), extra: z.coerce.string().optional()})`` (zod ^4.1.5: an object drops keys it
  does not name; ``z.number()`` refuses NaN and infinities; ``z.coerce`` applies JavaScript's
  ``String()``/``Number()`` first).
- src/extract.ts, ``extractResult``: an empty list is an error ("No benchmark result was found").
- src/write.ts, ``getRatio``: smaller is better, so ``current / previous``; 1 where both are 0.

``parse`` does the same in Python, and is stricter in one place: a missing ``name`` or ``unit``
(which ``String(undefined)`` would make "undefined") is refused, as no writer means it.
"""

from __future__ import annotations

import json
import math
from typing import Any


class FormatError(ValueError):
    pass


def _js_string(value: Any) -> str:
    """JavaScript's String() of a JSON value (numbers as JavaScript writes them, for the cases here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if value is None:
        return "null"
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _js_number(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan


def parse(text: str) -> list[dict[str, Any]]:
    """The entries the action would chart from a file's ``text``; FormatError where it refuses it."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise FormatError("not a JSON array")
    if not data:
        raise FormatError("an empty list: the action finds no benchmark result")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise FormatError(f"entry {i} is not an object")
        for key in ("name", "unit", "value"):
            if key not in item:
                raise FormatError(f"entry {i} has no {key}")
        value = _js_number(item["value"])
        if not math.isfinite(value):
            raise FormatError(f"entry {i}: value {item['value']!r} is not a finite number")
        entry: dict[str, Any] = {"name": _js_string(item["name"]), "unit": _js_string(item["unit"])}
        entry["value"] = int(value) if value.is_integer() else value
        for key in ("range", "extra"):
            if key in item:  # optional(): absent stays absent; null is String(null)
                entry[key] = _js_string(item[key])
        out.append(entry)
    return out
