"""The marker form of TPU targets: the programs a max_hbm test runs on CPU, compiled for the target
(libtpu, no TPU) and judged there."""

import importlib.util

import pytest

from pytest_tpumem import targets

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu: pip install 'pytest-tpumem[tpu]' (CI installs it)"
)


@needs_libtpu
def test_tile_padding_passes_on_cpu_and_fails_on_the_target(pytester):
    """Planted: f32[N, 3] is laid out as f32[N, 4] on a TPU, a third more than on the CPU. The same
    budget passes on the CPU's figures and fails on the target's; a smaller twin passes both."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        def scale(x):
            return x * 2

        @pytest.mark.max_hbm("28MB", target="v5e")
        def test_padded():
            x = jnp.ones((1_000_000, 3))
            y = jax.jit(scale)(x)  # 12 MB in, 12 MB out here; 16 MB each on v5e
            y.block_until_ready()

        @pytest.mark.max_hbm("28MB", target="v5e")
        def test_twin():
            x = jnp.ones((500_000, 3))
            jax.jit(scale)(x).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-rA")  # absolute figures: a fresh process
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_padded _*",
            "max_hbm: scale needs 32.0MB per device compiled for v5e:2x2, over the budget of 28.0MB (max_hbm('28MB', target='v5e'))",
            "  scale (test_tile_padding*.py:3): v5e:2x2 (1 device): 32.0MB of HBM per device of 16.9GB*",
            "    largest buffers on v5e:2x2 (per device, as laid out):",
            "*  16.0MB  f32?1000000,3?  argument 0 (x)",
            "*  16.0MB  f32?1000000,3?  output from jit(scale)/mul *at test_tile_padding*.py:4 (scale)",
            "*= tpumem =*",
            # the target's figure judges; the CPU's is shown after it, marked
            "over budget *v5e:2x2 32.0MB, cpu:0 24.0MB (shown)*28.0MB*compiled for v5e:2x2*test_padded",
            "ok *v5e:2x2 16.0MB*test_twin",
        ]
    )
    result.stdout.fnmatch_lines(["cpu:0: start *, peak 24.0MB by *"])  # the CPU's own figure is within the budget


@needs_libtpu
@pytest.mark.parametrize("option", [False, True])
def test_no_limit_means_the_chip_and_a_refusal_is_a_budget_failure(pytester, option):
    """Programs lowered ahead of time count too, so a 20 GiB program is judged without running it:
    refused by v5e's compiler, fine on v6e."""
    target = "" if option else 'target="v5e"'
    pytester.makepyfile(
        f"""
        import jax, jax.numpy as jnp, pytest

        BIG = jax.ShapeDtypeStruct((10 * 2**30 // 4,), jnp.float32)  # 10 GiB in, 10 GiB out

        def double(x):
            return x * 2

        @pytest.mark.max_hbm({target})
        def test_on_v5e():
            jax.jit(double).lower(BIG)

        @pytest.mark.max_hbm(target="v6e")
        def test_on_v6e():
            jax.jit(double).lower(BIG)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", *(["--tpumem-target=v5e"] if option else []))  # absolute figures
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_on_v5e _*",
            "max_hbm: the TPU compiler refused double for v5e:2x2, over the budget of 16.9GB (max_hbm(*): v5e's usable HBM)",
            "  double (test_no_limit*.py:5): v5e:2x2: the TPU compiler refused the program: it needs 21.5GB per device, "
            "16.9GB is available (required for HLO temporaries (20.00G) exceeds available HBM (15.75G))",
            "    largest buffers on v5e:2x2 (per device, as laid out):",
            "*  10.7GB  f32?2684354560?  argument 0 (x)",
            "*  10.7GB  f32?2684354560?  output from jit(double)/mul*",
        ]
    )
    if option:
        result.stdout.fnmatch_lines(
            ["tpumem: target v5e:2x2: 16.9GB usable HBM per chip (budgeted tests' programs are compiled for it*"]
        )


@needs_libtpu
def test_the_target_option_judges_every_budgeted_test(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        def test_marked():
            jax.jit(lambda x: x + 1)(jnp.ones(1000)).block_until_ready()

        def test_default_budget():
            jax.jit(lambda x: x - 1)(jnp.ones(1000)).block_until_ready()

        def test_runs_no_program():
            pass
        """
    )
    result = pytester.runpytest("--tpumem", "--tpumem-target=v6e:2x2", "--tpumem-max-hbm=2GB", "-rA")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    # the jit is compiled for the target; ones() is two small eager operations, which are not
    assert (
        out.count("compiled for v6e:2x2: 1 program the test ran; 2 eager operations on under 1 MiB each not compiled")
        == 2
    ), out
    assert out.count("compiled for v6e:2x2: 0 programs the test ran (none was lowered during the test;") == 1, out


