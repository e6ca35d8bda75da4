"""decisions.upcast.classify: each float32 array of a compiled program in exactly one kind, in the
documented order, and each widening group with what its arrays cost (pure: made-up widenings and
buffers, the rules pinned at their edges)."""

from dataclasses import replace

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
from pytest_tpumem.telling.upcast import upcast_line


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


def test_the_same_upcast_in_every_layer_is_one_upcast_with_its_costs_added():
    """A model's layer traced once per layer: the same widening at the same line, with the same
    cause, is told once, so many times; a different shape stays apart."""
    layer = replace(widening("promotion"), cause="float32 constant SCALE (m.py:1)", op="mul")
    other = replace(layer, shape="f32[4,4]", region=frozenset({("m.py:5", "mul", 16)}))
    r = classify([precision(layer, layer, other)], {"cpu": (buf(), buf(), buf(shape="f32[4,4]", size=64))})
    assert sorted((u.times, u.root.shape) for u in r.upcasts) == [(1, "f32[4,4]"), (2, "f32[100]")]
    twice = next(u for u in r.upcasts if u.root.shape == "f32[100]")
    assert twice.times == 2
    assert twice.cost("cpu").wide == 800  # each layer's array, added up
    assert "m.py:5 (2 times): float32 constant SCALE (m.py:1) promoted the mul of bf16 to f32" in upcast_line(twice)


def test_a_gradients_widening_is_never_named_its_arrays_are_wide_inputs():
    """The backward pass casts a float32 parameter's bf16 cotangent back to float32: its arrays are
    float32 because the parameter is, whatever the code asked."""
    r = classify([precision(widening("gradient", kept=True))], {"cpu": (buf(),)})
    assert r.named == () and list(r.kinds["cpu"]) == [WIDE_INPUTS]


# --- each rule at its edge (the survivors of a mutation run over decisions/upcast.py) -------------


def test_a_buffer_is_charged_by_its_innermost_operation_and_its_line_in_a_folder_with_a_space():
    w = widening(line="My (copy)/m.py:5", region=(("My (copy)/m.py:5", "mul", 100),))
    nested = buf(op="jit(f)/vmap(jvp(g))/mul", source="My (copy)/m.py:5 (g)")
    r = classify([precision(w)], {"cpu": (nested,)})
    assert r.kinds["cpu"] == {UPCAST: (nested,)}


def test_the_exact_operation_wins_over_another_of_the_same_line_and_count():
    first = widening(line="m.py:5", region=(("m.py:5", "convert_element_type", 100),))
    second = widening("promotion", line="m.py:5", region=(("m.py:5", "mul", 100),))
    r = classify([precision(first, second)], {"cpu": (buf(op="jit(f)/vmap(jvp(g))/mul"),)})
    costs = {u.root.how: u.cost("cpu").wide for u in r.upcasts}
    assert costs == {"astype": 0, "promotion": 400}


def test_of_several_widenings_for_one_array_a_named_one_takes_it():
    hidden = widening("inside", region=(("m.py:5", "convert_element_type", 100),))
    cast = widening("astype", region=(("m.py:5", "convert_element_type", 100),))
    r = classify([precision(hidden, cast)], {"cpu": (buf(),)})
    assert list(r.kinds["cpu"]) == [UPCAST]
    assert r.named[0].root is cast and r.named[0].cost("cpu").wide == 400


def test_a_promotion_of_a_librarys_value_is_an_upcast_though_its_root_is_not_named():
    hidden = widening("inside", region=(("m.py:4", "reduce_sum", 1),))
    promoted = widening("promotion", line="m.py:5", via=0, region=(("m.py:5", "mul", 100),))
    r = classify([precision(hidden, promoted)], {"cpu": (buf(op="jit(f)/mul"),)})
    assert list(r.kinds["cpu"]) == [UPCAST] and len(r.named) == 1


def test_a_second_programs_groups_keep_their_own_roots():
    one = precision(widening(line="a.py:1", region=(("a.py:1", "convert_element_type", 100),)))
    root = widening("promotion", line="b.py:1", region=(("b.py:1", "add", 100),))
    child = widening("promotion", line="b.py:2", via=0, region=(("b.py:2", "div", 100),))
    r = classify([one, precision(root, child)], {"cpu": (buf(op="jit(g)/div", source="b.py:2 (g)"),)})
    group = next(u for u in r.upcasts if u.root is root)
    assert [m.line for m in group.also] == ["b.py:2"] and group.cost("cpu").wide == 400
    assert len(r.upcasts) == 2


def test_a_via_cycle_ends():
    a = widening("promotion", line="m.py:1", via=1, region=(("m.py:1", "add", 100),))
    b = widening("promotion", line="m.py:2", via=0, region=(("m.py:2", "add", 100),))
    r = classify([precision(a, b)], {"cpu": ()})
    assert sorted(u.root.line for u in r.upcasts) == ["m.py:1", "m.py:2"]  # each its own group


