"""Every decision on figures pinned at its boundary, on hand-built figures: a peak or a need equal
to its budget passes and one byte more fails; what a need counts; when the runtime's own peak,
fragmentation, an upcast and a small eager operation count; what is an out-of-memory. And the TPU
capacity table, each generation's figure against what libtpu itself says."""

import importlib.util
import math

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.decisions.budget import Budget, BudgetResult
from pytest_tpumem.decisions.oom import is_oom
from pytest_tpumem.decisions.peak import DevicePeak, PeakReport, judge
from pytest_tpumem.decisions.target import ProgramJudgement, TargetResult, judge_programs
from pytest_tpumem.decisions.verdict import Verdict
from pytest_tpumem.measuring.peak import PeakReadings
from pytest_tpumem.readings.buffers import Buffer
from pytest_tpumem.readings.devices import DeviceMemory
from pytest_tpumem.readings.executions import Moment
from pytest_tpumem.readings.tpu import HbmEstimate
from pytest_tpumem.targets import GENERATIONS, parse_target

MB = 10**6
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="compiles for TPU with libtpu")


def device(peak, sampler=None, free=None, largest_free=None):
    return DevicePeak("cpu:0", 0, peak, "body-end", {"body-end": peak}, None, True, free, largest_free, sampler)


def budget_of(peak, limit, sampler=None):
    return BudgetResult(PeakReport({"cpu:0": device(peak, sampler)}, None), Budget(limit, f"max_hbm({limit})"))


# --- a budget on the run's devices ---------------------------------------------------------------


def test_a_peak_equal_to_its_budget_passes_and_one_byte_more_fails():
    assert budget_of(30 * MB, 30 * MB).verdict is Verdict.OK
    assert budget_of(30 * MB + 1, 30 * MB).verdict is Verdict.OVER_BUDGET
    assert budget_of(30 * MB - 1, 30 * MB).over == []


def test_the_sampler_alone_over_the_budget_is_warned_of_at_the_budget_and_never_fails():
    at = budget_of(30 * MB, 30 * MB, sampler=30 * MB + 1)
    assert at.verdict is Verdict.OK and [d.peak for d in at.sampled_over] == [30 * MB]
    assert budget_of(30 * MB, 30 * MB, sampler=30 * MB).sampled_over == []  # saw no more than the budget
    assert budget_of(30 * MB + 1, 30 * MB, sampler=40 * MB).sampled_over == []  # over anyway: failed, not warned


def test_fragmented_where_the_largest_free_block_is_under_half_of_what_is_free():
    assert not device(0, free=100, largest_free=50).fragmented
    assert device(0, free=100, largest_free=49).fragmented
    assert not device(0, free=100).fragmented  # not reported: not said


def test_an_upcast_is_named_from_the_minimum_size_on():
    """An upcast is worth a line where its wide value, or what it costs beyond the narrow type on
    some backend or target, is at least UPCAST_MIN; one byte less is not."""
    from pytest_tpumem.decisions.upcast import Cost, PrecisionReport, Upcast
    from pytest_tpumem.readings.precision import Widening

    def upcast(nbytes, beyond):
        w = Widening("astype", "t.py:3", "f", "astype", "f32[1]", "bf16", "f32", nbytes, "jit_f")
        return Upcast(w, (), (Cost("cpu", 2 * beyond, beyond),))

    at, under, costs = (
        upcast(defaults.UPCAST_MIN, 0),
        upcast(defaults.UPCAST_MIN - 1, 0),
        upcast(8, defaults.UPCAST_MIN),
    )
    below = upcast(8, defaults.UPCAST_MIN - 1)
    wide = Buffer(defaults.UPCAST_MIN, "f32[262144]", "temporary", "add", "", "")
    small = Buffer(defaults.UPCAST_MIN - 1, "f32[262143]", "temporary", "add.1", "", "")
    explained = budget_of(40 * MB, 30 * MB).explained((small, wide), PrecisionReport((at, under, costs, below)))
    assert explained.upcasts == (at, costs) and explained.buffers == (wide, small)  # largest first


