"""A compiled-program leak planted inside libraries' own functions (for bench_sweep_programs.py; not
a test of this project): every call makes a new jit and keeps it in a list, as a registry or a
memo that forgets nothing would. One small program per call, kept by the list's jitted functions.

Load with ``PYTHONPATH=benchmarks pytest -p _planted_programs ...``. Nothing in site-packages is
edited: at ``pytest_configure`` these are replaced by wrappers that call the kept original:

* ``optax.apply_updates`` (and ``optax._src.update.apply_updates``, which optax's tests call);
* ``haiku._src.basic.Linear.__call__`` (== ``hk.Linear.__call__``).

The program is compiled under ``jax.ensure_compile_time_eval()``, so a call made while a jit
traces still compiles (and keeps) a program of its own.

Options:
  --planted-record PATH   write {nodeid: calls} for every test whose call phase called a planted
                          function (in a plain run the body runs once: calls per run)
  --planted-off           count the calls but keep nothing (the clean comparison)
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

KEPT: list[Any] = []  # the leak: every jitted function made, kept
_calls: dict[str, int] = {}
_state: dict[str, Any] = {"nodeid": None, "off": False}
_undo: list[Any] = []


def _plant_call() -> None:
    nodeid = _state["nodeid"]
    if nodeid is None:
        return
    _calls[nodeid] = _calls.get(nodeid, 0) + 1
    if _state["off"]:
        return
    import jax
    import jax.numpy as jnp

    step = jax.jit(lambda v: v * 2 + 1)
    KEPT.append(step)
    with jax.ensure_compile_time_eval():
        step(jnp.ones((4,), jnp.float32)).block_until_ready()


def _wrap(original: Any) -> Any:
    @functools.wraps(original)
    def planted(*args: Any, **kwargs: Any) -> Any:
        _plant_call()
        return original(*args, **kwargs)

    return planted


def _replace(owner: Any, name: str, replacement: Any) -> None:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    _undo.append(lambda: setattr(owner, name, original))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("planted_programs")
    group.addoption("--planted-record", default=None, metavar="PATH")
    group.addoption("--planted-off", action="store_true", default=False)


def pytest_configure(config: pytest.Config) -> None:
    _state["off"] = config.getoption("--planted-off")
    try:
        import optax
        from optax._src import update

        planted = _wrap(update.apply_updates)
        _replace(update, "apply_updates", planted)
        _replace(optax, "apply_updates", planted)
    except ImportError:
        pass
    try:
        from haiku._src import basic

        original = basic.Linear.__dict__["__call__"]

        @functools.wraps(original)
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            _plant_call()
            return original(self, *args, **kwargs)

        _replace(basic.Linear, "__call__", __call__)
    except ImportError:
        pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    _state["nodeid"] = item.nodeid
    try:
        return (yield)
    finally:
        _state["nodeid"] = None


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("--planted-record")
    if path:
        with open(path, "w") as f:
            json.dump(_calls, f, indent=1, sort_keys=True)
    while _undo:
        _undo.pop()()
