"""BudgetResult.explained and once_each on hand-built buffers: the precision report kept with the
result, none read meaning no upcast, each name of a shared argument said once, and every buffer after
a merged one still listed."""

from pytest_tpumem.decisions.budget import Budget, BudgetResult, once_each
from pytest_tpumem.decisions.peak import DevicePeak, PeakReport
from pytest_tpumem.decisions.upcast import PrecisionReport
from pytest_tpumem.readings.buffers import Buffer

MB = 10**6


def arg(program, name, size=100 * MB):
    return Buffer(size, "f32[5000,5000]", "argument 0", "p0", name, "t.py:3 (f)", programs=(program,))


def over_budget():
    d = DevicePeak("cpu:0", 0, 40 * MB, "body-end", {"body-end": 40 * MB}, None, True)
    return BudgetResult(PeakReport({"cpu:0": d}, None), Budget(30 * MB, "max_hbm('30MB')"))


def test_a_result_explained_without_a_precision_report_names_no_upcast():
    out = Buffer(MB, "f32[250000]", "output", "add", "jit(f)/add", "")
    explained = over_budget().explained((out,))
    assert (explained.buffers, explained.upcasts, explained.precision) == ((out,), (), None)


def test_a_result_explained_keeps_the_precision_report_it_was_given():
    report = PrecisionReport((), run="cpu")
    explained = over_budget().explained((), report)
    assert explained.precision is report and explained.upcasts == ()


def test_each_name_of_a_shared_argument_is_said_once_in_the_order_first_seen():
    (one,) = once_each((arg("jit_a", "x"), arg("jit_b", "y"), arg("jit_c", "x"), arg("jit_d", "y")))
    assert (one.op, one.programs) == ("x, y", ("jit_a", "jit_b", "jit_c", "jit_d"))


def test_every_buffer_after_a_merged_argument_is_still_listed():
    later = Buffer(MB, "f32[250000]", "temporary", "add", "jit(g)/add", "")
    other = arg("jit_c", "z", size=50 * MB)
    out = once_each((arg("jit_a", "x"), arg("jit_b", "x"), later, other))
    assert [(b.op, b.size, b.programs) for b in out] == [
        ("x", 100 * MB, ("jit_a", "jit_b")),
        ("jit(g)/add", MB, ()),
        ("z", 50 * MB, ("jit_c",)),
    ]
