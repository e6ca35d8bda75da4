"""The reading the suite ledger takes between tests: the same per-device figures as the full walk
of live arrays however arrays come and go, each buffer once, the programs jax holds, and no
backend started for it."""

import subprocess
import sys

import jax
import jax.numpy as jnp

from pytest_tpumem.readings.between import BetweenTests
from pytest_tpumem.readings.devices import live_bytes_by_device, local_devices

MB = 10**6


def walk():
    """The full walk's figures, a device without arrays at 0 as a reading has it."""
    return {label: 0 for label in ("cpu:0", "cpu:1")} | live_bytes_by_device()


def test_kept_layouts_give_the_full_walks_figures_as_arrays_come_and_go():
    reader = BetweenTests()
    cpu0, cpu1 = local_devices()[:2]
    held = [jax.device_put(jnp.ones((250_000,), jnp.float32), cpu0) for _ in range(4)]  # 1 MB each
    first = reader.read()
    assert first.started and first.stand_in and first.devices == walk()
    del held[:2]  # freed: their ids may be reused by the next arrays
    held += [jax.device_put(jnp.ones((500_000,), jnp.float32), cpu1) for _ in range(3)]  # 2 MB each
    second = reader.read()
    assert second.devices == walk()
    assert second.devices["cpu:1"] - first.devices["cpu:1"] == 6 * MB
    assert second.devices["cpu:0"] - first.devices["cpu:0"] == -2 * MB
    held.clear()


def test_a_sharded_array_is_counted_on_each_of_its_devices_and_a_second_array_on_a_buffer_once():
    mesh = jax.sharding.Mesh(local_devices()[:2], ("d",))
    sharded = jax.device_put(jnp.ones((1_000_000,), jnp.float32), jax.sharding.NamedSharding(mesh, jax.P("d")))
    reader = BetweenTests()
    before = reader.read().devices
    view = jax.jit(lambda: sharded)  # a jit that closes over it may hold a second jax.Array on its buffers
    view()
    after = reader.read().devices
    assert after == walk()
    sharded = view = None  # noqa: F841 (dropped: their buffers freed)
    assert reader.read().devices["cpu:0"] == before["cpu:0"] - 2 * MB


def test_the_programs_jax_holds_are_counted():
    reader = BetweenTests()
    x = jnp.ones(3)
    jax.clear_caches()
    before = reader.read().executables
    scale = jax.jit(lambda x: x * 7.5)  # held: its compiled program lives as long as it
    scale(x).block_until_ready()
    assert reader.read().executables == before + 1
    del scale
    jax.clear_caches()


def test_no_backend_is_started_for_a_reading():
    code = (
        "import jax\n"
        "from pytest_tpumem.readings.between import BetweenTests\n"
        "from pytest_tpumem.readings.jaxcompat import backends_started\n"
        "r = BetweenTests().read()\n"
        "print(r.started, r.devices, r.rss is not None, backends_started())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[-2] == "False {} True False", done.stderr


def test_an_array_deleted_while_its_object_lives_leaves_the_figures_and_its_owner_is_the_first_reader():
    reader = BetweenTests()
    cpu0 = local_devices()[0]
    kept = jax.device_put(jnp.ones((250_000,), jnp.float32), cpu0)  # 1 MB
    first = reader.read("first")
    assert first.owned.get("first") == first.devices["cpu:0"] == walk()["cpu:0"]
    made = jax.device_put(jnp.ones((500_000,), jnp.float32), cpu0)  # 2 MB
    second = reader.read("second")
    assert second.owned.get("second") == 2 * MB and second.devices == walk()
    made.delete()  # its buffer freed, its object alive (as a donated argument's)
    third = reader.read("third")
    assert third.devices == walk() and "second" not in third.owned
    assert any(a is kept for a in reader.arrays_of("first")), reader.arrays_of("second")
    assert not any(a is made for a in reader.arrays_of("second"))
    del kept, made
