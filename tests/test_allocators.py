"""What each GPU allocator's memory_stats() says, and what the plugin makes of it, on the fake
accelerator (fakedevice.py): one test per assumption, each naming the source it pins
(/work/validation_research.md, section 2). Real-GPU twins: test_gpu.py, under the allocator the
lent GPU runs (BFC with preallocation unless the environment says otherwise)."""

import gc

import fakedevice
import jax
import jax.numpy as jnp
import pytest
from fakedevice import ALLOCATORS, MIN_REGION, FakeAccelerator

from pytest_tpumem.readings.devices import live_bytes_by_device, read_devices

MB = 10**6
GB = 10**9
LIMIT = 16 * GB

ALWAYS = set(fakedevice.ALWAYS)


@pytest.fixture
def cpu0():
    return jax.local_devices()[0]


@pytest.fixture
def new(cpu0):
    """A fake on cpu:0 that starts empty: the arrays earlier tests of this process left alive are not its."""
    gc.collect()
    left = live_bytes_by_device().get("cpu:0", 0)

    def make(**kwargs):
        fake = FakeAccelerator(cpu0, **kwargs)
        fake.extra = -left
        return fake

    return make


# --- the fake itself: the keys and values each allocator's source gives -------------------------


def test_bfc_reports_its_pool_apart_from_what_is_in_use_and_nothing_reserved(cpu0, new):
    """bfc_allocator.cc : BFCAllocator (pool_bytes 0 until the first Extend; bytes_limit set with or
    without preallocation), Extend (preallocate: one region of the whole limit), GetStats."""
    fake = new(limit=LIMIT)
    before = fake.memory_stats()
    assert set(before) == ALWAYS | {"bytes_limit", "pool_bytes", "peak_pool_bytes"}  # no bytes_reservable_limit
    assert (before["pool_bytes"], before["largest_free_block_bytes"], before["bytes_limit"]) == (0, 0, LIMIT)
    held = jax.device_put(jnp.ones((10 * MB // 4,), jnp.float32), cpu0)
    stats = fake.memory_stats()
    assert stats["bytes_in_use"] == 10 * MB  # the chunks in use, not the pool
    assert stats["pool_bytes"] == stats["peak_pool_bytes"] == LIMIT
    assert stats["largest_free_block_bytes"] == LIMIT - 10 * MB
    assert stats["bytes_reserved"] == stats["peak_bytes_reserved"] == 0
    del held


def test_bfc_without_preallocation_grows_in_doubling_regions_and_keeps_them(new):
    """bfc_allocator.cc : BFCAllocator (allow_growth: the first region 2 MiB), Extend (each region
    double the last, or doubled until the request fits), LargestFreeChunk (within the regions taken)."""
    fake = new(limit=LIMIT, preallocate=False)
    fake.run_kernel(MB)  # fits the first region
    assert fake.regions == [MIN_REGION]
    fake.run_kernel(3 * MB)  # past it: the next region, twice the first
    assert fake.regions == [MIN_REGION, 2 * MIN_REGION]
    fake.run_kernel(40 * MB)  # needs 40MB - 6 MiB more: doubled from 8 MiB until it fits, 64 MiB
    assert fake.regions == [MIN_REGION, 2 * MIN_REGION, 32 * MIN_REGION]
    stats = fake.memory_stats()
    assert stats["pool_bytes"] == stats["peak_pool_bytes"] == 35 * MIN_REGION  # never given back
    assert stats["bytes_in_use"] == 0 and stats["peak_bytes_in_use"] == 40 * MB
    assert stats["largest_free_block_bytes"] == 32 * MIN_REGION  # the largest region, free: not the limit
    fake.run_kernel(2 * LIMIT)
    assert fake.memory_stats()["pool_bytes"] == LIMIT  # capped at bytes_limit


def test_cuda_async_reports_no_pool_and_a_largest_free_block_of_0(cpu0, new):
    """gpu_cudamallocasync_allocator.cc : GpuCudaMallocAsyncAllocator, GetStats: bytes_limit is the
    pool size; largest_free_block_bytes and bytes_reserved never filled (0); no pool keys."""
    fake = new(limit=LIMIT, allocator="cuda_async")
    held = jax.device_put(jnp.ones((10 * MB // 4,), jnp.float32), cpu0)
    stats = fake.memory_stats()
    assert set(stats) == ALWAYS | {"bytes_limit"}
    assert (stats["bytes_in_use"], stats["bytes_limit"], stats["largest_free_block_bytes"]) == (10 * MB, LIMIT, 0)
    del held


def test_the_platform_allocator_has_no_statistics(new):
    """se_gpu_pjrt_client.cc : StreamExecutorGpuDevice::GetAllocatorStats (Unimplemented), which
    py_device.cc : PyDevice::MemoryStats returns as None."""
    assert new(allocator="platform").memory_stats() is None
    assert read_devices([new(allocator="platform")])["cpu:0"].in_use is None


def test_a_c_api_plugin_that_fills_nothing_reports_minus_one_and_the_reading_says_unknown(new):
    """pjrt_c_api_client.cc : PjRtCApiDevice::GetAllocatorStats: -1 for unset non-optional fields."""
    fake = new(allocator="unknown")
    assert fake.memory_stats() == dict.fromkeys(ALWAYS, -1)
    read = read_devices([fake])["cpu:0"]
    assert (read.in_use, read.peak, read.limit, read.largest_free, read.pool) == (None, None, None, None, None)


def test_a_reading_carries_the_pool_where_the_allocator_reports_one(cpu0, new):
    held = jax.device_put(jnp.ones((MB // 4,), jnp.float32), cpu0)
    bfc = read_devices([new(limit=LIMIT)])["cpu:0"]
    assert (bfc.in_use, bfc.pool, bfc.limit, bfc.largest_free) == (MB, LIMIT, LIMIT, LIMIT - MB)
    growing = read_devices([new(limit=LIMIT, preallocate=False)])["cpu:0"]
    assert (growing.pool, growing.largest_free) == (MIN_REGION, MIN_REGION - MB)
    assert read_devices([new(allocator="cuda_async")])["cpu:0"].pool is None
    del held


def test_an_allocator_the_fake_does_not_know_is_refused(cpu0):
    with pytest.raises(ValueError, match="one of " + ", ".join(ALLOCATORS)):
        FakeAccelerator(cpu0, allocator="vmm")


# --- what the plugin makes of them ---------------------------------------------------------------

BUDGETED = """
import jax.numpy as jnp, pytest

KEPT = []

@pytest.mark.max_hbm("{budget}")
def test_keeps_40MB():
    KEPT.append(jnp.ones((10_000_000,), jnp.float32))
"""


def test_platform_allocator_live_arrays_stand_in_and_the_header_says_so(fake):
    """PyDevice::MemoryStats returns None under XLA_PYTHON_CLIENT_ALLOCATOR=platform: the plugin
    judges on live arrays, as on CPU, and says so in the header and the failure."""
    pytester = fake(allocator="platform")
    pytester.makepyfile(BUDGETED.format(budget="30MB"))
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "max_hbm: peak 40.0MB on cpu:0 * judged by body-end; live arrays stand in*",
            "tpumem: jax *, backend cpu (fake accelerator), 2 local devices: cpu:0, cpu:1",
            "tpumem: sources: live arrays, no memory_stats, *; live arrays stand in for device memory",
        ]
    )
    assert "CPU backend" not in result.stdout.str()  # a GPU under the platform allocator is no CPU


@pytest.mark.parametrize("preallocate", [True, False])
def test_bfc_budget_is_judged_on_bytes_in_use_not_the_pool(fake, preallocate):
    """bfc_allocator.cc : FinishChunkAllocation (bytes_in_use: the chunks in use) vs Extend
    (pool_bytes: what was taken from the device, the whole limit with preallocation): a 40MB test
    under a 100MB budget passes although the pool is 16GB; its twin under 30MB fails at 40MB."""
    pytester = fake(limit=LIMIT, preallocate=preallocate)
    pytester.makepyfile(
        test_under=BUDGETED.format(budget="100MB"),
        test_over=BUDGETED.format(budget="30MB"),
    )
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB*"])
    assert "stand in" not in result.stdout.str()


def test_cuda_async_budget_and_no_largest_free_block_said(fake):
    """gpu_cudamallocasync_allocator.cc : GetStats: bytes_in_use per pointer judges the budget;
    largest_free_block_bytes is the struct's 0, never filled: not said, and no fragmentation claimed."""
    pytester = fake(limit=LIMIT, allocator="cuda_async")
    pytester.makepyfile(BUDGETED.format(budget="30MB"))
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["max_hbm: peak 40.0MB on cpu:0 is over the budget of 30.0MB*"])
    text = result.stdout.str()
    assert "(fragmented" not in text and "largest free block" not in text


def test_bfc_growing_is_not_called_fragmented_while_it_can_take_more(fake):
    """bfc_allocator.cc : LargestFreeChunk counts only the regions taken so far (64 MiB here), while
    Extend can still take up to bytes_limit - pool_bytes: the whole 16GB is one allocation away."""
    pytester = fake(limit=LIMIT, preallocate=False)
    pytester.makepyfile(BUDGETED.format(budget="30MB"))
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["  cpu:0: start 0B, peak 40.0MB by * at the end free 16.0GB, largest free block 15.9GB"]
    )
    assert "(fragmented" not in result.stdout.str()


def test_bfc_preallocated_with_one_free_piece_is_not_fragmented(fake):
    """Clean twin of test_fake_device.py::test_a_fragmented_device_is_said_next_to_the_peak (the
    planted one: a 1GB largest free chunk in a 16GB pool): the pool less what is in use, in one piece."""
    pytester = fake(limit=LIMIT)
    pytester.makepyfile(BUDGETED.format(budget="30MB"))
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "  cpu:0: start 0B, peak 40.0MB by * at the end free 16.0GB, largest free block 16.0GB",
            # cpu:1 allocated nothing: pool_bytes and largest_free_block_bytes 0, the whole limit to take
            "cpu:1: start 0B, peak 0B by * at the end free 16.0GB, largest free block 16.0GB",
        ]
    )
    assert "(fragmented" not in result.stdout.str()


def test_bfc_grown_to_its_limit_and_split_is_fragmented(fake):
    """Once Extend can take no more (pool_bytes = bytes_limit), LargestFreeChunk is the largest
    allocation that fits: a growing pool split into pieces is fragmented as a preallocated one is."""
    pytester = fake(limit=200 * MB, preallocate=False, largest_free=10 * MB)
    pytester.makepyfile(
        """
        import fakedevice, jax.numpy as jnp, pytest

        KEPT = []

        @pytest.mark.max_hbm("30MB")
        def test_fills_the_pool():
            fakedevice.DEVICES[0].run_kernel(temp_bytes=200 * 10**6)  # the pool grows to the limit
            KEPT.append(jnp.ones((10_000_000,), jnp.float32))
        """
    )
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["  cpu:0: * at the end free 160.0MB, largest free block 10.0MB (fragmented: a larger allocation fails*"]
    )