def test_an_array_without_a_line_or_without_an_operation_is_never_charged():
    w = widening(region=(("", "convert_element_type", 100), ("m.py:5", "convert_element_type", 100)))
    lineless = buf(source="")  # a conversion XLA inserted, with jax's operation name but no line
    opless = buf(op="", source="m.py:5 (f)")
    r = classify([precision(w, narrow=(("m.py:5", "mul", 7),))], {"cpu": (lineless, opless)})
    assert UPCAST not in r.kinds["cpu"]
    assert r.kinds["cpu"][COMPILERS_OWN] == (lineless, opless)


def test_a_wide_value_at_no_line_explains_no_array():
    p = precision(wide=(("", "mul", 100),), narrow=(("m.py:8", "mul", 100), ("", "add", 100)))
    r = classify([p], {"cpu": (buf(op="jit(f)/mul", source=""),)})
    assert list(r.kinds["cpu"]) == [UNEXPLAINED]  # not wide inputs, nor the compiler's at a known line


def test_wide_inputs_by_another_operation_of_the_line_with_the_same_count():
    p = precision(wide=(("m.py:7", "add", 100),))
    r = classify([p], {"cpu": (buf(op="jit(f)/mul", source="m.py:7 (f)"),)})
    assert list(r.kinds["cpu"]) == [WIDE_INPUTS]


def test_a_shape_that_does_not_parse_matches_no_count():
    w = widening(region=(("m.py:5", "convert_element_type", 1),))
    odd = buf(shape="f32[n]")
    r = classify([precision(w, narrow=())], {"cpu": (odd,)})
    assert UPCAST not in r.kinds["cpu"]


def test_costs_list_their_arrays_largest_first_in_whole_bytes():
    w = widening(
        region=(
            ("m.py:5", "convert_element_type", 100),
            (
                "m.py:5",
                "mul",
                4,
            ),
        )
    )
    w = replace(w, narrow="f8e4m3fn")
    small, large = buf(shape="f32[2,2]", op="jit(f)/mul", size=7), buf()
    r = classify([precision(w)], {"cpu": (small, large)})
    cost = r.upcasts[0].cost("cpu")
    assert cost.buffers == (large, small)
    assert cost.beyond == (400 - 100) + (7 - 1) and isinstance(cost.beyond, int)
    assert r.kinds["cpu"][UPCAST] == (large, small)
    assert r.upcasts[0].cost("v5e:2x2") is None and r.of_kind("cpu", UPCAST) == (large, small)
    assert r.of_kind("v5e:2x2", UPCAST) == () and r.of_kind("cpu", ACCUMULATOR) == ()


def test_with_nothing_compiled_the_larger_widening_comes_first():
    small = widening(line="m.py:1")
    large = replace(widening(line="m.py:2"), nbytes=4000)
    r = classify([precision(small, large)], {})
    assert [u.root for u in r.upcasts] == [large, small]


def test_repeats_add_up_their_arrays_largest_first():
    layer = replace(widening("promotion"), op="mul", region=frozenset({("m.py:5", "convert_element_type", 100)}))
    again = replace(layer, region=frozenset({("m.py:5", "mul", 4)}))
    small, large = buf(shape="f32[2,2]", op="jit(f)/mul", size=16), buf()
    r = classify([precision(layer, again)], {"cpu": (small, large)})
    (u,) = r.upcasts
    assert u.times == 2
    assert (u.cost("cpu").wide, u.cost("cpu").beyond, u.cost("cpu").buffers) == (416, 208, (large, small))


def test_a_shape_that_does_not_parse_matches_no_count_not_even_one_that_could_not_be_read():
    """An array whose shape does not parse and a value whose elements could not be counted are both
    of an unknown size: neither tells that the other is the same value."""
    w = widening(region=(("m.py:5", "convert_element_type", -1),))
    odd = buf(shape="f32[<=8]")
    r = classify([precision(w, narrow=())], {"cpu": (odd,)})
    assert UPCAST not in r.kinds["cpu"] and r.upcasts[0].cost("cpu").wide == 0
    wide = precision(wide=(("m.py:5", "convert_element_type", -1),), narrow=())
    assert WIDE_INPUTS not in classify([wide], {"cpu": (odd,)}).kinds["cpu"]


def test_an_array_of_no_elements_is_a_known_count_and_matched_as_any_other():
    w = widening(region=(("m.py:5", "convert_element_type", 0),))
    empty = buf(shape="f32[0,128]", size=0)
    assert classify([precision(w, narrow=())], {"cpu": (empty,)}).kinds["cpu"] == {UPCAST: (empty,)}


def test_an_array_of_no_elements_is_a_wide_input_where_a_wide_value_of_no_elements_is():
    wide = precision(wide=(("m.py:5", "convert_element_type", 0),), narrow=())
    empty = buf(shape="f32[0,128]", size=0)
    assert classify([wide], {"cpu": (empty,)}).kinds["cpu"] == {WIDE_INPUTS: (empty,)}


def test_an_array_in_no_region_is_charged_to_no_widening_of_several():
    first, second = widening(), widening(line="m.py:7", region=(("m.py:7", "convert_element_type", 100),))
    stray = buf(source="m.py:9 (f)")
    r = classify([precision(first, second)], {"cpu": (stray,)})
    assert len(r.upcasts) == 2 and all(u.cost("cpu").wide == 0 for u in r.upcasts)
    assert r.kinds["cpu"] == {UNEXPLAINED: (stray,)}
