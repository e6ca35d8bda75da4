"""Marker signatures: parsing, help and errors come from one function per marker."""

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.decisions.leakoptions import LeakOptions
from pytest_tpumem.glue import markers
from pytest_tpumem.glue.options import resolve
from pytest_tpumem.glue.plan import plan_for


class Mark:
    """What pytest hands a marker parser: positional and keyword arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def test_help_and_errors_come_from_the_signature():
    assert markers.signature(markers.leak_check) == (
        f"leak_check(enabled=True, *, iterations={defaults.ITERATIONS}, warmup={defaults.WARMUP}, threshold=None, clear_caches=True, host=None)"
    )
    assert markers.signature(markers.max_hbm) == "max_hbm(limit=None, *, target=None)"
    help_line = markers.help_line(markers.leak_check)
    assert help_line.startswith(markers.signature(markers.leak_check) + ": run the test body warmup+iterations times")
    assert help_line.endswith("Default threshold 100.0MB. Needs --tpumem.")
    with pytest.raises(markers.MarkerError) as e:
        markers.leak_options(Mark(iteration=3), LeakOptions())
    assert str(e.value).endswith("accepted: " + markers.signature(markers.leak_check))


def test_parsing():
    assert markers.parse(markers.max_hbm, Mark("20GB")) == {"limit": 20 * 10**9, "target": None}
    assert markers.parse(markers.max_hbm, Mark(target="v5e:2x2"))["target"].topology == "v5e:2x2"
    run = LeakOptions(threshold=7 * 10**6, host=False)  # the run's settings
    assert markers.leak_options(Mark(threshold="50kB", warmup=0), run) == LeakOptions(
        iterations=defaults.ITERATIONS, warmup=0, threshold=50_000, clear_caches=True, host=False
    )
    assert markers.leak_options(Mark(host="200MB"), run).host == 200 * 10**6
    assert markers.leak_options(Mark(host=True), run).host is True
    assert markers.leak_options(Mark(host=False), LeakOptions()).host is False
    assert markers.leak_options(Mark(threshold=None, host=None), run) == LeakOptions(threshold=7 * 10**6, host=False)
    assert markers.leak_options(Mark(False), run) is None
    with pytest.raises(
        markers.MarkerError,
        match=r"^@pytest.mark.leak_check\(host='lots'\): host: 'lots' is not a size; .*; or True \(judged with the threshold\) or False \(not judged\)$",
    ):
        markers.leak_options(Mark(host="lots"), run)
    with pytest.raises(markers.MarkerError, match=r"^@pytest.mark.leak_check\(False, iterations=0\): iterations=0: "):
        markers.leak_options(Mark(False, iterations=0), run)  # checked even where it is switched off
    assert markers.spell(Mark("1GB", target="v5e")) == "('1GB', target='v5e')"


def test_the_plan_is_made_once_from_markers_and_settings(pytester):
    item = pytester.getitem(
        """
        import pytest

        @pytest.mark.max_hbm("1GB")
        @pytest.mark.leak_check(iterations=2)
        def test_func():
            pass
        """
    )
    settings = resolve({"tpumem_leak_threshold": "5MB"}.get, {}.get)
    plan = plan_for(item, settings)
    assert plan.budget.limit == 10**9 and plan.budget.spelled == "max_hbm('1GB')" and plan.recompile
    assert (plan.leak.iterations, plan.leak.threshold) == (2, 5 * 10**6)
    assert plan.measured and plan.error is None


@pytest.mark.parametrize("recompile, cleared", [("marked", False), ("all", True), ("none", False)])
def test_a_default_budget_clears_caches_only_when_asked(pytester, recompile, cleared):
    settings = resolve({"tpumem_max_hbm": "2GB", "tpumem_recompile": recompile}.get, {}.get)
    plan = plan_for(pytester.getitem("def test_func(): pass"), settings)
    assert plan.budget.spelled == "--tpumem-max-hbm / ini tpumem_max_hbm" and plan.recompile is cleared
    assert plan_for(pytester.getitem("def test_func(): pass"), resolve({}.get, {}.get)).measured is False


def test_a_bad_marker_is_the_plans_error_not_an_exception(pytester):
    item = pytester.getitem(
        """
        import pytest

        @pytest.mark.max_hbm()
        def test_func():
            pass
        """
    )
    plan = plan_for(item, resolve({}.get, {}.get))
    assert not plan.measured
    assert (
        plan.error == '@pytest.mark.max_hbm(): give a limit ("16GB") or a TPU target (target="v5e", or --tpumem-target)'
    )


def test_the_docs_show_the_signatures_the_code_has():
    """The pages written by hand that spell a marker's signature out (the reference is generated)."""
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs"
    pages = {markers.max_hbm: "budgets.md", markers.leak_check: "leaks.md"}
    for marker in markers.MARKERS:
        text = (docs / pages[marker]).read_text()
        assert f"@pytest.mark.{markers.signature(marker)}" in text, (pages[marker], markers.signature(marker))
