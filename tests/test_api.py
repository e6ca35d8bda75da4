"""The public API without pytest: names, the leak report, bad input, and the TPU-target check."""

import importlib.util
import re

import jax.numpy as jnp
import pytest

import pytest_tpumem
from pytest_tpumem import check_leaks, message

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="needs libtpu (the tpu extra)")


def test_dir_lists_the_public_names_and_each_resolves():
    names = dir(pytest_tpumem)
    for name in pytest_tpumem.__all__:
        assert name in names
        home = importlib.import_module(f"pytest_tpumem.{pytest_tpumem._PUBLIC[name]}")
        assert getattr(pytest_tpumem, name) is getattr(home, name) and name in vars(home), name
    assert {"check_leaks", "PeakTracker", "TargetCheck", "LeakReport", "Verdict"} <= set(pytest_tpumem.__all__)


def test_leaking_is_a_bool_and_the_series_are_named():
    kept = []
    report = check_leaks(lambda: kept.append(jnp.ones((1_000_000,), jnp.float32)), threshold="2MB")
    assert report.leaking is True and report.leaking is True
    assert [s.name for s in report.leaking_series][0].endswith("live arrays")
    kept.clear()
    clean = check_leaks(lambda: jnp.ones((1_000_000,), jnp.float32).sum(), threshold="2MB")
    assert clean.leaking is False and clean.leaking_series == ()
    # The host's malloc may grow past 2MB in the first runs under load (its arenas); then more runs
    # confirm there is no leak, and the line says so: the verdict is the same either way.
    assert re.match(
        r"leak_check: no leak over 3 iterations(, confirmed by 3 more runs)?: the largest growth was ", message(clean)
    ), message(clean)


def test_a_function_that_is_not_callable_is_one_clear_error():
    with pytest.raises(
        ValueError, match=r"^fn=Array\(\[1\., 1\., 1\.\], dtype=float32\) is not callable; pass the function"
    ):
        check_leaks(jnp.ones(3))


def test_the_fixture_given_an_array_fails_with_one_line(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp

        def test_it(leak_check):
            leak_check(jnp.ones(3))
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["leak_check(...): fn=Array(*) is not callable; pass the function to run, then its arguments"]
    )
    out = result.stdout.str()
    assert "Traceback" not in out and "pytest_tpumem/" not in out and "During handling" not in out


@needs_libtpu
def test_the_target_check_runs_without_pytest():
    import jax

    from pytest_tpumem import TargetCheck

    def scale(x):
        return x * 2

    with TargetCheck("v5e", budget="28MB") as check:
        jax.jit(scale)(jnp.ones((1_000_000, 3), jnp.float32)).block_until_ready()
    result = check.result()
    assert result.failed and result.verdict.value == "over budget"
    assert result.need >= 32 * 10**6  # 12 MB on the CPU, 16 MB on a v5e (tile padding), in and out
    assert message(result).startswith("max_hbm: scale needs 32.0MB per device compiled for v5e:2x2")
    with TargetCheck("v5e") as roomy:
        jax.jit(scale)(jnp.ones((1000, 3), jnp.float32)).block_until_ready()
    assert not roomy.result().failed


@needs_libtpu
def test_a_target_check_inside_another_records_the_same_programs():
    """Nested captures (a TargetCheck inside a target-judged test): each reads the program."""
    import jax

    from pytest_tpumem import TargetCheck

    def triple(x):
        return x * 3

    with TargetCheck("v5e") as outer:
        with TargetCheck("v5e") as inner:
            jax.jit(triple)(jnp.ones((1000, 3), jnp.float32)).block_until_ready()
    names = [p.name for p in inner.capture.programs]
    assert "triple" in names and inner.capture.errors == []
    assert [p.name for p in outer.capture.programs] == names
    assert inner.result().need == outer.result().need > 0


def test_a_tracker_stopped_before_it_started_says_so():
    from pytest_tpumem import PeakTracker

    with pytest.raises(
        RuntimeError, match=r"^PeakTracker.stop\(\) before start\(\): call tracker = PeakTracker\(\).start\(\) first$"
    ):
        PeakTracker().stop()


def test_a_source_path_is_shown_from_the_directory_the_test_is_in_now(tmp_path, monkeypatch):
    from pytest_tpumem.readings.frames import short_path

    f = str(tmp_path / "pkg" / "model.py")
    monkeypatch.chdir(tmp_path)
    assert short_path(f) == "pkg/model.py"
    monkeypatch.chdir(tmp_path.parent)
    assert short_path(f) == f"{tmp_path.name}/pkg/model.py"  # not the first answer, cached