@needs_libtpu
def test_a_program_the_target_cannot_hold_is_named_not_passed(pytester):
    """A program sharded over both CPU devices cannot be laid out on a one-chip topology: the test
    fails and says which program and why, instead of passing unjudged."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, numpy as np, pytest
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

        @pytest.mark.max_hbm(target="v5e:1x1")
        def test_two_devices():
            mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
            x = jax.device_put(jnp.ones(1024), NamedSharding(mesh, P("data")))
            jax.jit(lambda a: a * 2)(x).block_until_ready()
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "max_hbm: 1 program the test ran could not be compiled for v5e:1x1, so the test is not judged there*",
            "  <lambda> (*): not compiled for the target: it uses cpu:1, and v5e:1x1 has 1 devices; pick a topology*",
        ]
    )


@needs_libtpu
def test_sharded_programs_keep_their_layout_on_the_target():
    """The capture itself, in this process: a program sharded over the 2 CPU devices is laid out on
    2 of v5e:2x2's chips (half the argument each), a with_sharding_constraint inside it included."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from pytest_tpumem.decisions.target import judge_programs
    from pytest_tpumem.readings.capture import ProgramCapture

    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    split = NamedSharding(mesh, P("data"))

    def step(a):
        return jax.lax.with_sharding_constraint(jnp.tanh(a) * 2, split)

    jax.clear_caches()
    capture = ProgramCapture()
    with capture:
        whole = jnp.ones(2**22)  # 16 MiB
        jax.jit(step)(jax.device_put(whole, split)).block_until_ready()
        jax.jit(lambda a: jnp.tanh(a) * 2)(whole).block_until_ready()
    from jax._src import pjit

    assert pjit._resolve_and_lower.__name__ == "_resolve_and_lower"  # the hook is gone again
    assert not capture.errors
    judged = {j.program: j for j in judge_programs(capture.programs, targets.parse_target("v5e"))}
    sharded, single = judged["step"], judged["<lambda>"]
    assert sharded.reason == "" and single.reason == ""
    assert (sharded.estimate.devices, single.estimate.devices) == (2, 1)
    assert sharded.estimate.arguments == single.estimate.arguments // 2 == 2**21 * 4
    assert sharded.estimate.peak < single.estimate.peak


def test_tests_without_a_target_install_nothing(pytester):
    pytester.makepyfile(
        """
        import pytest
        from jax._src import pjit

        @pytest.mark.max_hbm("1GB")
        def test_budget_only():
            assert pjit._resolve_and_lower.__name__ == "_resolve_and_lower"

        def test_plain():
            assert pjit._resolve_and_lower.__name__ == "_resolve_and_lower"
        """
    )
    pytester.runpytest("--tpumem").assert_outcomes(passed=2)


def test_missing_libtpu_fails_before_the_test_runs_or_skips_and_is_counted(pytester, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm(target="v5e")
        def test_needs_libtpu():
            raise AssertionError("the body ran")

        @pytest.mark.max_hbm("1GB")
        def test_on_this_run_only():
            pass
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "judging this test on v5e:2x2 (max_hbm(target='v5e'): v5e's usable HBM) needs libtpu, which is not installed: "
            'pip install "jax?tpu?"*; --tpumem-no-libtpu=skip skips such tests instead'
        ]
    )
    assert "the body ran" not in result.stdout.str()
    skipped = pytester.runpytest("--tpumem", "-rs", "--tpumem-no-libtpu=skip")
    skipped.assert_outcomes(skipped=1, passed=1)
    skipped.stdout.fnmatch_lines(
        [
            "1 measured, 0 failed a memory check; 1 budgeted test skipped, not judged on the TPU target: no libtpu*",
            "SKIPPED * judging this test on v5e:2x2 *needs libtpu*",
        ]
    )


