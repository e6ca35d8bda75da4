"""Switched on, the plugin must not change what a suite sees: no jax backend started before the
suite's modules configure it (at any verbosity, serial and under pytest-xdist), and an unmeasured
test runs in the same process state as without the plugin."""

import json

import pytest

# what a run imports and starts is the point: each run is a new interpreter (tests/fresh.py)
pytestmark = pytest.mark.interpreter

# A test module that configures jax's devices when it is imported, as JAX libraries' sharding tests
# do. If anything started the backend before collection, the config update raises (the whole module
# errors at collection) or the device count is not what the module asked for.
CONFIGURES_AT_IMPORT = """
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import pytest

def test_sees_the_devices_it_asked_for():
    assert len(jax.devices()) == 8

@pytest.mark.max_hbm("1GB")
def test_measured():
    x = jnp.ones((1000,), jnp.float32)
    assert len(jax.devices()) == 8
"""

XLA_FLAGS_AT_IMPORT = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax
import pytest

@pytest.mark.leak_check(iterations=1)
def test_sees_the_devices_it_asked_for():
    assert len(jax.devices()) == 4
"""


def _run(pytester, monkeypatch, source, args):
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the module sets the device count itself
    pytester.makepyfile(test_configures=source)
    return pytester.runpytest_subprocess(*args)


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize("verbosity", ["-q", None, "-v"], ids=["quiet", "default", "verbose"])
def test_a_module_that_sets_the_device_count_at_import_is_unaffected(pytester, monkeypatch, verbosity, xdist):
    if xdist:
        pytest.importorskip("xdist")
    args = ["--tpumem", *xdist, *([verbosity] if verbosity else [])]
    result = _run(pytester, monkeypatch, CONFIGURES_AT_IMPORT, args)
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "should be updated before backends are initialized" not in out
    if verbosity == "-q":
        assert "tpumem: " not in out  # no header under -q; the summary keeps to its totals
    else:
        # The header says what it can without starting the backend; the devices come in the summary.
        header = out.split("= tpumem =")[0]
        assert "local devices" not in header
        result.stdout.fnmatch_lines(
            [
                "tpumem: *devices are*",
                "*= tpumem =*",
                "tpumem: jax *, backend cpu (cpu), 8 local devices: cpu:0, cpu:1, *, cpu:7",
                "tpumem: sources: live arrays, *",
                "ok *cpu:0 4.0kB *1.0GB*test_configures.py::test_measured",
            ]
        )


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_xla_flags_set_at_import_are_honoured(pytester, monkeypatch, xdist):
    if xdist:
        pytest.importorskip("xdist")
    result = _run(pytester, monkeypatch, XLA_FLAGS_AT_IMPORT, ["--tpumem", *xdist])
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tpumem: jax *, backend cpu (cpu), 4 local devices: cpu:0, cpu:1, cpu:2, cpu:3"])


def test_a_backend_the_suites_conftest_started_is_shown_in_the_header(pytester):
    pytester.makeconftest("import jax\njax.devices()\n")
    pytester.makepyfile("def test_plain(): pass")
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1)
    header = result.stdout.str().split("collected")[0]
    assert "tpumem: jax " in header and "local devices: cpu:0, cpu:1" in header


SNAPSHOT = """
import gc, json, logging, os, sys, threading, warnings

import pytest


def snapshot(tag):
    root = logging.getLogger()
    state = {
        "profile": repr(sys.getprofile()),
        "trace": repr(sys.gettrace()),
        "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count() > 0],
        "threads": sorted(t.name for t in threading.enumerate()),
        "warnings filters": [repr(f) for f in warnings.filters],
        "logging": [root.level, sorted(type(h).__name__ for h in root.handlers), logging.root.manager.disable],
        "environment": {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "TPUMEM_SNAPSHOT")},
        "jax imported": "jax" in sys.modules,
    }
    if "jax" in sys.modules:
        import jax
        from jax._src import xla_bridge

        state["backend started"] = xla_bridge.backends_are_initialized()
        state["jax config"] = {k: repr(v) for k, v in sorted(jax.config.values.items())}
    with open(os.environ["TPUMEM_SNAPSHOT"], "a") as f:
        f.write(json.dumps([tag, state]) + "\\n")


def test_1_unmeasured_first():
    snapshot("first")


@pytest.mark.max_hbm("1GB")
def test_2_budgeted():
    import jax.numpy as jnp

    x = jnp.ones((1_000_000,), jnp.float32)
    assert float(x.sum()) == 1_000_000


@pytest.mark.leak_check(iterations=2)
def test_3_leak_checked():
    import jax.numpy as jnp

    assert float(jnp.arange(10).sum()) == 45


def test_4_unmeasured_after_measured_ones():
    snapshot("after")
"""


def test_an_unmeasured_test_sees_the_same_process_state_with_the_plugin_on(pytester, monkeypatch, tmp_path):
    """Profile and trace hooks, gc, threads, warnings filters, logging, environment, jax's config and
    backend: the same for an unmeasured test, before and after measured ones, with and without --tpumem."""
    pytester.makepyfile(test_state=SNAPSHOT)
    snapshots = {}
    for label, args in (("off", ()), ("on", ("--tpumem",))):
        out = tmp_path / f"{label}.jsonl"
        monkeypatch.setenv("TPUMEM_SNAPSHOT", str(out))
        pytester.runpytest_subprocess("-p", "no:cacheprovider", *args).assert_outcomes(passed=4)
        snapshots[label] = dict(json.loads(line) for line in out.read_text().splitlines())
    for tag in ("first", "after"):
        on, off = snapshots["on"][tag], snapshots["off"][tag]
        changed = {key: (off.get(key), on.get(key)) for key in off.keys() | on.keys() if on.get(key) != off.get(key)}
        for key in ("environment", "jax config"):  # name the entries, not the whole dict
            if key in changed:
                a, b = changed[key]
                changed[key] = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        assert not changed, f"{tag}: (off, on) {changed}"
    assert snapshots["off"]["first"]["jax imported"] is False  # the check can see a change
    assert snapshots["off"]["after"]["backend started"] is True
