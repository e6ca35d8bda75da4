"""The markers: each is a function with the marker's signature, and its help (``pytest --markers``),
the "accepted:" part of its errors and the README come from that one signature.

A marker's arguments are parsed by calling its function with them; anything wrong becomes a
MarkerError whose one line names the marker, the value and what is accepted. Imported on every
pytest run (the help is registered then): functions only, nothing built at import.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..units import ACCEPTED, SizeError, format_size, parse_size

if TYPE_CHECKING:
    import pytest

    from ..decisions.leakoptions import LeakOptions


class MarkerError(ValueError):
    """Bad marker arguments; the message is the one line the test fails with."""


def max_hbm(limit: Any = None, *, target: Any = None) -> dict[str, Any]:
    """fail the test when its peak device memory on any local device exceeds limit ("20GB",
    "1.5GiB", int bytes): by default the memory the test itself uses, not what other tests left
    (--tpumem-budget-counts); with target ("v5e", "v6e:4x4", or --tpumem-target) the programs it
    runs are compiled for that TPU and judged there instead, the run's own figure only shown (no
    limit: the chip's usable HBM)."""
    from ..targets import parse_target

    chosen = None if target is None else parse_target(target, what="target")
    return {"limit": None if limit is None else parse_size(limit, what="limit"), "target": chosen}


def leak_check(
    enabled: bool = True,
    *,
    iterations: int = defaults.ITERATIONS,
    warmup: int = defaults.WARMUP,
    threshold: Any = None,
    clear_caches: bool = defaults.CLEAR_CACHES,
    host: Any = None,
) -> dict[str, Any]:
    """run the test body warmup+iterations times (fixtures set up once), with jax.clear_caches()
    in between, and fail on per-iteration growth at or above threshold (None: --tpumem-leak-threshold);
    host: host RSS judged with the threshold (True), with its own ("200MB") or not (False), None:
    --tpumem-leak-host; leak_check(False) exempts the test from --tpumem-leak-check=all."""
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled={enabled!r}: expected True or False")
    given = {
        "iterations": iterations,
        "warmup": warmup,
        "threshold": threshold,
        "clear_caches": clear_caches,
        "host": host,
    }
    return {"enabled": enabled, "given": given}  # LeakOptions.parse's arguments: see leak_options


MARKERS = (max_hbm, leak_check)


def signature(fn: Callable[..., Any]) -> str:
    """``leak_check(enabled=True, *, iterations=3, warmup=1, threshold=None, clear_caches=True, host=None)``"""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()]
    return f"{fn.__name__}{inspect.Signature(params)}"


def help_line(fn: Callable[..., Any]) -> str:
    """The line ``pytest --markers`` shows."""
    doc = " ".join((fn.__doc__ or "").split())
    extra = f" Sizes: {ACCEPTED}." if fn is max_hbm else f" Default threshold {format_size(defaults.LEAK_THRESHOLD)}."
    return f"{signature(fn)}: {doc}{extra} Needs --tpumem."


def spell(mark: pytest.Mark) -> str:
    """The marker's arguments as the user wrote them: ``('20GB')``."""
    parts = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def closest(item: Any, name: str) -> pytest.Mark | None:
    """The marker nearest the test (its function, then its class, then its module), as pytest's
    get_closest_marker; MarkerError where that node carries two of them (stacked decorators): one
    would be ignored without a word."""
    chain = getattr(item, "listchain", None)
    if chain is None:  # not a pytest node: its closest marker, as it gives it
        return item.get_closest_marker(name)
    for node in reversed(chain()):
        found = [m for m in getattr(node, "own_markers", ()) if m.name == name]
        if len(found) > 1:
            given = ", ".join(f"@pytest.mark.{name}{spell(m)}" for m in found)
            raise MarkerError(
                f"{given}: {len(found)} {name} markers on {node.name}; give one (the nearest of a function, class or module wins)"
            )
        if found:
            return found[0]
    return None


def parse(fn: Callable[..., dict[str, Any]], mark: pytest.Mark) -> dict[str, Any]:
    """The marker's arguments as ``fn`` parses them; MarkerError (one line) where they are wrong."""
    with _worded(fn, mark):
        return fn(*mark.args, **mark.kwargs)


def leak_options(mark: pytest.Mark, run: LeakOptions) -> LeakOptions | None:
    """The leak check a leak_check marker asks for, a threshold or host it leaves out ``run``'s (the
    run's settings); None for leak_check(False); MarkerError where its arguments are wrong."""
    from ..decisions.leakoptions import LeakOptions

    with _worded(leak_check, mark):
        parsed = leak_check(*mark.args, **mark.kwargs)
        options = LeakOptions.parse(**parsed["given"], run=run)  # checked even where it is switched off
    return options if parsed["enabled"] else None


@contextlib.contextmanager
def _worded(fn: Callable[..., Any], mark: pytest.Mark) -> Iterator[None]:
    """A bad argument of the marker as one line: MarkerError naming the marker as written."""
    try:
        yield
    except TypeError as e:
        raise MarkerError(f"@pytest.mark.{fn.__name__}{spell(mark)}: {e}; accepted: {signature(fn)}") from None
    except (SizeError, ValueError) as e:
        raise MarkerError(f"@pytest.mark.{fn.__name__}{spell(mark)}: {e}") from None