# --- the peak from its readings --------------------------------------------------------------------


def memory(used, peak=None):
    return DeviceMemory("gpu:0", used, in_use=used, peak=peak, limit=80 * 10**9)


def readings(start_peak, end_peak, reset=False, **more):
    return PeakReadings(
        start={"gpu:0": memory(10 * MB, start_peak)},
        end={"gpu:0": memory(10 * MB, end_peak)},
        reset={"gpu:0": reset},
        **more,
    )


def test_the_runtimes_peak_is_a_witness_only_where_it_rose_or_was_reset():
    assert "runtime-peak" not in judge(readings(50 * MB, 50 * MB)).devices["gpu:0"].witnesses  # an earlier test's
    rose = judge(readings(50 * MB, 50 * MB + 1)).devices["gpu:0"]
    assert (rose.peak, rose.witness) == (50 * MB + 1, "runtime-peak")
    reset = judge(readings(50 * MB, 50 * MB, reset=True)).devices["gpu:0"]
    assert (reset.peak, reset.witness) == (50 * MB, "runtime-peak")


def test_a_program_moment_and_a_transfer_are_witnesses_of_their_own_kind():
    ran = judge(readings(None, None, highest={"gpu:0": Moment(30 * MB, "program jit_step")})).devices["gpu:0"]
    assert (ran.peak, ran.witness, ran.program) == (30 * MB, "program", "jit_step")
    put = judge(readings(None, None, highest={"gpu:0": Moment(30 * MB, "transfer")})).devices["gpu:0"]
    assert (put.peak, put.witness, put.program) == (30 * MB, "transfer", "")


def test_a_peak_equal_to_the_body_end_goes_to_the_body_end():
    tie = judge(readings(None, None, body_end={"gpu:0": 30 * MB}, highest={"gpu:0": Moment(30 * MB, "program f")}))
    assert tie.devices["gpu:0"].witness == "body-end"


# --- a budget on a TPU target ----------------------------------------------------------------------


def estimate(peak, refused=False):
    return HbmEstimate("v5e:2x2", 1, peak, 0, 0, 0, 0, 16_911_433_728, refused=refused)


def target_result(*judgements, limit=100 * MB):
    return TargetResult("max_hbm", parse_target("v5e"), limit, f"max_hbm({limit})", judgements)


def test_a_need_counts_the_arrays_already_resident():
    j = ProgramJudgement("jit_step", "", resident=30 * MB, estimate=estimate(70 * MB))
    assert j.need == 100 * MB
    assert target_result(j).verdict is Verdict.OK  # equal to the budget
    over = ProgramJudgement("jit_step", "", resident=30 * MB + 1, estimate=estimate(70 * MB))
    assert target_result(over).verdict is Verdict.OVER_BUDGET and target_result(over).need == 100 * MB + 1


def test_a_program_the_compiler_refused_is_over_whatever_the_budget():
    refused = ProgramJudgement("jit_step", "", 0, estimate(MB, refused=True))
    assert target_result(refused, limit=10**12).over == [refused]


def test_a_program_that_could_not_be_compiled_leaves_the_test_not_judged():
    fine = ProgramJudgement("jit_a", "", 0, estimate(MB))
    lost = ProgramJudgement("jit_b", "", 0, None, reason="NotRetargetable: pmap")
    skipped = ProgramJudgement("add", "", 0, None, skipped=True)
    assert target_result(fine, skipped).verdict is Verdict.OK
    assert target_result(fine, lost).verdict is Verdict.NOT_JUDGED and target_result(fine, lost).unjudged == [lost]


