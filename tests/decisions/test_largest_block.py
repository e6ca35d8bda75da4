"""decisions.peak.largest_block: the largest block an allocator could hand out, from what its
memory_stats() reports (BFC's pool, cuda_async's unfilled 0), and the fragmentation said from it."""

from pytest_tpumem.decisions.peak import judge, largest_block
from pytest_tpumem.measuring.peak import PeakReadings
from pytest_tpumem.readings.devices import DeviceMemory

MB = 10**6
GB = 10**9


def stats(used=MB, limit=16 * GB, largest_free=None, pool=None):
    return DeviceMemory("gpu:0", used, in_use=used, limit=limit, largest_free=largest_free, pool=pool)


def test_not_reported_is_not_known():
    assert largest_block(stats(pool=16 * GB)) is None
    assert largest_block(stats()) is None


def test_a_bfc_pool_at_its_limit_gives_its_largest_free_chunk():
    assert largest_block(stats(largest_free=GB, pool=16 * GB)) == GB
    assert largest_block(stats(largest_free=0, pool=16 * GB)) == 0  # full: a reported 0 is a 0


def test_a_bfc_pool_that_can_grow_gives_the_larger_of_its_free_chunk_and_the_room_left():
    assert largest_block(stats(largest_free=30 * MB, pool=70 * MB)) == 16 * GB - 70 * MB
    assert largest_block(stats(largest_free=0, pool=0)) == 16 * GB  # before the first allocation
    assert largest_block(stats(limit=100 * MB, largest_free=60 * MB, pool=70 * MB)) == 60 * MB


def test_a_bfc_pool_without_a_limit_gives_its_free_chunk():
    assert largest_block(stats(limit=None, largest_free=0, pool=70 * MB)) == 0
    assert largest_block(stats(limit=None, largest_free=5 * MB, pool=70 * MB)) == 5 * MB


def test_no_pool_and_0_is_not_filled_and_any_other_figure_is_the_allocator_s():
    assert largest_block(stats(largest_free=0)) is None  # cuda_async
    assert largest_block(stats(largest_free=3 * GB)) == 3 * GB
    assert largest_block(stats(largest_free=1)) == 1


def end_of(end):
    return judge(PeakReadings({"gpu:0": stats()}, {"gpu:0": end}, reset={})).devices["gpu:0"]


def test_fragmentation_is_judged_on_the_largest_block():
    growing = end_of(stats(used=40 * MB, largest_free=27 * MB, pool=67 * MB))
    assert (growing.largest_free, growing.fragmented) == (16 * GB - 67 * MB, False)
    unfilled = end_of(stats(used=40 * MB, largest_free=0))
    assert (unfilled.largest_free, unfilled.fragmented) == (None, False)
    split = end_of(stats(used=40 * MB, largest_free=GB, pool=16 * GB))
    assert (split.largest_free, split.fragmented) == (GB, True)
