"""Options and ini values, resolved once: command line, else ini, else default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .units import SizeError, parse_size

DEFAULT_LEAK_THRESHOLD = 100 * 10**6
DEFAULT_TOP = 20
DEFAULT_SAMPLE_MS = 5.0

# (dest / ini name, command-line flag, help, kind)
OPTIONS = (
    ("tpumem", "--tpumem", "switch pytest-tpumem on: enforce max_hbm and leak_check markers, print the summary", "bool"),
    ("tpumem_max_hbm", "--tpumem-max-hbm", "default peak device-memory budget for every test, e.g. 16GB (a marker wins)", "size"),
    ("tpumem_leak_threshold", "--tpumem-leak-threshold", "default leak threshold per iteration (default 100MB)", "size"),
    ("tpumem_top", "--tpumem-top", f"rows in the tpumem summary, worst first (default {DEFAULT_TOP}; 0 hides it)", "int"),
    ("tpumem_target", "--tpumem-target", "default TPU target for the hbm_estimate fixture, e.g. v5e or v6e:4x4 (needs libtpu)", "target"),
    ("tpumem_sample_ms", "--tpumem-sample-ms", f"interval of the bytes-in-use sampler in ms (default {DEFAULT_SAMPLE_MS:g}; 0 turns it off)", "float"),
)


class SettingError(ValueError):
    """A bad option or ini value; the plugin turns it into a pytest UsageError."""


@dataclass(frozen=True)
class Settings:
    enabled: bool = False
    max_hbm: int | None = None
    leak_threshold: int = DEFAULT_LEAK_THRESHOLD
    top: int = DEFAULT_TOP
    sample_interval: float = DEFAULT_SAMPLE_MS / 1000
    target: str | None = None  # a TPU topology, "v5e:2x2"
    given: frozenset[str] = frozenset()  # the options set on the command line or in the ini


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _convert(value: Any, kind: str, where: str) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise SettingError(f"{where}: {value!r} is not a boolean; use true or false")
    if kind == "size":
        try:
            return parse_size(value, what=where)
        except SizeError as e:
            raise SettingError(str(e)) from None
    if kind == "int":
        try:
            n = int(str(value).strip())
        except ValueError:
            n = -1
        if n < 0:
            raise SettingError(f"{where}: {value!r} is not a whole number >= 0")
        return n
    if kind == "float":
        try:
            x = float(str(value).strip())
        except ValueError:
            x = -1.0
        if not 0 <= x <= 60_000:  # also rejects nan and inf
            raise SettingError(f"{where}: {value!r} is not a number from 0 to 60000")
        return x
    if kind == "target":
        from .targets import TargetError, parse_target

        try:
            return parse_target(value, what=where).topology
        except TargetError as e:
            raise SettingError(str(e)) from None
    raise AssertionError(kind)


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any]) -> Settings:
    """Build the frozen settings; raise SettingError naming the value and where it came from."""
    values: dict[str, Any] = {}
    for name, flag, _help, kind in OPTIONS:
        raw, where = getoption(name), flag
        if raw is None:
            where = f"ini {name}"
            try:
                raw = getini(name)
            except Exception as e:  # pytest's own type check of the ini value (a UsageError in pytest 9)
                hint = ' (write sizes as strings, e.g. "16GB")' if kind == "size" else ""
                raise SettingError(f"{where}: {e}{hint}") from None
            if raw is None or (isinstance(raw, str) and raw.strip() == "" and kind != "bool"):
                continue
        values[name] = _convert(raw, kind, where)
    return Settings(
        enabled=values.get("tpumem", False),
        max_hbm=values.get("tpumem_max_hbm"),
        leak_threshold=values.get("tpumem_leak_threshold", DEFAULT_LEAK_THRESHOLD),
        top=values.get("tpumem_top", DEFAULT_TOP),
        sample_interval=values.get("tpumem_sample_ms", DEFAULT_SAMPLE_MS) / 1000,
        target=values.get("tpumem_target"),
        given=frozenset(values),
    )
