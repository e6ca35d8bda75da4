"""decisions.target in process: which captured programs are compiled for a TPU target, what a
program that cannot be compiled there is judged, and what TargetCheck records, credits and
reports (libtpu compiles for the target; no TPU is needed)."""

import dataclasses
import importlib.util

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.decisions.target import TargetCheck, judge_programs
from pytest_tpumem.targets import parse_target

pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="compiles for TPU with libtpu")

MB = 10**6


def captured(*calls):
    """The programs jax lowers for ``calls`` (each a function of no argument), caches cleared first."""
    import jax

    from pytest_tpumem.readings.capture import ProgramCapture

    jax.clear_caches()
    with ProgramCapture() as capture:
        for call in calls:
            jax.block_until_ready(call())
    return capture.programs


def double(x):
    return x * 2


def test_only_an_eager_operation_on_little_data_is_skipped_and_each_keeps_its_name_line_and_residents():
    import jax
    import jax.numpy as jnp

    small = jnp.ones((16,), jnp.float32)
    neg, jitted = captured(lambda: jax.lax.neg(small), lambda: jax.jit(double)(small))
    assert (neg.eager, jitted.eager) == (True, False) and jitted.data_bytes < defaults.SMALL_EAGER
    neg, jitted = dataclasses.replace(neg, resident=7 * MB), dataclasses.replace(jitted, resident=9 * MB)
    skipped, compiled = judge_programs([neg, jitted], parse_target("v5e"))
    assert (skipped.program, skipped.source, skipped.resident) == ("neg", "", 7 * MB)
    assert skipped.skipped and skipped.estimate is None and skipped.reason == ""
    # a jitted program is compiled however small: only one eager primitive is too small to matter
    assert (compiled.program, compiled.resident) == ("double", 9 * MB) and not compiled.skipped
    assert compiled.source.endswith("test_target_judging.py:" + str(double.__code__.co_firstlineno))
    assert compiled.estimate.target == "v5e:2x2" and compiled.estimate.peak > 0 and compiled.reason == ""


class ElsewhereSharding:
    """A placement the target cannot take: it names devices, and is no sharding jax can move."""

    device_set = frozenset()


def test_a_program_that_cannot_be_moved_to_the_target_says_why_and_is_not_judged():
    import jax
    import jax.numpy as jnp

    x = jnp.ones((1000,), jnp.float32)
    (program,) = captured(lambda: jax.jit(double)(x))
    moved = dataclasses.replace(program, shardings=(ElsewhereSharding(),), resident=5 * MB)
    (j,) = judge_programs([moved], parse_target("v5e"))
    assert (j.program, j.resident, j.estimate, j.skipped) == ("double", 5 * MB, None, False)
    assert j.source == program.source != ""
    assert j.reason == "its ElsewhereSharding cannot be moved to another device kind"


def test_a_program_whose_compile_fails_is_named_with_the_errors_type_and_first_line():
    import jax
    import jax.numpy as jnp

    x = jnp.ones((defaults.SMALL_EAGER // 4,), jnp.float32)  # not too small to compile, whatever it is taken for
    (program,) = captured(lambda: jax.jit(double)(x))
    broken = dataclasses.replace(program, jaxpr=object(), resident=3 * MB)  # a program jax cannot read
    (j,) = judge_programs([broken], parse_target("v5e"))
    assert (j.program, j.resident, j.estimate, j.skipped) == ("double", 3 * MB, None, False)
    assert j.reason == "AttributeError: 'object' object has no attribute 'eqns'"


# --- TargetCheck ------------------------------------------------------------------------------------


def test_a_target_check_defaults_to_the_targets_usable_hbm_and_says_so():
    check = TargetCheck("v5e")
    assert check.target == parse_target("v5e") and check.limit == parse_target("v5e").hbm_per_device
    assert check.check == "TargetCheck" and check.spelled == "TargetCheck('v5e:2x2', budget=None)"
    budgeted = TargetCheck(parse_target("v6e:2x2"), budget="12GB")
    assert budgeted.target == parse_target("v6e") and budgeted.limit == 12 * 10**9
    assert budgeted.spelled == "TargetCheck('v6e:2x2', budget='12GB')"
    named = TargetCheck("v5e", 10**6, check="max_hbm", spelled="max_hbm('1MB', target='v5e')")
    assert (named.check, named.spelled, named.limit) == ("max_hbm", "max_hbm('1MB', target='v5e')", 10**6)
    assert TargetCheck("v5e", check="hbm_estimate").spelled == "hbm_estimate('v5e:2x2', budget=None)"


def test_a_bad_budget_or_a_topology_libtpu_cannot_build_fails_before_the_code_runs():
    from pytest_tpumem.readings.tpu import TopologyError
    from pytest_tpumem.units import SizeError

    with pytest.raises(SizeError, match=r"^budget: 'much' is not a size"):
        TargetCheck("v5e", budget="much")
    with pytest.raises(TopologyError, match=r"^libtpu cannot lay out the topology v5e:3x3: "):
        TargetCheck("v5e:3x3")


def test_a_target_check_reads_the_residents_on_the_devices_it_is_given():
    import jax

    first = jax.devices()[0]
    assert TargetCheck("v5e", devices=[first]).capture.devices == [first]
    assert TargetCheck("v5e").capture.devices == jax.local_devices()


def test_a_target_check_records_a_program_compiled_before_it_and_nothing_after_it():
    import jax
    import jax.numpy as jnp

    def triple(x):
        return x * 3

    def halve(x):
        return x / 2

    x = jnp.ones((1000,), jnp.float32)
    jax.jit(triple)(x).block_until_ready()  # in jit's cache: lowered again only once the caches are cleared
    with TargetCheck("v5e") as check:
        jax.jit(triple)(x).block_until_ready()
    assert isinstance(check, TargetCheck)
    jax.jit(halve)(x).block_until_ready()  # after the block: not the check's
    assert [p.name for p in check.capture.programs] == ["triple"]


def test_a_result_credits_what_other_tests_left_and_carries_the_recording_errors():
    import jax
    import jax.numpy as jnp

    x = jnp.ones((1000,), jnp.float32)
    with TargetCheck("v5e", budget="10MB", check="max_hbm", spelled="max_hbm('10MB')") as check:
        jax.jit(double)(x).block_until_ready()
    (program,) = check.capture.programs
    check.capture.programs[:] = [dataclasses.replace(program, resident=8 * MB)]
    check.capture.errors.append("a program could not be recorded: KeyError: 'x'")
    result = check.result(left=3 * MB)
    assert (result.check, result.target, result.limit, result.spelled) == (
        "max_hbm",
        parse_target("v5e"),
        10 * MB,
        "max_hbm('10MB')",
    )
    (j,) = result.judgements
    assert j.resident == 5 * MB and j.need == j.estimate.peak + 5 * MB
    assert result.errors == ("a program could not be recorded: KeyError: 'x'",)
    assert result.verdict.value == "not judged"  # an error leaves the code unjudged
    (more,) = check.result(left=9 * MB).judgements
    assert more.resident == 0  # never below nothing
    (none_left,) = check.result().judgements
    assert none_left.resident == 8 * MB


def test_a_result_whose_judging_fails_is_an_error_naming_the_target_never_a_pass():
    check = TargetCheck("v5e")
    check.capture.programs.append(object())  # not a captured program: judging it raises
    result = check.result()
    assert result.judgements == ()
    assert result.errors == ("judging for v5e:2x2 failed: AttributeError: 'object' object has no attribute 'eager'",)
    assert result.failed
