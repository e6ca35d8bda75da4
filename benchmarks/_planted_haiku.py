"""Planted memory leaks inside haiku's own functions, for a chosen set of tests only (for
bench_third_party.py; not a test of this project).

Load with ``PYTHONPATH=benchmarks pytest -p _planted_haiku ...``. Nothing in site-packages is
edited: at ``pytest_configure`` two haiku methods are replaced on their
classes by wrappers that call the kept original:

* DEVICE leak: ``haiku._src.basic.Linear.__call__`` (== ``hk.Linear.__call__``): each call,
  while a chosen "device" test's call phase runs, keeps a new 16 MB float32 jax array
  (4_000_000 elements) in ``DEVICE_KEPT``. It is made under ``jax.ensure_compile_time_eval()``
  so that it is a concrete device array even when the call is being traced.
* HOST leak: ``haiku._src.layer_norm.LayerNorm.__call__`` (== ``hk.LayerNorm.__call__``): each
  call, while a chosen "host" test's call phase runs, keeps a new 20 MB numpy array
  (5_000_000 float32) in ``HOST_KEPT``.

Options:
  --planted-record PATH   write {nodeid: {"kind": ..., "calls": N}} for the chosen tests that ran
                          (N = calls of the planted function during the test's call phase; in a
                          plain run the body runs once, so N is calls per run)
  --planted-off           count calls but keep nothing (the clean comparison)
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

DEVICE_ELEMENTS = 4_000_000  # float32: 16_000_000 bytes per call
HOST_ELEMENTS = 5_000_000  # float32: 20_000_000 bytes per call
DEVICE_BYTES = DEVICE_ELEMENTS * 4
HOST_BYTES = HOST_ELEMENTS * 4

# node ids (relative to site-packages) -> kind
PLANTED: dict[str, str] = {
    # hk.Linear.__call__ (device): each is init + apply of a transformed function, no jit
    "haiku/_src/basic_test.py::LinearTest::test_linear_rank1": "device",
    "haiku/_src/basic_test.py::LinearTest::test_linear_rank2": "device",
    "haiku/_src/basic_test.py::LinearTest::test_linear_rank3": "device",
    "haiku/_src/basic_test.py::LinearTest::test_linear_without_bias_has_zero_in_null_space": "device",
    "haiku/_src/basic_test.py::BasicTest::test_sequential_params": "device",
    # hk.LayerNorm.__call__ (host): test_utils.transform_and_run (init + apply), no jit
    "haiku/_src/layer_norm_test.py::LayerNormTest::test_connection": "host",
    "haiku/_src/layer_norm_test.py::LayerNormTest::test_simple_case0": "host",
    "haiku/_src/layer_norm_test.py::LayerNormTest::test_simple_case_var1": "host",
    "haiku/_src/layer_norm_test.py::LayerNormTest::test_simple_case_tensor": "host",
    "haiku/_src/layer_norm_test.py::LayerNormTest::test_slice_axis0": "host",
}

DEVICE_KEPT: list[Any] = []
HOST_KEPT: list[Any] = []

_current: dict[str, Any] = {"kind": None, "nodeid": None}
_calls: dict[str, int] = {}
_off = False
_originals: dict[str, Any] = {}


def _note_call(kind: str) -> bool:
    """Count a call of the planted function of ``kind``; True where it should leak now."""
    if _current["kind"] != kind:
        return False
    nodeid = _current["nodeid"]
    _calls[nodeid] = _calls.get(nodeid, 0) + 1
    return not _off


def _keep_device() -> None:
    import jax
    import jax.numpy as jnp

    with jax.ensure_compile_time_eval():
        a = jnp.full((DEVICE_ELEMENTS,), 1.0, jnp.float32)
    if isinstance(a, jax.core.Tracer) or not isinstance(a, jax.Array):
        raise AssertionError(f"planted_leaks: kept device array is not concrete: {type(a)!r}")
    a.block_until_ready()
    assert a.nbytes == DEVICE_BYTES
    DEVICE_KEPT.append(a)


def _keep_host() -> None:
    import numpy as np

    a = np.full(HOST_ELEMENTS, 1.0, np.float32)
    assert a.nbytes == HOST_BYTES
    HOST_KEPT.append(a)


def _plant(cls: Any, key: str, kind: str, keep: Any) -> None:
    original = cls.__dict__["__call__"]
    _originals[key] = (cls, original)

    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        if _note_call(kind):
            keep()
        return original(self, *args, **kwargs)

    __call__.__planted_original__ = original  # type: ignore[attr-defined]
    cls.__call__ = __call__


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("planted_leaks")
    group.addoption(
        "--planted-record",
        default=None,
        metavar="PATH",
        help="write {nodeid: {kind, calls}} for the planted tests that ran",
    )
    group.addoption(
        "--planted-off",
        action="store_true",
        default=False,
        help="count calls of the planted functions but leak nothing",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _off
    _off = bool(config.getoption("--planted-off"))
    from haiku._src import basic, layer_norm

    if "device" not in _originals:
        _plant(basic.Linear, "device", "device", _keep_device)
    if "host" not in _originals:
        _plant(layer_norm.LayerNorm, "host", "host", _keep_host)


def pytest_unconfigure(config: pytest.Config) -> None:
    for cls, original in _originals.values():
        cls.__call__ = original
    _originals.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    kind = PLANTED.get(item.nodeid)
    if kind is None:
        return (yield)
    _calls.setdefault(item.nodeid, 0)
    _current["kind"], _current["nodeid"] = kind, item.nodeid
    try:
        return (yield)
    finally:
        _current["kind"], _current["nodeid"] = None, None


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--planted-record")
    if not path:
        return
    out = {nodeid: {"kind": PLANTED[nodeid], "calls": n} for nodeid, n in sorted(_calls.items())}
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


def pytest_report_header(config: pytest.Config) -> str:
    state = "off (counting only)" if _off else "on"
    return (
        f"planted_leaks: {state}; device leak in haiku Linear.__call__ (16 MB/call), "
        f"host leak in haiku LayerNorm.__call__ (20 MB/call), {len(PLANTED)} planted tests"
    )
