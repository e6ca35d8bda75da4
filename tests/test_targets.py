"""TPU targets on a CPU runner: compile for a TPU topology with libtpu (no TPU) and judge the result."""

import importlib.util

import pytest

from pytest_tpumem.readings import tpu
from pytest_tpumem.targets import GiB, TargetError, parse_target

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu: pip install 'pytest-tpumem[tpu]' (CI installs it)"
)


def test_target_names():
    v5e = parse_target("v5e")
    assert (v5e.topology, v5e.device, v5e.hbm_per_device) == ("v5e:2x2", "chip", int(15.75 * GiB))
    assert parse_target("v6e:4x4").topology == "v6e:4x4"
    assert parse_target("V4").device == "TensorCore"
    assert parse_target("tpu7x").devices_per_chip == 2
    for bad in ("v9", "v5e:2by2", "", None, "gpu"):
        with pytest.raises(TargetError, match="is not a TPU target; use one of v2, v3, v4, v5e, v5p, v6e, tpu7x"):
            parse_target(bad)


def test_bad_target_option_is_a_usage_error(pytester):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--tpumem-target=v9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-tpumem: --tpumem-target: 'v9' is not a TPU target; use one of *"])


def test_missing_libtpu_fails_with_what_to_install_or_skips_when_asked(pytester, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a))
    tpu.topology_devices.cache_clear()
    try:
        pytester.makepyfile(
            """
            import jax.numpy as jnp

            def test_needs_a_target(hbm_estimate):
                hbm_estimate(lambda x: x * 2, jnp.ones(8), target="v5e")
            """
        )
        result = pytester.runpytest()
        result.assert_outcomes(failed=1)  # a gate that silently skips would be a green light for an unchecked budget
        result.stdout.fnmatch_lines(
            [
                'hbm_estimate: compiling for v5e:2x2 needs libtpu: pip install "jax?tpu?" (from a checkout of pytest-tpumem: pip install ".?tpu?"*'
            ]
        )
        result.stdout.fnmatch_lines(["*; --tpumem-no-libtpu=skip skips such tests instead"])
        skipped = pytester.runpytest("-rs", "--tpumem", "--tpumem-no-libtpu=skip")
        skipped.assert_outcomes(skipped=1)
        skipped.stdout.fnmatch_lines(
            [
                "0 measured, 0 failed a memory check; 1 budgeted test skipped, not judged on the TPU target: no libtpu*",
                "SKIPPED * compiling for v5e:2x2 needs libtpu: pip install*; skipped, as --tpumem-no-libtpu=skip asks",
            ]
        )
    finally:
        tpu.topology_devices.cache_clear()


def test_fixture_without_a_target_says_how_to_give_one(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp

        def test_no_target(hbm_estimate):
            hbm_estimate(lambda x: x * 2, jnp.ones(8))
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["hbm_estimate(target=...): '' is not a TPU target; use one of *; or set --tpumem-target"]
    )


@needs_libtpu
def test_fits_v6e_but_not_v5e(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        TEN_GIB = jax.ShapeDtypeStruct((10 * 2**30 // 4,), jnp.float32)  # in and out: 20 GiB a device

        @pytest.mark.parametrize("target", ["v5e", "v6e"])
        def test_double(hbm_estimate, target):
            report = hbm_estimate(lambda x: x * 2, TEN_GIB, target=target)
            assert report.peak >= 20 * 2**30 and report.headroom > 0
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_double?v5e? _*",
            "hbm_estimate: over the budget of 16.9GB: v5e:2x2: the TPU compiler refused the program: it needs 21.5GB "
            "per device, 16.9GB is available (required for HLO temporaries (20.00G) exceeds available HBM (15.75G))",
            "*= tpumem =*",
            "over budget *v5e:2x2 21.5GB *16.9GB*compiled for v5e:2x2*test_double?v5e?",
            "ok *v6e:2x2 21.5GB *33.6GB*test_double?v6e?",
        ]
    )


@needs_libtpu
def test_sharded_program_needs_less_per_device_with_a_larger_mesh(hbm_estimate):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    from pytest_tpumem.readings.tpu import target_mesh

    batch = jax.ShapeDtypeStruct((16384, 8192), jnp.float32)  # 512 MiB

    def step(x):
        return (jnp.tanh(x) * 2).sum(axis=1)

    one = hbm_estimate(step, batch, target="v5e:2x2")
    four = hbm_estimate(step, batch, target="v5e:2x2", mesh=target_mesh("v5e:2x2", {"data": 4}), in_shardings=P("data"))
    sixteen = hbm_estimate(
        step, batch, target="v5e:4x4", mesh=target_mesh("v5e:4x4", {"data": 16}), in_shardings=P("data")
    )
    assert (one.devices, four.devices, sixteen.devices) == (1, 4, 16)
    assert one.arguments == 512 * 2**20
    assert four.arguments == one.arguments // 4 and sixteen.arguments == one.arguments // 16
    assert one.peak > four.peak > sixteen.peak


@needs_libtpu
def test_budget_below_the_chip_and_the_header(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp

        def test_budgeted(hbm_estimate):
            x = jax.ShapeDtypeStruct((2**28,), jnp.float32)  # 1 GiB in, 1 GiB out
            hbm_estimate(lambda a: a + 1, x, budget="1.5GiB")
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-target=v6e")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "tpumem: target v6e:2x2: 33.6GB usable HBM per chip (budgeted tests' programs are compiled for it; hbm_estimate's default)",
            "hbm_estimate: over the budget of 1.6GB: v6e:2x2 (1 device): 2.1GB of HBM per device of 33.6GB*",
            "  largest buffers on v6e:2x2 (per device, as laid out):",
            "*1.1GB  f32?268435456?  argument 0 (a)",
            "*1.1GB  f32?268435456?  output from jit(<lambda>)/add *at test_budget_below_the_chip_and_the_header.py:5*",
        ]
    )
