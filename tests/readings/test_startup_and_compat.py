"""libtpu's start-up noise is kept off the terminal, real errors are not; every private jax API is found here."""

import importlib.util
import os
import subprocess
import sys

import pytest

from pytest_tpumem.readings import jaxcompat
from pytest_tpumem.readings.devices import libtpu_startup_filtered

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="the filter is on only where libtpu is installed")

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
