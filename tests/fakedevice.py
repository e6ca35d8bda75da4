"""A fake accelerator for what the CPU backend cannot show: memory_stats() with a lifetime peak and
bytes_limit. It wraps a real CPU device (same id, client and live arrays), so everything else the
plugin reads stays real. A conftest hands the fakes to the plugin through its
``pytest_tpumem_devices`` hook. Each behaviour tested with it also has a real-GPU twin in test_gpu.py.
"""

from pytest_tpumem.readings import devices as sources

DEVICES = []


class FakeAccelerator:
    device_kind = "fake accelerator"

    def __init__(self, real, limit=None, unknown=False, largest_free=None):
        self.real = real
        self.limit = limit
        self.largest_free = largest_free  # what the allocator would report as its largest free block
        self.unknown = unknown  # report -1 as PJRT C API plugins do for unfilled fields
        self.extra = 0
        self.high_water = 0

    def __getattr__(self, name):  # id, platform, client, ... of the real device
        return getattr(self.real, name)

    def _in_use(self):
        live = sources.live_bytes_by_device().get(sources.device_label(self.real), 0)
        return live + self.extra

    def run_kernel(self, temp_bytes):
        """A program that needs temp_bytes of scratch for a moment: only the runtime's peak sees it."""
        self.high_water = max(self.high_water, self._in_use() + temp_bytes)

    def memory_stats(self):
        in_use = self._in_use()
        self.high_water = max(self.high_water, in_use)
        if self.unknown:
            return {"bytes_in_use": -1, "peak_bytes_in_use": -1, "num_allocs": 0}
        stats = {"bytes_in_use": in_use, "peak_bytes_in_use": self.high_water, "num_allocs": 1}
        if self.limit is not None:
            stats["bytes_limit"] = self.limit
        if self.largest_free is not None:
            stats["largest_free_block_bytes"] = self.largest_free
        return stats


def install(limit=None, unknown=False, largest_free=None):
    """Wrap every local device in a fake; returns them, for the ``pytest_tpumem_devices`` hook."""
    import jax

    DEVICES[:] = [FakeAccelerator(d, limit, unknown, largest_free) for d in jax.local_devices()]
    return list(DEVICES)
