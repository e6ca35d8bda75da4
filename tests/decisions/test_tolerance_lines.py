"""How a tolerance is read (decisions.compare.parse_tolerance, parse_tolerances) and the one line
that refuses each bad one; and when a baseline's figures are not comparable (foreign)."""

import pytest

from pytest_tpumem.decisions.compare import (
    DETERMINISTIC_SINCE,
    Tolerance,
    ToleranceError,
    foreign,
    parse_tolerance,
    parse_tolerances,
)

MB = 10**6
ACCEPTED = (
    "accepted: peak:10%, peak:50MB, growth:10MB, residue:10MB, host_residue:50MB (a figure, a colon, a "
    "percentage or a size)"
)


@pytest.mark.parametrize(
    ("text", "tolerance"),
    [
        ("peak:10%", Tolerance("peak", 0.1, True, "peak:10%")),
        ("  PEAK : 12.5 % ", Tolerance("peak", 0.125, True, "peak:12.5 %")),
        ("peak:.5%", Tolerance("peak", 0.005, True, "peak:.5%")),
        ("peak:1000000%", Tolerance("peak", 10_000.0, True, "peak:1000000%")),
        ("peak:50MB", Tolerance("peak", 50.0 * MB, False, "peak:50MB")),
        ("Growth: 1MiB", Tolerance("growth", float(2**20), False, "growth:1MiB")),
        ("host_residue:16B", Tolerance("host_residue", 16.0, False, "host_residue:16B")),
    ],
)
def test_a_tolerance_is_its_figure_its_amount_and_how_it_was_written(text, tolerance):
    assert parse_tolerance(text) == tolerance


def test_a_tolerance_names_no_figure_without_a_colon_or_with_another_name():
    with pytest.raises(ToleranceError) as e:
        parse_tolerance("peak 10%")
    assert str(e.value) == (
        f"--tpumem-compare-fail: 'peak 10%' names no figure of peak, growth, residue, host_residue; {ACCEPTED}"
    )
    with pytest.raises(ToleranceError) as e:
        parse_tolerance("memory:10%", where="ini tpumem_compare_fail")
    assert str(e.value).startswith("ini tpumem_compare_fail: 'memory:10%' names no figure of ")


def test_a_tolerance_is_split_at_its_first_colon():
    with pytest.raises(ToleranceError) as e:
        parse_tolerance("peak:5MB:")
    assert str(e.value).startswith("--tpumem-compare-fail 'peak:5MB:': '5MB:' is not a size; ")
    assert str(e.value).endswith(f"; {ACCEPTED}")


def test_a_percentage_past_a_million_is_refused_and_a_million_is_not():
    assert parse_tolerance("peak:1000000%").amount == 10_000.0
    with pytest.raises(ToleranceError) as e:
        parse_tolerance("peak:1000000.5%")
    assert str(e.value) == f"--tpumem-compare-fail: 'peak:1000000.5%': a percentage from 0 to 1000000; {ACCEPTED}"


@pytest.mark.parametrize(
    ("figure", "clean"),
    [
        ("growth", "grows by about 0 per iteration"),
        ("residue", "leaves about 0 behind"),
        ("host_residue", "leaves about 0 behind"),
    ],
)
def test_a_percentage_of_a_figure_about_0_is_refused_with_why(figure, clean):
    with pytest.raises(ToleranceError) as e:
        parse_tolerance(f"{figure}:10%", where="--x")
    assert str(e.value) == (
        f"--x: '{figure}:10%': {figure} takes a size ({figure}:10MB), not a percentage: clean code {clean}, so a "
        "percentage of it is noise"
    )


def test_several_tolerances_given_apart_or_comma_separated():
    assert parse_tolerances(["peak:10%, growth:10MB,", " ", "residue:1MB"]) == (
        parse_tolerance("peak:10%"),
        parse_tolerance("growth:10MB"),
        parse_tolerance("residue:1MB"),
    )
    assert parse_tolerances([]) == ()
    with pytest.raises(ToleranceError, match=r"^ini tpumem_compare_fail: 'memory:1MB' names no figure"):
        parse_tolerances(["peak:10%,memory:1MB"], where="ini tpumem_compare_fail")
    with pytest.raises(ToleranceError, match=r"^--tpumem-compare-fail: 'memory:1MB' names no figure"):
        parse_tolerances(["memory:1MB"])


# --- a baseline that is not comparable ---------------------------------------------------------


def test_another_platform_or_device_kind_is_named_and_a_context_that_does_not_say_is_comparable():
    cpu = {"platform": "cpu", "device_kind": "cpu"}
    assert foreign({"platform": "gpu"}, cpu) == "it was taken on platform 'gpu', this run is on 'cpu'"
    assert foreign(cpu, {"platform": "cpu", "device_kind": "TPU v5e"}) == (
        "it was taken on device kind 'cpu', this run is on 'TPU v5e'"
    )
    assert foreign(cpu, cpu) == ""
    assert foreign({"platform": "gpu", "device_kind": "H100"}, {}) == ""  # no measured test started a backend
    assert foreign({}, cpu) == ""


def test_figures_read_another_way_are_not_comparable_whichever_side_is_older():
    v = DETERMINISTIC_SINCE
    assert foreign({}, {}, v, v) == "" and foreign({}, {}, v - 1, v - 1) == "" and foreign({}, {}, v, v + 1) == ""
    older = (
        f"it was written by an older pytest-tpumem (schema version {v - 1}), whose peaks and growth were read "
        "another way (a sampler could set a peak); take a new baseline"
    )
    assert foreign({}, {}, v - 1, v) == older and foreign({}, {}, v, v - 1) == older
    assert foreign({}, {}, v - 1, v + 1) == older
