"""A reading never counts an array that only another reading, in another thread, still holds.

A walk of the live arrays holds a reference to each until it ends. The sampler walks in its own
thread: a test holding one 5.2 MB array was read at 10.4 MB at its body's end, once in a while on a
busy runner, because the sampler's walk still held an array the test had dropped. Here the other
walk is held open on purpose (its visitor waits), so the race is not left to chance."""

import threading

import jax
import jax.numpy as jnp

from pytest_tpumem.readings import devices

MB = 10**6


def test_a_reading_waits_for_the_walk_in_progress_and_sees_what_it_let_go():
    label = devices.device_label(jax.local_devices()[0])
    kept = jnp.ones((1_000_000,), jnp.float32).block_until_ready()  # 4 MB, held by the test
    dropped = jnp.ones((2_000_000,), jnp.float32).block_until_ready()  # 8 MB, dropped while the walk holds it
    before = devices.live_bytes_by_device()[label]
    walking, let_go = threading.Event(), threading.Event()

    def hold_the_walk(array):
        walking.set()
        let_go.wait(timeout=30)

    walk = threading.Thread(target=devices.live_bytes_by_device, args=(hold_the_walk,))
    walk.start()
    assert walking.wait(timeout=30)
    del dropped  # alive now only in the other walk's list

    read: dict = {}
    reader = threading.Thread(target=lambda: read.update(devices.read_used(jax.local_devices())))
    reader.start()
    reader.join(timeout=0.5)
    finished_while_the_walk_was_open = not reader.is_alive()
    let_go.set()
    walk.join(timeout=30)
    reader.join(timeout=30)
    assert not finished_while_the_walk_was_open, "read while another walk held the arrays it had listed"
    assert read[label] == before - 8 * MB  # the dropped array is gone, the kept one counted once
    del kept
