"""A fake accelerator for what the CPU backend cannot show: memory_stats() as each GPU allocator
returns it, with a lifetime peak and bytes_limit. It wraps a real CPU device (same id, client and
live arrays), so everything else the plugin reads stays real. A conftest hands the fakes to the
plugin through its ``pytest_tpumem_devices`` hook. Each behaviour tested with it also has a
real-GPU twin in test_gpu.py.

What each allocator returns is from jax's and XLA's sources (/work/validation_research.md, section 2):
the keys of ``jaxlib/py_device.cc : PyDevice::MemoryStats`` (always num_allocs, bytes_in_use,
peak_bytes_in_use, largest_alloc_size, bytes_reserved, peak_bytes_reserved,
largest_free_block_bytes; bytes_limit, bytes_reservable_limit, pool_bytes, peak_pool_bytes only
where the allocator sets them), with the values each allocator gives them.

Not modelled: BFC's rounding of each chunk to 256 B (the fake sees the total bytes of live arrays,
not each allocation), out-of-memory (nothing is refused at the limit), and num_allocs /
largest_alloc_size beyond a rough count (the plugin reads neither).
"""

from pytest_tpumem.readings import devices as sources

DEVICES = []

ALLOCATORS = ("bfc", "cuda_async", "platform", "unknown")
# jaxlib/py_device.cc : PyDevice::MemoryStats: the keys always there (the others only where set)
ALWAYS = (
    "num_allocs",
    "bytes_in_use",
    "peak_bytes_in_use",
    "largest_alloc_size",
    "bytes_reserved",
    "peak_bytes_reserved",
    "largest_free_block_bytes",
)
# A pytester run's conftest that installs the fakes (install's arguments as ``kwargs``) and hands
# them to the plugin through its pytest_tpumem_devices hook.
CONFTEST = """
import fakedevice

def pytest_configure(config):
    fakedevice.install(**{kwargs!r})

def pytest_tpumem_devices(config):
    return list(fakedevice.DEVICES)
"""
DEFAULT_LIMIT = 16 * 10**9  # bytes_limit where none is given: BFC and cuda_async always report one
MIN_REGION = 2 * 2**20  # xla/tsl/framework/bfc_allocator.cc : BFCAllocator (allow_growth: the first region is 2 MiB)


