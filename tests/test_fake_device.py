"""What the CPU backend cannot show (memory_stats: runtime peak, bytes_limit, -1 for unknown),
on a fake accelerator that wraps the real CPU devices. Real-GPU twins: test_gpu.py."""


def test_runtime_peak_catches_a_transient_the_other_witnesses_miss(fake):
    pytester = fake(limit=16 * 10**9)
    pytester.makepyfile(
        """
        import fakedevice, jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        def test_kernel_scratch_over():
            x = jnp.ones((1_000_000,), jnp.float32)
            fakedevice.DEVICES[0].run_kernel(temp_bytes=2 * 10**9)  # 2 GB of scratch for a moment

        @pytest.mark.max_hbm("3GB")
        def test_kernel_scratch_under():
            fakedevice.DEVICES[0].run_kernel(temp_bytes=2 * 10**9)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["max_hbm: peak 2.0GB on cpu:0 is over the budget of 1.0GB (max_hbm('1GB')), judged by runtime-peak"]
    )
    assert "stand in" not in result.stdout.str().split("= tpumem =")[0].split("test_kernel_scratch_over")[1]


def test_lifetime_peak_from_before_the_test_is_not_blamed_on_it(fake):
    """jax cannot reset peak_bytes_in_use: a peak set by an earlier test must not fail a later one."""
    pytester = fake(limit=16 * 10**9)
    pytester.makepyfile(
        """
        import fakedevice, pytest

        def test_earlier_big_program():
            fakedevice.DEVICES[0].run_kernel(temp_bytes=5 * 10**9)

        @pytest.mark.max_hbm("1GB")
        def test_small_after():
            pass
        """
    )
    pytester.runpytest_subprocess("--tpumem").assert_outcomes(passed=2)


def test_header_shows_stats_and_limit(fake):
    pytester = fake(limit=16 * 10**9)
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_subprocess("--tpumem")
    result.stdout.fnmatch_lines(
        [
            "tpumem: jax *, backend cpu (fake accelerator), 2 local devices: cpu:0, cpu:1, bytes_limit 16.0GB",
            "tpumem: sources: live arrays, memory_stats (bytes_in_use, peak_bytes_in_use, bytes_limit), programs run, *",
        ]
    )


def test_leak_failure_says_when_the_device_runs_out(fake):
    pytester = fake(limit=200_000_000)
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest
        kept = []

        @pytest.mark.leak_check(iterations=3, threshold="10MB")
        def test_leaks_toward_the_limit():
            kept.append(jnp.ones((5_000_000,), jnp.float32))  # 20 MB an iteration
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "leak_check: cpu:0 live arrays grew 20.0MB/iteration*",
            "  cpu:0 live arrays: 20.0MB -> 40.0MB (+20.0MB) -> 60.0MB (+20.0MB) -> 80.0MB (+20.0MB); exhausted in ~6 more iterations (limit 200.0MB)",
            "  cpu:0 bytes in use: 20.0MB -> * (+20.0MB); exhausted in ~6 more iterations (limit 200.0MB)",
        ]
    )


def test_minus_one_means_unknown_and_live_arrays_stand_in(fake):
    pytester = fake(allocator="unknown")
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("30MB")
        def test_over():
            x = jnp.ones((10_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["max_hbm: peak 40.0MB on cpu:0 * judged by body-end; live arrays stand in*"])
    result.stdout.fnmatch_lines(
        ["tpumem: sources: live arrays, memory_stats (every field unknown (-1)), *; live arrays stand in*"]
    )
    assert "bytes in use" not in result.stdout.str() and "-1B" not in result.stdout.str()


def test_a_fragmented_device_is_said_next_to_the_peak(fake):
    pytester = fake(limit=16 * 10**9, largest_free=10**9)
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("30MB")
        def test_over():
            x = jnp.ones((10_000_000,), jnp.float32)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "  cpu:0: start 0B, peak 40.0MB by * at the end free 16.0GB, largest free block 1.0GB "
            "(fragmented: a larger allocation fails although the total would fit)"
        ]
    )


def test_the_ledger_reads_the_runtime_and_names_memory_no_array_holds_and_the_peaks_it_can_read(fake):
    pytester = fake(limit=16 * 10**9)
    pytester.makepyfile(
        """
        import fakedevice, jax.numpy as jnp

        KEPT = []

        def test_small_kernel():
            fakedevice.DEVICES[0].run_kernel(temp_bytes=10**9)

        def test_keeps_and_big_kernel():
            KEPT.append(jnp.ones((5_000_000,), jnp.float32))  # 20 MB
            fakedevice.DEVICES[0].run_kernel(temp_bytes=3 * 10**9)

        def test_under_the_mark():
            fakedevice.DEVICES[0].run_kernel(temp_bytes=2 * 10**9)

        def test_runtime_holds_more():
            fakedevice.DEVICES[0].extra = 500 * 10**6  # memory no jax.Array holds (a program's, the runtime's)
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=off")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "4 tests read between, each after its teardown; device memory as the runtime's bytes in use:",
            "  cpu:0: 0B at the first test -> 520.0MB of 16.0GB (3%) at the end",  # the conftest started jax
            "  cpu:1: 0B at the first test -> 0B of 16.0GB (0%) at the end",
            "1 test grew the device memory that no live array holds by 10.0MB or more (programs jax compiled, "
            "the runtime's own buffers):",
            "  +500.0MB  test_the_ledger_reads_the_runtime_and_names_memory_no_array_holds_and_the_peaks_it_can_read.py"
            "::test_runtime_holds_more",
            "the highest peaks, of the tests that raised the runtime's high-water mark *",
            "  cpu:0 3.0GB  *::test_keeps_and_big_kernel",
            "  cpu:0 1.0GB  *::test_small_kernel",
            "1 test left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):",
            "  20.0MB  *::test_keeps_and_big_kernel",
        ]
    )
    assert "::test_under_the_mark" not in result.stdout.str()  # under an earlier test's mark: no peak of its own
