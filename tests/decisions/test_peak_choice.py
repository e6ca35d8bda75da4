"""The peak is the largest witness; ties go to the runtime's own figure, then the deterministic body-end."""

import jax.numpy as jnp

from pytest_tpumem.decisions.peak import WITNESSES, PeakTracker, choose_witness


def test_the_largest_witness_judges():
    assert choose_witness({"end": 1, "sampler": 5, "body-end": 3, "compiled": 4}) == "sampler"
    assert choose_witness({"end": 9, "sampler": 5}) == "end"


def test_ties_go_to_the_runtime_then_body_end_then_the_sampler():
    assert choose_witness({"end": 7, "sampler": 7, "body-end": 7, "runtime-peak": 7, "compiled": 7}) == "runtime-peak"
    assert choose_witness({"end": 7, "sampler": 7, "body-end": 7, "compiled": 7}) == "body-end"
    assert choose_witness({"end": 7, "sampler": 7, "compiled": 7}) == "sampler"
    assert choose_witness({"end": 7, "compiled": 7}) == "compiled"
    assert WITNESSES[-1] == "end"


def test_a_tracker_counts_compiled_programs_only_when_asked():
    """Without the compiled witness (caches kept) the report says why, rather than saying nothing."""
    x = jnp.ones((1000,), jnp.float32)
    counted = PeakTracker(sample_interval=0).start()
    (jnp.cumsum(x * 3.0) + 1.0).block_until_ready()
    counted = counted.stop()
    kept = PeakTracker(sample_interval=0, uncounted="caches kept").start()
    (jnp.cumsum(x * 5.0) + 1.0).block_until_ready()
    kept = kept.stop()
    assert counted.programs and counted.uncounted == ""
    assert kept.programs == () and kept.uncounted == "caches kept"
    assert all("compiled" not in d.witnesses for d in kept.devices.values())