class FakeAccelerator:
    """One device's allocator, as jaxlib reads it. ``allocator``:

    - ``"bfc"`` (XLA_PYTHON_CLIENT_ALLOCATOR=default or bfc), with ``preallocate`` (the default, as
      XLA's) or growing in regions (XLA_PYTHON_CLIENT_PREALLOCATE=false);
    - ``"cuda_async"``;
    - ``"platform"``: memory_stats() is None;
    - ``"unknown"``: a PJRT C API plugin that fills no field: -1 for every field always present.

    ``largest_free`` (BFC only) plants holes in the pool: the largest free chunk the allocator
    reports, in place of the fake's own (the pool less what is in use, in one piece).
    """

    device_kind = "fake accelerator"

    def __init__(self, real, limit=None, largest_free=None, allocator="bfc", preallocate=True):
        if allocator not in ALLOCATORS:
            raise ValueError(f"allocator {allocator!r}: one of {', '.join(ALLOCATORS)}")
        self.real = real
        self.limit = DEFAULT_LIMIT if limit is None else limit
        self.largest_free = largest_free
        self.allocator = allocator
        self.preallocate = preallocate
        self.extra = 0  # bytes in use that no jax.Array holds (a program's, the runtime's)
        self.high_water = 0
        self.num_allocs = 0
        self.largest_alloc = 0
        self.regions = []  # BFC: the sizes of the regions taken from the device, in order
        # bfc_allocator.cc : BFCAllocator: curr_region_allocation_bytes_ is the whole memory_limit_
        # without allow_growth (preallocate), else 2 MiB
        self.next_region = self.limit if preallocate else MIN_REGION
        self._last = 0

    def __getattr__(self, name):  # id, platform, client, ... of the real device
        return getattr(self.real, name)

    @property
    def pool(self):
        return sum(self.regions)

    def _in_use(self):
        live = sources.live_bytes_by_device().get(sources.device_label(self.real), 0)
        return live + self.extra

    def _allocate(self, in_use):
        """The allocator sees ``in_use`` bytes in use: counts it, and (BFC) extends its pool to hold it."""
        if in_use > self._last:
            self.num_allocs += 1
            self.largest_alloc = max(self.largest_alloc, in_use - self._last)
        self._last = in_use
        self.high_water = max(self.high_water, in_use)
        while self.allocator == "bfc" and in_use > self.pool and self.pool < self.limit:
            self._extend(in_use - self.pool)

    def _extend(self, rounded_bytes):
        """bfc_allocator.cc : BFCAllocator::Extend: the region is curr_region_allocation_bytes_, doubled
        until the request fits (or after the region, where it already fitted), capped at what is left
        under memory_limit_; pool_bytes grows by it and never shrinks."""
        available = self.limit - self.pool
        increased = False
        while rounded_bytes > self.next_region:
            self.next_region *= 2
            increased = True
        self.regions.append(min(self.next_region, available))
        if not increased:
            self.next_region *= 2

    def _largest_free_chunk(self):
        """bfc_allocator.cc : BFCAllocator::LargestFreeChunk: a chunk never spans two regions, so the
        largest free one is within a region taken so far (0 before the first). The fake packs what
        is in use into the regions in order."""
        if self.largest_free is not None:
            return self.largest_free
        left, largest = self._last, 0
        for size in self.regions:
            used = min(left, size)
            left -= used
            largest = max(largest, size - used)
        return largest

    def run_kernel(self, temp_bytes):
        """A program that needs temp_bytes of scratch for a moment: only the runtime's peak (and a
        BFC pool grown to hold it) sees it."""
        in_use = self._in_use()
        self._allocate(in_use + temp_bytes)
        self._allocate(in_use)

    def memory_stats(self):
        in_use = self._in_use()
        self._allocate(in_use)
        if self.allocator == "platform":
            # se_gpu_pjrt_client.cc : StreamExecutorGpuDevice::GetAllocatorStats: Unimplemented for the
            # platform allocator (not a MultiDeviceAdapter in 0.10.2; no stats from
            # StreamExecutorMemoryAllocator later), which py_device.cc : PyDevice::MemoryStats turns into None
            return None
        if self.allocator == "unknown":
            # xla/pjrt/c_api_client/pjrt_c_api_client.cc : PjRtCApiDevice::GetAllocatorStats: -1 for the
            # unset non-optional fields, optional ones absent. The C API always fills bytes_in_use
            # (pjrt_c_api.h : PJRT_Device_MemoryStats_Args); -1 there too is the worst case
            return dict.fromkeys(ALWAYS, -1)
        stats = {
            "num_allocs": self.num_allocs,
            "bytes_in_use": in_use,
            "peak_bytes_in_use": self.high_water,  # the process's lifetime peak: jaxlib resets it nowhere
            "largest_alloc_size": self.largest_alloc,
            "bytes_limit": self.limit,
            # no allocator behind memory_stats() sets bytes_reserved: the AllocatorStats default, 0
            "bytes_reserved": 0,
            "peak_bytes_reserved": 0,
        }
        if self.allocator == "cuda_async":
            # gpu_cudamallocasync_allocator.cc : GpuCudaMallocAsyncAllocator (bytes_limit = pool_size) and
            # GetStats: bytes in use and peak tracked per pointer, largest_free_block_bytes never
            # filled (the struct's 0), no pool_bytes / peak_pool_bytes
            stats["largest_free_block_bytes"] = 0
            return stats
        # bfc_allocator.cc : BFCAllocator (bytes_limit = memory_limit_, pool_bytes = peak_pool_bytes = 0
        # at construction), Extend (pool_bytes += each region), GetStats (largest_free_block_bytes =
        # LargestFreeChunk()); bytes_in_use is the chunks in use, not the pool
        stats["largest_free_block_bytes"] = self._largest_free_chunk()
        stats["pool_bytes"] = self.pool
        stats["peak_pool_bytes"] = self.pool  # regions are never given back (DeallocateFreeRegions only on OOM)
        return stats


def install(limit=None, largest_free=None, allocator="bfc", preallocate=True):
    """Wrap every local device in a fake; returns them, for the ``pytest_tpumem_devices`` hook."""
    import jax

    DEVICES[:] = [FakeAccelerator(d, limit, largest_free, allocator, preallocate) for d in jax.local_devices()]
    return list(DEVICES)
