"""The markers: their help text and their parsers, side by side so they cannot drift apart.

A marker's arguments are parsed by calling a function with the marker's signature; anything wrong
becomes a MarkerError whose one line names the marker, the value and what is accepted.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .units import ACCEPTED, SizeError, parse_size

MAX_HBM_HELP = (
    'max_hbm(limit=None, target=None): fail the test when its peak device memory on any local device '
    'exceeds limit ("20GB", "1.5GiB", int bytes); with target ("v5e", "v6e:4x4", or --tpumem-target) '
    "the jitted programs it runs are also compiled for that TPU and judged there (no limit: the chip's "
    "usable HBM). Needs --tpumem."
)
LEAK_CHECK_HELP = (
    'leak_check(iterations=3, warmup=1, threshold="100MB", clear_caches=True): run the test body '
    "warmup+iterations times (fixtures set up once), with jax.clear_caches() in between, and fail on "
    "per-iteration growth at or above threshold. Needs --tpumem."
)


class MarkerError(ValueError):
    """Bad marker arguments; the message is the one line the test fails with."""


class MaxHbm(NamedTuple):
    limit: int | None  # None: the target's usable HBM
    target: Any  # a targets.Target, or None: --tpumem-target where set


class LeakOptions(NamedTuple):
    iterations: int = 3
    warmup: int = 1
    threshold: int | None = None  # None: the session default
    clear_caches: bool = True


def _max_hbm(limit: Any = None, *, target: Any = None) -> MaxHbm:
    from .targets import parse_target

    chosen = None if target is None else parse_target(target, what="target")
    return MaxHbm(None if limit is None else parse_size(limit, what="limit"), chosen)


def _leak_check(*, iterations: int = 3, warmup: int = 1, threshold: Any = None, clear_caches: bool = True) -> LeakOptions:
    from .leak import validate

    validate(iterations, warmup)
    if not isinstance(clear_caches, bool):
        raise ValueError(f"clear_caches={clear_caches!r}: expected True or False")
    size = None if threshold is None else parse_size(threshold, what="threshold")
    return LeakOptions(iterations, warmup, size, clear_caches)


def _call(name: str, parser: Any, mark: Any, accepted: str) -> Any:
    try:
        return parser(*mark.args, **mark.kwargs)
    except TypeError as e:
        what = str(e).replace(parser.__name__ + "()", name + "()")
        raise MarkerError(f"@pytest.mark.{name}{spell(mark)}: {what}; accepted: {accepted}") from None
    except (SizeError, ValueError) as e:
        raise MarkerError(f"@pytest.mark.{name}{spell(mark)}: {e}") from None


def spell(mark: Any) -> str:
    """The marker's arguments as the user wrote them: ``('20GB')``."""
    parts = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def parse_max_hbm(mark: Any) -> MaxHbm:
    """Budget in bytes and TPU target from a ``max_hbm`` mark."""
    return _call("max_hbm", _max_hbm, mark, "max_hbm(limit, target=None) with limit " + ACCEPTED)


def parse_leak_check(mark: Any) -> LeakOptions:
    """Options from a ``leak_check`` mark."""
    return _call("leak_check", _leak_check, mark, 'leak_check(iterations=3, warmup=1, threshold="100MB", clear_caches=True)')
