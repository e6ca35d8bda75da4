"""decisions.upcast.classify: each float32 array of a compiled program in exactly one kind, in the
documented order, and each widening group with what its arrays cost (pure: made-up widenings and
buffers, the rules pinned at their edges)."""

from pytest_tpumem.decisions.upcast import (
    ACCUMULATOR,
    COMPILERS_OWN,
    UNEXPLAINED,
    UPCAST,
    WIDE_INPUTS,
    classify,
    element_bytes,
    named,
)
from pytest_tpumem.readings.buffers import Buffer
from pytest_tpumem.readings.precision import Precision, Widening


def widening(how="astype", line="m.py:5", kept=False, via=-1, region=(("m.py:5", "convert_element_type", 100),)):
    return Widening(how, line, "f", "astype", "f32[100]", "bf16", "f32", 400, "jit_f", kept, "", via, frozenset(region))


def buf(shape="f32[100]", op="jit(f)/convert_element_type", source="m.py:5 (f)", kind="temporary", size=400):
    return Buffer(size, shape, kind, "fusion", op, source)


def precision(*widenings, wide=(), narrow=(("m.py:2", "mul", 100),), is_narrow=True):
    return Precision("jit_f", is_narrow, tuple(widenings), frozenset(wide), frozenset(narrow))


def kinds(report, where="cpu"):
    return {k: [b.instruction + b.shape for b in v] for k, v in report.kinds[where].items()}


def test_named_is_what_the_code_asked_for_and_a_library_that_keeps_it_wide():
    assert all(named(widening(how)) for how in ("astype", "promotion", "preferred"))
    assert named(widening("inside", kept=True)) and not named(widening("inside", kept=False))


def test_an_array_in_a_widenings_region_is_charged_to_it_by_line_operation_and_count():
    w = widening()
    r = classify([precision(w)], {"cpu": (buf(),)})
    assert list(r.kinds["cpu"]) == [UPCAST]
    cost = r.upcasts[0].cost("cpu")
    assert (cost.wide, cost.beyond) == (400, 200)  # f32 over bf16: half of it is beyond the narrow type


def test_another_operation_of_the_line_with_the_same_count_is_charged_too_a_different_count_is_not():
    w = widening()
    fused = buf(op="jit(f)/reshape")  # XLA named the fusion after another operation of the line
    other = buf(shape="f32[101]", op="jit(f)/reshape")
    r = classify([precision(w)], {"cpu": (fused, other)})
    assert r.kinds["cpu"][UPCAST] == (fused,)
    assert r.kinds["cpu"][COMPILERS_OWN] == (other,)  # the line is the program's, no wide value that size


def test_a_library_widening_converted_back_is_an_accumulator_not_an_upcast():
    w = widening("inside", kept=False)
    r = classify([precision(w)], {"cpu": (buf(),)})
    assert list(r.kinds["cpu"]) == [ACCUMULATOR] and r.named == ()


def test_wide_inputs_compilers_own_and_unexplained_in_that_order():
    p = precision(wide=(("m.py:7", "add", 100),), narrow=(("m.py:8", "mul", 100),))
    inputs = buf(op="jit(f)/add", source="m.py:7 (f)")
    own = buf(op="jit(f)/mul", source="m.py:8 (f)")
    inserted = buf(op="", source="")  # no jax operation behind it: XLA's own conversion
    unknown = buf(op="jit(g)/mul", source="other.py:3 (g)")  # a line no captured program has
    argument = buf(kind="argument 0")
    r = classify([p], {"cpu": (inputs, own, inserted, unknown, argument)})
    assert r.kinds["cpu"][WIDE_INPUTS] == (inputs,)
    assert r.kinds["cpu"][COMPILERS_OWN] == (own, inserted)
    assert r.kinds["cpu"][UNEXPLAINED] == (unknown,)
    assert sum(len(v) for v in r.kinds["cpu"].values()) == 4  # an argument is no program's own array


def test_without_narrow_floats_nothing_is_the_compilers_own():
    p = precision(narrow=(("m.py:8", "mul", 100),), is_narrow=False)
    r = classify([p], {"cpu": (buf(op="", source=""), buf(op="jit(f)/mul", source="m.py:8 (f)"))})
    assert list(r.kinds["cpu"]) == [UNEXPLAINED]


def test_a_promotion_caused_by_another_widening_joins_its_group_and_costs_are_per_target():
    root = widening("promotion", region=(("m.py:5", "add", 1),))
    child = widening("promotion", line="m.py:6", via=0, region=(("m.py:6", "div", 100),))
    r = classify(
        [precision(root, child)],
        {"cpu": (buf(op="jit(f)/div", source="m.py:6 (f)"),), "v5e:2x2": ()},
    )
    assert len(r.upcasts) == 1 and r.upcasts[0].root is root and r.upcasts[0].also == (child,)
    assert r.upcasts[0].cost("cpu").wide == 400 and r.upcasts[0].cost("v5e:2x2").wide == 0


def test_named_groups_first_then_the_costliest():
    small = widening(line="m.py:1", region=(("m.py:1", "convert_element_type", 100),))
    large = widening(line="m.py:2", region=(("m.py:2", "convert_element_type", 1000),))
    hidden = widening("inside", line="m.py:3", region=(("m.py:3", "convert_element_type", 5000),))
    arrays = (
        buf(source="m.py:1 (f)"),
        buf("f32[1000]", source="m.py:2 (f)", size=4000),
        buf("f32[5000]", source="m.py:3 (f)", size=20000),
    )
    r = classify([precision(small, large, hidden)], {"cpu": arrays})
    assert [u.root for u in r.upcasts] == [large, small, hidden]
    assert [u.root for u in r.named] == [large, small]


def test_element_bytes_of_xla_float_types():
    assert [element_bytes(t) for t in ("f64", "f32", "bf16", "f16", "f8e4m3fn", "f4e2m1fn", "s32")] == [
        8,
        4,
        2,
        2,
        1,
        1,
        0,
    ]
