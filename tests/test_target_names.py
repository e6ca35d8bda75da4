"""How a TPU target is named (targets.parse_target): a generation, optionally a topology, and the
one line that refuses any other name (no libtpu needed)."""

import pytest

from pytest_tpumem.targets import GENERATIONS, Target, TargetError, parse_target


def test_a_generation_alone_takes_its_default_topology_and_its_figures():
    assert parse_target("v4") == Target("v4", "v4:2x2x1", GENERATIONS["v4"][0], "TensorCore", 2)
    assert parse_target("v5p").topology == "v5p:2x2x1" and parse_target("v6e").topology == "v6e:2x2"


def test_a_topology_of_two_or_three_dimensions_is_kept_as_written():
    assert parse_target("v5e:4x4").topology == "v5e:4x4"
    assert parse_target("v5p:2x2x4").topology == "v5p:2x2x4"
    assert parse_target("v6e:16x16").hbm_per_device == parse_target("v6e").hbm_per_device


def test_a_name_is_read_whatever_its_case_and_surrounding_spaces():
    assert parse_target("  V5E:2X2 \n") == parse_target("v5e:2x2")
    assert parse_target("\tTPU7X").topology == "tpu7x:2x2x1"


@pytest.mark.parametrize("bad", ["v9", "v5e:2by2", "v5e:4", "v5e:2x2x2x2", "v5e:", "", "gpu", None, 5])
def test_any_other_name_is_one_line_listing_the_known_ones(bad):
    with pytest.raises(TargetError) as e:
        parse_target(bad)
    assert str(e.value) == (
        f"target: {bad!r} is not a TPU target; use one of v2, v3, v4, v5e, v5p, v6e, tpu7x, optionally with a "
        "topology (v5e:2x2, v6e:4x4)"
    )


def test_the_line_names_where_the_name_came_from():
    with pytest.raises(TargetError, match=r"^--tpumem-target: 'v5' is not a TPU target; "):
        parse_target("v5", what="--tpumem-target")