@needs_libtpu
def test_parallel_workers_compile_for_the_target(pytester):
    """pytest-xdist workers each load libtpu to compile; its lockfile would stop the second one."""
    pytest.importorskip("xdist")
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        @pytest.mark.parametrize("n", range(4))
        @pytest.mark.max_hbm(target="v5e")
        def test_compiles(n):
            jax.jit(lambda x: x * n)(jnp.ones(1000 + n)).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=4)
    assert "lockfile" not in result.stdout.str() + result.stderr.str()


@needs_libtpu
def test_recording_keeps_no_array_alive(pytester):
    """Planted: each run closes over a fresh 10 MB array and drops it. Recording the program for
    the target must not keep those constants alive: the same CPU peak as without a target, and
    no leak in a leak check."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        def body():
            x = jnp.ones((2_500_000,))
            for i in range(8):
                big = jnp.full((2_500_000,), float(i))  # 10 MB, closed over, dropped each time
                jax.jit(lambda a: a + big)(x).block_until_ready()
                del big

        @pytest.mark.max_hbm("60MB")
        def test_cpu_only():
            body()

        @pytest.mark.max_hbm("60MB", target="v5e")
        def test_with_target():
            body()

        @pytest.mark.leak_check(threshold="5MB")
        @pytest.mark.max_hbm("1GB", target="v5e")
        def test_leak_check_with_target():
            body()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-rA")  # absolute figures: a fresh process
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    import re

    peaks = [
        (float(p), end)
        for p, end in re.findall(r"cpu:0: start 0B, peak ([\d.]+)MB by [^\[]+\[start 0B, end (\S+),", out)
    ]
    assert len(peaks) >= 2, out
    # x, the result and one `big` at a time (<= 40 MB), with or without a target; with the
    # constants held it was 180 MB and 160 MB at the end
    assert all(p <= 40.0 and end == "0B" for p, end in peaks), peaks
    # 8 closures of one shape are one program for the target (its constant an argument of 10 MB);
    # the leak check's 4 runs of the body too
    assert out.count("  <lambda> (test_recording_keeps_no_array_alive.py:7): ") == 2, out
    assert "arguments 20.0MB, outputs 10.0MB" in out


@needs_libtpu
def test_mesh_programs_move_to_the_target(pytester):
    """shard_map, a context mesh with explicit axes, and a sharding constraint over both CPU
    devices on arguments jax was free to place: all laid out on the target's devices."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, numpy as np, pytest
        from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
        try:
            from jax import shard_map
        except ImportError:
            from jax.experimental.shard_map import shard_map

        @pytest.mark.max_hbm(target="v5e")
        def test_shard_map():
            m = Mesh(np.array(jax.devices()), ("x",))
            f = jax.jit(shard_map(lambda a: a * 2, mesh=m, in_specs=P("x"), out_specs=P("x")))
            f(jnp.ones((8, 4))).block_until_ready()

        @pytest.mark.max_hbm(target="v5e")
        def test_explicit_mesh():
            m = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
            with (getattr(jax, "set_mesh", None) or jax.sharding.use_mesh)(m):
                x = jax.device_put(jnp.ones((8, 4)), P("x"))
                jax.jit(lambda a: a * 2)(x).block_until_ready()

        @pytest.mark.max_hbm(target="v5e")
        def test_constraint_on_an_unplaced_argument():
            m = Mesh(np.array(jax.devices()), ("x",))
            f = jax.jit(lambda a: jax.lax.with_sharding_constraint(a, NamedSharding(m, P("x"))).sum(0))
            f(jnp.ones((8, 4))).block_until_ready()

        @pytest.mark.max_hbm(target="v5e")
        def test_x64_inside_a_context():
            with jax.enable_x64(True):
                jax.jit(lambda x: x * 2)(jnp.ones(4, dtype=jnp.float64)).block_until_ready()
        """
    )
    # A subprocess: on jax 0.11, after other in-process pytester runs had compiled for v5e, the
    # explicit-mesh context showed up in the next test's compile (not seen in a plain pytest run).
    result = pytester.runpytest_subprocess("--tpumem", "-rA")
    result.assert_outcomes(passed=4)
    assert "not compiled for the target" not in result.stdout.str()


@needs_libtpu
def test_a_target_test_leaves_jax_as_it_found_it(pytester):
    """jax interns an equation's context: moving a shard_map's mesh to the target must make a new
    one, never change the shared default, or every later equation of the process carries the
    target's mesh (a plain test after it, traced anew, sees the default context unchanged)."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, numpy as np, pytest
        from jax._src import core
        from jax.sharding import Mesh, PartitionSpec as P
        try:
            from jax import shard_map
        except ImportError:
            from jax.experimental.shard_map import shard_map

        BEFORE = []

        def test_before():
            BEFORE.append(core.JaxprEqnContext())
            assert BEFORE[0].cur_abstract_mesh.empty

        @pytest.mark.max_hbm(target="v5e")
        def test_shard_map():
            m = Mesh(np.array(jax.devices()), ("x",))
            f = jax.jit(shard_map(lambda a: a * 2, mesh=m, in_specs=P("x"), out_specs=P("x")))
            f(jnp.ones((8, 4))).block_until_ready()

        def test_after():
            assert core.JaxprEqnContext() is BEFORE[0]
            assert core.JaxprEqnContext().cur_abstract_mesh.empty, repr(core.JaxprEqnContext())
            eqn = jax.make_jaxpr(lambda a: a + 1)(jnp.ones(3)).eqns[0]
            assert eqn.ctx.cur_abstract_mesh.empty
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-rA")
    result.assert_outcomes(passed=3)


