"""Real-accelerator twins of test_fake_device.py: run where jax's default backend is a GPU (or TPU).

On the CPU backend these are skipped; docs/validation/ records the runs on a lent GPU.
"""

import json
import os
import subprocess
import sys

import pytest

# What jax's default backend is and what its first device's memory_stats() holds, read in a process of
# its own: starting the backend here would have this process preallocate 75% of the GPU (jaxlib's
# default), leaving each pytester subprocess below a quarter of it.
_PROBE = (
    "import json, jax; d = jax.devices()[0]; "
    "print(json.dumps({'backend': jax.default_backend(), 'stats': d.memory_stats() or {}}))"
)
_probe = subprocess.run(
    [sys.executable, "-c", _PROBE],
    capture_output=True,
    text=True,
    env={**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    check=False,
)
PROBE = json.loads(_probe.stdout.strip().splitlines()[-1]) if _probe.returncode == 0 else {"backend": "?", "stats": {}}

pytestmark = pytest.mark.skipif(
    PROBE["backend"] not in ("gpu", "tpu"), reason="needs a GPU or TPU backend (memory_stats)"
)


def test_runtime_peak_sees_program_temporaries(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        def big_temp(a, b):
            return (a @ b).sum()  # the 8192x8192 float32 product (268 MB) is a temporary

        @pytest.mark.max_hbm("200MB")
        def test_temp_over():
            a = jnp.ones((8192, 256), jnp.float32)
            b = jnp.ones((256, 8192), jnp.float32)
            jax.jit(big_temp)(a, b).block_until_ready()

        @pytest.mark.max_hbm("2GB")
        def test_temp_under():
            a = jnp.ones((8192, 256), jnp.float32)
            b = jnp.ones((256, 8192), jnp.float32)
            jax.jit(big_temp)(a, b).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=1)
    # Wildcards: the figure is the card's (the allocator rounds each buffer up, cuBLAS takes a workspace
    # that differs between an H100 and an H200), and so is the witness (the runtime's peak where it
    # counts the workspace, else the program's moment): 268.4MB of output plus 16.8MB of arguments.
    result.stdout.fnmatch_lines(["max_hbm: peak 2??.?MB on gpu:0 is over the budget of 200.0MB*judged by *"])
    assert "stand in" not in result.stdout.str()


def test_header_and_leak_exhaustion_use_the_real_bytes_limit(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest
        kept = []

        @pytest.mark.leak_check(iterations=3, threshold="100MB")
        def test_leaks():
            kept.append(jnp.ones((50_000_000,), jnp.float32))  # 200 MB an iteration
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [  # the devices are read at the first measured test, so they are listed in the summary
            "leak_check: gpu:0 * grew 200.0MB/iteration*",
            "*gpu:0 bytes in use: * exhausted in ~* more iterations (limit *GB)",
            "*= tpumem =*",
            "tpumem: *bytes_limit *GB",
            "tpumem: sources: live arrays, memory_stats (bytes_in_use, peak_bytes_in_use, bytes_limit)*",
        ]
    )


def test_out_of_memory_on_the_device_then_the_next_test_runs(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        def test_too_big():
            limit = jax.devices()[0].memory_stats()["bytes_limit"]
            x = jnp.ones((2 * limit // 2**21, 2**19), jnp.float32)  # twice the limit, in rows of 2 MiB
            x.block_until_ready()

        @pytest.mark.max_hbm("1GB")
        def test_after():
            x = jnp.ones((100_000_000,), jnp.float32)
            x.block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["out of device memory in this test (budget 1.0GB): RESOURCE_EXHAUSTED*"])


def test_the_largest_free_block_is_reported_next_to_the_peak(pytester):
    """Real twin of test_fake_device.py::test_a_fragmented_device_is_said_next_to_the_peak: where the
    allocator reports largest_free_block_bytes, the section says it next to the free bytes."""
    stats = PROBE["stats"]
    if stats.get("largest_free_block_bytes", -1) <= 0 and "pool_bytes" not in stats:
        pytest.skip("this allocator does not fill largest_free_block_bytes (cuda_async: 0; a plugin: -1)")
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.max_hbm("1GB")
        def test_small():
            jnp.ones((1_000_000,), jnp.float32).block_until_ready()
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpu:0: start *; at the end free *, largest free block *"])
    assert "(fragmented" not in result.stdout.str()  # one small array in a fresh process: nothing split


def test_the_ledger_reads_the_runtime_and_names_what_a_test_left_and_the_peaks_it_raised(pytester):
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp

        KEPT = []

        def big_temp(a, b):
            return (a @ b).sum()  # the 8192x8192 float32 product (268 MB) is a temporary

        def test_temporary_only():
            a = jnp.ones((8192, 256), jnp.float32)
            b = jnp.ones((256, 8192), jnp.float32)
            jax.jit(big_temp)(a, b).block_until_ready()

        def test_keeps_64MB():
            KEPT.append(jnp.ones((16_000_000,), jnp.float32))

        def test_clean():
            assert jnp.ones(3).sum() == 3
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=ledger.jsonl")
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "3 tests read between, each after its teardown; device memory as the runtime's bytes in use:",
            "  gpu:0: * at the first test -> * of * at the end",
            "1 test left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):",
            "  64.0MB  test_the_ledger_*.py::test_keeps_64MB",
        ]
    )
    # The temporary raised the high-water mark, so its test's peak is read: at least the 268.4MB product
    # and the 16.8MB of arguments (the allocator's rounding and cuBLAS's workspace are the card's).
    import re

    said = re.search(r"^  gpu:0 ([\d.]+)MB  \S+::test_temporary_only$", text, re.M)
    assert said is not None, text
    assert 285.2 <= float(said.group(1)) < 1000
    assert (
        "MB  test_the_ledger_reads_the_runtime_and_names_what_a_test_left_and_the_peaks_it_raised.py::test_clean"
        not in text
    )


def test_two_xdist_workers_share_one_gpu_under_tpumem_gpus(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp

        def test_uses_the_gpu(worker_id):
            x = jnp.ones((250_000_000,), jnp.float32)  # 1 GB each, on the one GPU both workers share
            assert float(x[:10].sum()) == 10.0
            assert jax.devices()[0].memory_stats()["bytes_limit"] > 10**9
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--dist", "each", "-n", "2", "--tpumem-gpus=1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["tpumem: --tpumem-gpus: 2 pytest-xdist workers on 1 GPU: each worker a share of *"])
