"""The peak is the largest deterministic witness; ties go to the runtime's own figure, then the
body's end, then a program's run. The sampler is evidence beside them and never judges."""

from dataclasses import replace

import jax
import jax.numpy as jnp

from pytest_tpumem.checks import PeakTracker
from pytest_tpumem.decisions.peak import WITNESSES, choose_witness, judge
from pytest_tpumem.measuring.peak import PeakWatch
from pytest_tpumem.readings.devices import local_devices


def test_the_largest_witness_judges():
    assert choose_witness({"end": 1, "start": 0, "body-end": 3, "program": 4}) == "program"
    assert choose_witness({"end": 9, "start": 5}) == "end"
    assert "sampler" not in WITNESSES


def test_ties_go_to_the_runtime_then_body_end_then_a_program():
    assert choose_witness({"end": 7, "body-end": 7, "runtime-peak": 7, "program": 7}) == "runtime-peak"
    assert choose_witness({"end": 7, "body-end": 7, "program": 7, "start": 7}) == "body-end"
    assert choose_witness({"end": 7, "program": 7, "transfer": 7}) == "program"
    assert choose_witness({"end": 7, "start": 7}) == "end"
    assert WITNESSES[-1] == "start"


def test_a_program_compiled_before_the_tracker_still_counts():
    """A jit warmed up outside the measurement runs through jax's C++ fast path; the watch turns
    it off for the measurement, so its run is read as any other."""
    double = jax.jit(lambda x: x * 2)
    x = jnp.ones((1_000_000,), jnp.float32)  # 4 MB, made before the measurement
    double(x).block_until_ready()  # compiled, and cached in C++, now
    tracker = PeakTracker(sample_interval=0).start()
    double(x).block_until_ready()
    report = tracker.stop()
    d = report.devices["cpu:0"]  # absolute figures: what other tests of this process hold is in the start
    assert (d.peak - d.start, d.witness, d.program) == (4_000_000, "program", "jit(<lambda>)")  # x, and its double
    assert [p.name for p in report.programs] == ["jit(<lambda>)"] and report.uncounted == ""


def test_the_sampler_is_evidence_only():
    """A sampler that saw more than every deterministic reading is kept and said, not judged."""
    x = jnp.ones((1_000,), jnp.float32)
    watch = PeakWatch(local_devices(), sample_interval=0.001).start()
    (x + 1).block_until_ready()
    readings = watch.stop()
    seen = readings.sampled["cpu:0"] + 50_000_000  # as if it had looked at a moment nothing else explains
    report = judge(replace(readings, sampled={**readings.sampled, "cpu:0": seen}))
    d = report.devices["cpu:0"]
    assert d.sampler == seen and d.peak < seen and d.witness != "sampler"
    assert d.unexplained == seen - d.peak
    assert report.sampled_over(d.peak) == [d] and report.over(d.peak) == []  # at its peak: only the sampler is over


def test_stop_twice_gives_the_same_report():
    tracker = PeakTracker(sample_interval=0).start()
    first = tracker.stop()
    assert tracker.stop() is first
