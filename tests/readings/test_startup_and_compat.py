"""libtpu's start-up noise is kept off the terminal, real errors are not; every private jax API is found here."""

import importlib.util
import os
import subprocess
import sys

import pytest

from pytest_tpumem.readings import jaxcompat
from pytest_tpumem.readings.devices import libtpu_startup_filtered

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="the filter is on only where libtpu is installed"
)

NOISE = (
    "Failed to find host bounds for accelerator type: WARNING: could not determine TPU accelerator type, please set env var `TPU_ACCELERATOR_TYPE` manually, otherwise libtpu.so may not properly initialize.\n"
    "WARNING: Logging before InitGoogle() is written to STDERR\n"
    "E0000 00:00:1795360353.404219   10869 common_lib.cc:554] INVALID_ARGUMENT: Error: unexpected worker hostname 'WARNING: could not determine TPU worker hostnames or IP addresses' from env var TPU_WORKER_HOSTNAMES.\n"
    "=== Source Location Trace: === \n"
    "learning/45eac/tfrc/runtime/libtpu_init_utils.cc:327\n"
)


@needs_libtpu
def test_the_noise_goes_and_everything_else_stays_in_order(capfd):
    real = "E0000 00:00:1.0 1 tpu_compiler.cc:12] INTERNAL: the compiler crashed\nmy own line\n"
    os.write(2, b"before\n")
    with libtpu_startup_filtered():
        os.write(2, (NOISE + real).encode())
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "before\n" + real + "after\n"


@needs_libtpu
def test_a_fatal_error_while_the_backend_starts_still_reaches_the_terminal():
    """The filter is a process of its own: what this one wrote before dying still gets out."""
    code = (
        "import os\n"
        "from pytest_tpumem.readings.devices import libtpu_startup_filtered\n"
        "with libtpu_startup_filtered():\n"
        "    os.write(2, b'F1122 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS\\n')\n"
        "    os.abort()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "Unknown flag in XLA_FLAGS" in done.stderr


def test_starting_the_backend_through_the_plugin_prints_no_libtpu_noise():
    """jax's backend starts libtpu where it is installed (the test extra brings it): the plugin's
    first device read must not put libtpu's start-up lines on the terminal."""
    code = (
        "from pytest_tpumem.readings.devices import local_devices\n"
        "import sys\n"
        "print(len(local_devices()))\n"
        "sys.stderr.write('a line of the suite\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "could not determine TPU" not in done.stderr and "InitGoogle" not in done.stderr
    assert "a line of the suite" in done.stderr


def test_this_jax_has_every_feature_the_plugin_uses():
    assert jaxcompat.unavailable() == {}
    assert jaxcompat.backends_started() in (True, False)


def test_installed_libraries_are_not_the_users_code_but_their_tests_are():
    import sysconfig

    from pytest_tpumem.readings.frames import is_user_file

    site = sysconfig.get_paths()["purelib"]
    assert not is_user_file(f"{site}/some_library_nobody_listed/ops.py")
    assert is_user_file(f"{site}/optax/_src/transform_test.py")  # a test module, even installed
    assert is_user_file("/home/me/project/model.py") and not is_user_file("<string>")


def test_where_this_jax_cannot_be_watched_the_peak_says_so(monkeypatch):
    """A jax without the hooks readings/executions.py wraps: the peak is read at the start, the
    body's end and the end, the report says why no program was read, and jax's fast path is untouched."""
    import jax
    import jax.numpy as jnp
    from jax._src import pjit

    from pytest_tpumem.checks import PeakTracker

    real = jaxcompat._missing
    monkeypatch.setattr(
        jaxcompat, "_missing", lambda f: "jax 9.9 has no such hook" if f == jaxcompat.PROGRAM_RUNS else real(f)
    )
    fastpath = pjit._get_fastpath_data
    tracker = PeakTracker(sample_interval=0).start()
    assert pjit._get_fastpath_data is fastpath
    (jnp.ones((1000,)) * 2).block_until_ready()
    report = tracker.stop()
    assert report.uncounted == "unavailable" and report.programs == ()
    assert all("program" not in d.witnesses for d in report.devices.values())
    assert jaxcompat.unavailable() == {jaxcompat.PROGRAM_RUNS: "jax 9.9 has no such hook"}
    del jax


def test_a_watch_leaves_jax_as_it_found_it(monkeypatch):
    """While a peak is measured, jax's fast path is off and every call reaches Python; afterwards
    the patched functions are jax's own again and a call jax has cached runs from C++ again."""
    import jax.numpy as jnp
    from jax._src import dispatch, pjit
    from jax._src.interpreters import pxla

    from pytest_tpumem.checks import PeakTracker

    originals = (pjit._get_fastpath_data, pxla.ExecuteReplicated.__call__, dispatch._batched_device_put_impl)
    python_path = []
    real = pjit._pjit_call_impl_python
    monkeypatch.setattr(pjit, "_pjit_call_impl_python", lambda *a, **k: python_path.append(1) or real(*a, **k))
    x = jnp.ones((100,))

    def calls_from_python():
        del python_path[:]
        for _ in range(50):
            x + 1
        return len(python_path)

    (x + 1).block_until_ready()
    assert calls_from_python() == 0  # cached in C++
    tracker = PeakTracker(sample_interval=0).start()
    assert pjit._get_fastpath_data is not originals[0]
    assert calls_from_python() == 50
    tracker.stop()
    assert (pjit._get_fastpath_data, pxla.ExecuteReplicated.__call__, dispatch._batched_device_put_impl) == originals
    assert calls_from_python() <= 1  # cached in C++ again from its first call


def test_a_wrapper_installed_over_the_watch_is_left_in_place_and_still_works():
    """Patched as chex patches: the watch's wrappers look like jax's functions (functools.wraps),
    and where something wrapped over one of them meanwhile, ending the watch leaves that wrapper
    alone (it would otherwise be dropped) while the watch's own, inside it, passes calls through."""
    import jax
    import jax.numpy as jnp
    from jax._src import dispatch

    from pytest_tpumem.checks import PeakTracker

    original = dispatch._batched_device_put_impl
    tracker = PeakTracker(sample_interval=0).start()
    ours = dispatch._batched_device_put_impl
    assert ours is not original and ours.__wrapped__ is original and ours.__name__ == original.__name__
    seen = []

    def theirs(*args, **kwargs):
        seen.append(1)
        return ours(*args, **kwargs)

    dispatch._batched_device_put_impl = theirs
    try:
        tracker.stop()
        assert dispatch._batched_device_put_impl is theirs
        assert jax.device_put(jnp.ones(3)).tolist() == [1.0, 1.0, 1.0]
        assert seen  # their wrapper still runs, and through ours, the original
    finally:
        dispatch._batched_device_put_impl = original
