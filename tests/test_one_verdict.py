"""One verdict per test, whatever ran before it and wherever it ran (issue 27): each planted suite
run in file order, reversed, each test alone and under pytest-xdist gives every test the same
outcome, and in every run what pytest reports and what the plugin's summary, JSON report and page
say agree (tests/verdicts.py)."""

import pytest
import verdicts

pytestmark = pytest.mark.usefixtures("monkeypatch")


@pytest.fixture
def planted(pytester):
    pytester.copy_example("planted")
    return pytester


# Each order is a test of its own (one run each), checked against the outcomes every order must
# give: that is the same as asking all orders to agree, and no test runs eleven suites in a row.
ORDER_RUNS = {"forward": (), "reverse": (), "xdist": ("-n", "2")}


def _in_order(planted, monkeypatch, path, order, expected, *args):
    if order in ORDER_RUNS:
        outcomes = verdicts.run(
            planted, path, *ORDER_RUNS[order], *args, reverse=order == "reverse", monkeypatch=monkeypatch
        )
        assert outcomes == expected
    else:  # one test alone
        name = order.removeprefix("alone:")
        assert verdicts.run(planted, f"{path}::{name}", *args, monkeypatch=monkeypatch) == {name: expected[name]}


ORDERS = {
    "test_bug_static_lr_marker": "failed",
    "test_clean_traced_lr_marker": "passed",
    "test_bug_static_lr_fixture": "failed",
    "test_clean_traced_lr_fixture": "passed",
    "test_bug_leaves_array_in_module_list": "passed",  # its own budget is kept; what it leaves is the ledger's
    "test_clean_local_list": "passed",
    "test_clean_two_arrays_fit_budget": "passed",
    "test_bug_two_arrays_over_budget": "failed",
}


@pytest.mark.parametrize("order", [*ORDER_RUNS, *(f"alone:{name}" for name in ORDERS)])
def test_compile_cache_and_budget_verdicts_do_not_depend_on_what_ran_before(planted, monkeypatch, order):
    _in_order(planted, monkeypatch, "test_orders.py", order, ORDERS)


SWEPT = {
    "test_bug_jit_per_call_kept": "failed",
    "test_clean_jit_per_call_dies": "passed",
    "test_clean_jit_compiled_once": "passed",
    "test_clean_eager_scan_of_a_new_function": "passed",
    "test_bug_fixture_finds_the_growing_cache": "failed",
    "test_clean_fixture_with_one_program": "passed",
}


@pytest.mark.parametrize("order", [*ORDER_RUNS, *(f"alone:{name}" for name in SWEPT)])
def test_the_sweep_fails_what_it_finds_in_every_order(planted, monkeypatch, order):
    args = ("--tpumem-leak-check=all", "--tpumem-leak-threshold=10MB")
    _in_order(planted, monkeypatch, "test_sweep_programs.py", order, SWEPT, *args)


SUITES = {"leaky": ("test_leaky.py",), "clean": ("test_clean.py",), "programs": ("test_sweep_programs.py",)}
WAYS = {"serial": (), "xdist": ("-n", "2")}


# test_orders.py, and test_sweep_programs.py under the sweep, are run serially and under xdist (and
# checked the same way) by the two tests above; test_leaky.py and test_clean.py serially by
# test_leaks.py, whose runs check what each failure says too. (Every test of test_clean.py is leak
# checked at the sweep's threshold already: under --tpumem-leak-check=all its report is the same.)
@pytest.mark.parametrize(
    "suite, way", [("leaky", "xdist"), ("clean", "xdist"), ("programs", "serial"), ("programs", "xdist")]
)
def test_pytest_and_the_plugin_say_the_same_of_every_planted_suite(planted, monkeypatch, suite, way):
    verdicts.run(planted, *SUITES[suite], *WAYS[way], monkeypatch=monkeypatch)


def test_a_budget_of_the_whole_device_counts_what_others_left_and_names_who(planted, monkeypatch):
    """--tpumem-budget-counts=device: what the chip holds while the test runs. The clean twin then
    fails after the test that left 64 MB (144 MB on the device), saying which use judged and who
    left what, where; alone it passes. The default judges its own 80 MB in any order (above)."""
    names = "leaves_array or fit_budget"
    after = verdicts.run(
        planted, "test_orders.py", "-k", names, "--tpumem-budget-counts=device", monkeypatch=monkeypatch
    )
    assert after == {"test_bug_leaves_array_in_module_list": "passed", "test_clean_two_arrays_fit_budget": "failed"}
    result = planted.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "test_orders.py", "-k", names, "--tpumem-budget-counts=device"
    )
    result.stdout.fnmatch_lines(
        [
            "max_hbm: peak 144.0MB on cpu:0 is over the budget of 100.0MB (max_hbm('100MB')), judged by *; everything "
            "on the device counted, what other tests left too (--tpumem-budget-counts=device)*",
            "  cpu:0: start 64.0MB, peak 144.0MB by *; 64.0MB of the start left by other tests (counted: "
            "--tpumem-budget-counts=device)",
            "  64.0MB of the start was left by test_orders.py::test_bug_leaves_array_in_module_list: made at "
            "test_orders.py:* in test_bug_leaves_array_in_module_list, kept by global _SEEN of test_orders",
        ]
    )
    alone = verdicts.run(
        planted,
        "test_orders.py::test_clean_two_arrays_fit_budget",
        "--tpumem-budget-counts=device",
        monkeypatch=monkeypatch,
    )
    assert alone == {"test_clean_two_arrays_fit_budget": "passed"}


def test_the_ledgers_summary_shows_a_test_files_control_characters_escaped(pytester):
    """A test file whose name holds ESC, leaving arrays alive: the ledger names it, escaped as pytest
    escapes an id, so nothing it prints drives the terminal; its plain twin is named as it is."""
    body = "import jax.numpy as jnp\nHOLD = []\ndef test_x():\n    HOLD.append(jnp.ones((3_000_000,)))\n"
    (pytester.path / "test_\x1b[31mred.py").write_text(body)
    (pytester.path / "test_ünï.py").write_text(body)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    ledger = out[out.index("tpumem ledger") :]
    assert "\x1b" not in ledger
    assert "test_\\x1b[31mred.py::test_x" in ledger and "test_ünï.py::test_x" in ledger
