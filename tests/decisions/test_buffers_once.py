"""The largest arrays of a budget failure list an array once (newcomer2: one buffer was listed once
per program that took it): decisions.budget.once_each, pinned at each part of its key."""

from pytest_tpumem.decisions.budget import once_each
from pytest_tpumem.readings.buffers import Buffer

MB = 10**6


def arg(program, index=0, name="x", size=100 * MB, shape="f32[5000,5000]", source=""):
    return Buffer(size, shape, f"argument {index}", f"p{index}", name, source, programs=(program,))


def test_an_argument_several_programs_take_is_listed_once_with_each_program_and_name():
    out = once_each((arg("jit_multiply", 0, "x"), arg("jit_dynamic_slice", 0, "args[0]")))
    assert len(out) == 1
    assert (out[0].kind, out[0].op, out[0].programs) == (
        "argument 0",
        "x, args[0]",
        ("jit_multiply", "jit_dynamic_slice"),
    )


def test_its_index_may_differ_between_programs():
    (one,) = once_each((arg("jit_a", 0), arg("jit_b", 2)))
    assert one.kind == "argument" and one.op == "x"  # one name said once


def test_two_arguments_of_one_program_are_two_arrays():
    assert len(once_each((arg("jit_a", 0), arg("jit_a", 1)))) == 2


def test_another_size_shape_or_line_is_another_array():
    base = arg("jit_a")
    for other in (
        arg("jit_b", size=100 * MB + 1),
        arg("jit_b", shape="f32[2500,10000]"),
        arg("jit_b", source="t.py:3 (f)"),
    ):
        assert len(once_each((base, other))) == 2


def test_outputs_and_temporaries_are_never_merged():
    out = Buffer(100 * MB, "f32[5000,5000]", "output", "fusion", "jit(f)/mul", "", programs=("jit_f",))
    assert once_each((out, out)) == [out, out]
    assert once_each((out, arg("jit_g"))) == [out, arg("jit_g")]
    assert once_each((arg("jit_g"), out)) == [arg("jit_g"), out]  # an output after an argument like it too


def test_the_names_joined_leave_out_an_empty_piece_of_a_name():
    (one,) = once_each((arg("jit_a", 0, "a, "), arg("jit_b", 0, "b")))
    assert one.op == "a, b"