@needs_libtpu
def test_a_topology_libtpu_cannot_build_fails_before_the_test_runs(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1GB", target="v5e:3x3")
        def test_odd_topology():
            raise AssertionError("the body ran")
        """
    )
    result = pytester.runpytest("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["max_hbm('1GB', target='v5e:3x3'): libtpu cannot lay out the topology v5e:3x3: *"])
    assert "the body ran" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()


def test_a_jax_without_the_capture_hook_fails_the_test_with_one_line(pytester):
    """Where the installed jax lacks the private entry point the capture wraps (simulated here by
    the compat layer's own check), a target test fails before it runs, with what to use instead."""
    pytester.makeconftest(
        """
        from pytest_tpumem.readings import jaxcompat

        real = jaxcompat._missing

        def pytest_configure(config):
            jaxcompat._missing = lambda f: "jax 9.9 has no jax._src.pjit._resolve_and_lower" if f == jaxcompat.PROGRAM_CAPTURE else real(f)
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.max_hbm("1GB", target="v5e")
        def test_target():
            raise AssertionError("the body ran")
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "max_hbm('1GB', target='v5e'): program capture unavailable: jax 9.9 has no jax._src.pjit._resolve_and_lower, "
            "where tpumem catches the programs a test runs; judge them with the hbm_estimate fixture instead"
        ]
    )
    out = result.stdout.str()
    assert "the body ran" not in out and "Traceback" not in out and "AttributeError" not in out


@needs_libtpu
def test_an_eager_operations_buffers_name_the_tests_line_not_tpumems(pytester):
    """jnp.ones outside jit is traced inside jax, once for every caller; compiled for the target
    (and on the CPU, inside tpumem's lowering hook), its buffer still names the test's line."""
    path = pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("10MB", target="v5e")
        def test_eager():
            x = jnp.ones((1_000_000, 3))  # 12 MB here, 16 MB on v5e
            x.block_until_ready()
        """
    )
    line = next(i + 1 for i, text in enumerate(path.read_text().splitlines()) if "jnp.ones((1_000_000, 3))" in text)
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            # the target's figure judges; the CPU's, over the budget too, is shown in the report section after it
            f"*16.0MB  f32?1000000,3?  output from jit(broadcast_in_dim)/broadcast_in_dim * at test_an_eager*.py:{line} (test_eager)",
            f"*12.0MB  f32?1000000,3?  output from jit(broadcast_in_dim)/broadcast_in_dim * at test_an_eager*.py:{line} (test_eager)",
        ]
    )
    failure = result.stdout.str().split("= FAILURES =")[1].split("= tpumem =")[0]
    assert "pytest_tpumem/" not in failure and "pluggy/" not in failure