@needs_libtpu
def test_an_eager_operation_under_the_small_size_is_skipped_and_at_it_compiled():
    import jax
    import jax.numpy as jnp

    from pytest_tpumem.readings.capture import ProgramCapture

    n = defaults.SMALL_EAGER // 8  # lax.neg of n float32: 4n bytes in, 4n out
    at, under = jnp.ones((n,), jnp.float32), jnp.ones((n - 1,), jnp.float32)
    jax.clear_caches()  # lowered anew, so the capture sees them
    with ProgramCapture() as capture:
        jax.lax.neg(at).block_until_ready()
        jax.lax.neg(under).block_until_ready()
    assert [(p.name, p.eager, p.data_bytes) for p in capture.programs] == [
        ("neg", True, defaults.SMALL_EAGER),
        ("neg", True, defaults.SMALL_EAGER - 8),
    ]
    compiled, skipped = judge_programs(capture.programs, parse_target("v5e"))
    assert compiled.estimate is not None and not compiled.skipped
    assert skipped.estimate is None and skipped.skipped


# --- the TPU capacity table -------------------------------------------------------------------------


@needs_libtpu
@pytest.mark.parametrize("generation", list(GENERATIONS))
def test_each_generations_usable_hbm_is_what_libtpu_says_when_it_refuses(generation):
    """The table holds what libtpu 0.0.42 says; libtpu 0.0.50 (with jax 0.12) says 0.01G less for
    v5p, v6e and tpu7x (31.24G for 31.25G). So a figure may differ from the installed compiler's by
    one unit of its message's rounding (0.01 GiB, 10.7 MB), never more."""
    import jax
    import jax.numpy as jnp

    from pytest_tpumem.readings.tpu import estimate_hbm

    too_big = jax.ShapeDtypeStruct((30_000, 1_000_000), jnp.float32)  # 120 GB: over every generation
    e = estimate_hbm(lambda x: (x * 2).sum(), too_big, target=generation)
    table = GENERATIONS[generation][0]
    assert e.refused and table == parse_target(generation).hbm_per_device
    assert abs(e.capacity - table) <= 0.01 * 2**30 + 1, (e.compiler_message, table / 2**30)


DEFAULTS = {  # generation: (default topology, devices per chip) as the plugin names them
    "v2": ("v2:2x2", 2),
    "v3": ("v3:2x2", 2),
    "v4": ("v4:2x2x1", 2),
    "v5e": ("v5e:2x2", 1),
    "v5p": ("v5p:2x2x1", 1),
    "v6e": ("v6e:2x2", 1),
    "tpu7x": ("tpu7x:2x2x1", 2),
}


@needs_libtpu
@pytest.mark.parametrize("generation", list(GENERATIONS))
def test_each_default_topology_has_the_devices_libtpu_lays_out(generation):
    from pytest_tpumem.readings.tpu import topology_devices

    t = parse_target(generation)
    assert (t.topology, t.devices_per_chip) == DEFAULTS[generation]
    chips = math.prod(int(n) for n in t.topology.split(":")[1].split("x"))
    assert len(topology_devices(t.topology)) == chips * t.devices_per_chip


# --- out of device memory ----------------------------------------------------------------------------


def test_an_out_of_memory_is_jaxs_runtime_error_that_starts_with_resource_exhausted():
    import jax

    assert is_oom(jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes."))
    assert not is_oom(jax.errors.JaxRuntimeError("INTERNAL: while handling RESOURCE_EXHAUSTED from the allocator"))
    assert not is_oom(RuntimeError("RESOURCE_EXHAUSTED: Out of memory"))  # not jax's


def test_what_the_sampler_saw_beyond_the_peak_is_unexplained_only_past_the_readings_floor():
    floor = defaults.READ_FLOOR  # the program witness may be this far below the exact peak, by design
    at = judge(readings(None, None, sampled={"gpu:0": 10 * MB + floor}, floor=floor)).devices["gpu:0"]
    assert (at.peak, at.sampler, at.unexplained) == (10 * MB, 10 * MB + floor, 0)
    past = judge(readings(None, None, sampled={"gpu:0": 10 * MB + floor + 1}, floor=floor)).devices["gpu:0"]
    assert past.unexplained == floor + 1
    unwatched = judge(readings(None, None, sampled={"gpu:0": 10 * MB + 3}, floor=floor, watched=False))
    assert unwatched.devices["gpu:0"].unexplained == 3  # no program was read: nothing explains it
