"""What a leak check is asked, checked before anything runs, for the marker, the fixture and
check_leaks alike: each bad value one ValueError naming it and what is accepted, where it came from
said by the caller. Imports only units and defaults: glue/options.py loads it without --tpumem."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..units import SizeError, parse_size

JUDGED = "True (judged with the threshold) or False (not judged)"  # host's two bools, as check_leaks spells them


@dataclass(frozen=True)
class LeakOptions:
    """A leak check's options, made once (``parse``) where the check is asked for and passed down whole."""

    iterations: int = defaults.ITERATIONS  # runs judged after the warmup
    warmup: int = defaults.WARMUP  # runs before the baseline
    threshold: int = defaults.LEAK_THRESHOLD  # bytes of growth per iteration that make a leak
    clear_caches: bool = defaults.CLEAR_CACHES  # jax.clear_caches() after every run
    host: bool | int = True  # host RSS judged with the threshold (True), not judged (False), or with its own (bytes)
    confirm_cleared: bool = False  # caches kept between runs (the sweep): a growth is confirmed with them cleared

    @classmethod
    def parse(
        cls,
        iterations: Any = defaults.ITERATIONS,
        warmup: Any = defaults.WARMUP,
        threshold: Any = defaults.LEAK_THRESHOLD,
        clear_caches: Any = defaults.CLEAR_CACHES,
        host: Any = True,
        confirm_cleared: bool = False,
        *,
        run: LeakOptions | None = None,
    ) -> LeakOptions:
        """The options as a user writes them (a size as bytes or "100MB"); ValueError naming the
        first bad one, in that order, and what is accepted. ``run``: the run's options (a marker's
        and the fixture's: --tpumem-leak-threshold, --tpumem-leak-host), whose threshold and host a
        None stands for; without it None is refused as any other value."""
        if run is not None:
            threshold = run.threshold if threshold is None else threshold
            host = run.host if host is None else host
        for name, value, least, most in (
            ("iterations", iterations, 1, defaults.MAX_ITERATIONS),
            ("warmup", warmup, 0, defaults.MAX_WARMUP),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
                raise ValueError(f"{name}={_short_repr(value)}: expected an int from {least} to {most}")
        if not isinstance(clear_caches, bool):
            raise ValueError(f"clear_caches={clear_caches!r}: expected True or False")
        limit = parse_size(threshold, what="threshold")
        judged = parse_host(host)
        if confirm_cleared and clear_caches:
            raise ValueError(
                "confirm_cleared=True: expected clear_caches=False (with clear_caches=True every reading is after clearing)"
            )
        return cls(iterations, warmup, limit, clear_caches, judged, confirm_cleared)


def parse_host(value: Any, what: str = "host", bools: str = JUDGED) -> bool | int:
    """``host``: True (host RSS judged with the threshold), False (not judged) or a size (its own
    threshold); otherwise ValueError naming ``what``, the value and ``bools`` (how the caller spells
    the two bools: an option's are on and off)."""
    if isinstance(value, bool):
        return value
    try:
        return parse_size(value, what=what)
    except SizeError as e:
        raise ValueError(f"{e}; or {bools}") from None


def check_callable(fn: Any) -> None:
    """ValueError (one line naming it) for a ``fn`` a leak check cannot run: not callable, or one
    whose call runs none of its body (async, generator)."""
    if not callable(fn):
        raise ValueError(f"fn={_short_repr(fn)} is not callable; pass the function to run, then its arguments")
    target = getattr(fn, "func", fn)  # a functools.partial's function
    if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
        raise ValueError(
            f"fn={_short_repr(fn)} is an async function: calling it only makes a coroutine, and its body would never "
            "run; pass a function that runs it, e.g. lambda: asyncio.run(fn())"
        )
    if inspect.isgeneratorfunction(target):
        raise ValueError(
            f"fn={_short_repr(fn)} is a generator function: calling it runs none of its body; pass a function that "
            "exhausts it, e.g. lambda: list(fn())"
        )


def _short_repr(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text[:60] + ("..." if len(text) > 60 else "")
