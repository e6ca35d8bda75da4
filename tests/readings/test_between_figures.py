"""The figures of a reading between tests (readings.between), in process: where a device's figure
comes from (the runtime's, else live arrays'), what is outside the arrays, whose arrays and
programs are whose, and what a reading says before a backend runs. The devices given are the CPU
backend's, or fakes around them (tests/fakedevice.py) for the runtime's figures CPU does not report."""

import gc
import inspect

import jax
import jax.numpy as jnp
import pytest
from fakedevice import FakeAccelerator

from pytest_tpumem.readings import between as between_module
from pytest_tpumem.readings.between import Between, BetweenTests
from pytest_tpumem.readings.devices import local_devices
from pytest_tpumem.readings.frames import Frame

MB = 10**6


def test_outside_is_what_the_runtime_counts_past_the_arrays():
    reading = Between(True, {"gpu:0": 10 * MB, "gpu:1": 4 * MB}, arrays={"gpu:0": 7 * MB})
    assert reading.outside == 3 * MB + 4 * MB  # gpu:1 holds no array: all of it is outside
    stand_in = Between(True, {"cpu:0": 10 * MB}, stand_in=True, arrays={"cpu:0": MB})
    assert stand_in.outside == 0  # the figure is the arrays'


def test_a_reading_before_any_backend_has_no_device_figures_and_what_comes_next_is_new(monkeypatch):
    x = jnp.ones(3)
    scale = jax.jit(lambda v: v * 3.5)
    scale(x).block_until_ready()  # held before the readings: the first reading without a backend
    reader = BetweenTests(devices=lambda: pytest.fail("devices asked for before a backend runs"))
    monkeypatch.setattr(between_module.jaxcompat, "backends_started", lambda: False)
    before = reader.read("early")
    assert (before.started, before.devices, before.executables, before.owned) == (False, {}, None, {})
    assert isinstance(before.rss, int) and before.rss > 0
    monkeypatch.undo()
    reader._devices_of = local_devices
    after = reader.read("later")
    assert after.started and sum(after.compiled.values()) == after.executables  # every program is new
    del scale


def test_the_devices_are_asked_for_once_and_only_once_a_backend_runs():
    asked = []

    def devices():
        asked.append(1)
        return local_devices()

    jnp.ones(1).block_until_ready()
    reader = BetweenTests(devices)
    assert reader.programs_by_site() == {} and reader.bytes_limits() == {}  # no reading yet: no devices
    reader.read()
    reader.read()
    assert len(asked) == 1 and sorted(reader.read().devices) == ["cpu:0", "cpu:1"]


def test_devices_that_report_their_use_give_the_runtimes_figures_and_peaks():
    cpu = local_devices()[:2]
    fakes = [FakeAccelerator(d, limit=(i + 1) * 1000 * MB) for i, d in enumerate(cpu)]
    held = jax.device_put(jnp.ones((250_000,), jnp.float32), cpu[0])  # 1 MB
    fakes[0].extra = 5 * MB  # the runtime's own, past any array
    fakes[0].run_kernel(20 * MB)
    reading = BetweenTests(lambda: fakes).read("t")
    assert not reading.stand_in
    assert reading.devices["cpu:0"] == reading.arrays["cpu:0"] + 5 * MB
    assert reading.outside == 5 * MB
    assert reading.peaks["cpu:0"] >= reading.arrays["cpu:0"] + 25 * MB
    assert set(reading.peaks) == {"cpu:0", "cpu:1"}
    del held


def test_one_device_without_the_runtimes_figure_makes_every_figure_the_arrays():
    cpu = local_devices()[:2]
    held = jax.device_put(jnp.ones((250_000,), jnp.float32), cpu[0])
    fake = FakeAccelerator(cpu[0])
    fake.extra = 5 * MB
    reading = BetweenTests(lambda: [fake, cpu[1]]).read()
    assert reading.stand_in and reading.devices == {
        "cpu:0": reading.arrays["cpu:0"],
        "cpu:1": reading.arrays.get("cpu:1", 0),
    }
    assert reading.outside == 0 and reading.peaks == {"cpu:0": fake.high_water}
    del held


def test_bytes_limits_are_the_devices_that_report_one():
    cpu = local_devices()[:2]
    reader = BetweenTests(
        lambda: [FakeAccelerator(cpu[0], limit=16 * 10**9), FakeAccelerator(cpu[1], allocator="platform")]
    )
    jnp.ones(1).block_until_ready()
    reader.read()
    assert reader.bytes_limits() == {"cpu:0": 16 * 10**9}  # the platform allocator reports none
    plain = BetweenTests()
    plain.read()
    assert plain.bytes_limits() == {}  # CPU reports none


def test_whose_arrays_are_whose_and_an_owner_whose_arrays_are_gone_is_not_listed():
    cpu0 = local_devices()[0]
    reader = BetweenTests()
    reader.read("before")
    made = jax.device_put(jnp.ones((250_000,), jnp.float32), cpu0)  # 1 MB
    reading = reader.read("mine")
    assert reading.owned["mine"] == MB and reading.owned_on["mine"] == {"cpu:0": MB}
    assert any(a is made for a in reader.arrays_of("mine"))
    del made
    gone = reader.read("next")
    assert "mine" not in gone.owned_on and reader.arrays_of("mine") == []


def test_the_programs_compiled_since_the_last_reading_are_told_by_the_line_that_compiled_them():
    x = jnp.ones(3)
    gc.collect()  # no earlier test's program is freed between the readings
    reader = BetweenTests()
    first = reader.read()
    assert first.compiled == {}  # what was compiled before the first reading is no one's
    twice = jax.jit(lambda v: v * 2.5)
    line = inspect.currentframe().f_lineno + 1  # the line that compiles it: its first call
    twice(x).block_until_ready()
    second = reader.read()
    here = [site for site in second.compiled if isinstance(site, Frame) and site.line == line]
    assert len(here) == 1 and second.compiled[here[0]] == 1
    assert second.executables == first.executables + sum(second.compiled.values())
    assert reader.read().compiled == {}  # nothing compiled since
    assert reader.programs_by_site()[here[0]] == 1
    del twice


def test_where_this_jax_cannot_list_programs_a_reading_says_so(monkeypatch):
    jnp.ones(1).block_until_ready()
    monkeypatch.setattr(between_module.jaxcompat, "live_executables", lambda client: None)
    reader = BetweenTests()
    reader.read()
    reading = reader.read()
    assert reading.executables is None and reading.compiled == {}


def test_a_reading_of_one_device_or_none_reads_what_there_is():
    """The devices given may be fewer than the backend's (one, or none at all)."""
    jnp.ones(1).block_until_ready()
    one = BetweenTests(lambda: local_devices()[:1]).read()
    assert list(one.devices) == ["cpu:0"] and isinstance(one.executables, int)
    assert isinstance(one.rss, int) and one.rss > 0
    none = BetweenTests(lambda: []).read()
    assert (none.started, none.devices, none.executables, none.compiled) == (True, {}, None, {})


def test_arrays_read_without_an_owner_are_the_unnamed_owners():
    cpu0 = local_devices()[0]
    reader = BetweenTests()
    reader.read("before")
    made = jax.device_put(jnp.ones((250_000,), jnp.float32), cpu0)  # 1 MB
    reading = reader.read()
    assert reading.owned[""] == MB and any(a is made for a in reader.arrays_of(""))
    del made
