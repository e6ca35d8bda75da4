"""decisions.peak.judge on hand-built readings: what each device's figure carries beside its peak
(its label, limit, free memory, stand-in, floor) and what the report carries (host peak, profile,
whether the programs were read); own_use over several devices; the sampler's warning at 0."""

from pytest_tpumem.decisions.peak import DevicePeak, LeftBehind, PeakReport, judge, own_use
from pytest_tpumem.measuring.peak import PeakReadings
from pytest_tpumem.readings.devices import DeviceMemory

MB = 10**6
GB = 10**9


def gpu(used, limit=80 * GB, largest_free=None, label="gpu:0"):
    return DeviceMemory(label, used, in_use=used, limit=limit, largest_free=largest_free)


def cpu(live, label="cpu:0"):
    return DeviceMemory(label, live)  # no memory_stats: live arrays stand in


def test_a_device_s_figure_carries_its_label_limit_and_what_is_free_at_the_end():
    start = {"gpu:0": gpu(10 * MB), "gpu:1": gpu(20 * MB)}
    end = {"gpu:0": gpu(30 * MB, largest_free=GB), "gpu:1": gpu(20 * MB, limit=16 * GB)}
    report = judge(PeakReadings(start, end, reset={}))
    zero, one = report.devices["gpu:0"], report.devices["gpu:1"]
    assert (zero.device, one.device) == ("gpu:0", "gpu:1")
    assert (zero.peak, zero.witness, zero.start) == (30 * MB, "end", 10 * MB)
    assert (zero.limit, one.limit) == (80 * GB, 16 * GB)  # the end's reading
    assert (zero.free, one.free) == (80 * GB - 30 * MB, 16 * GB - 20 * MB)  # the limit less what is in use
    assert (zero.largest_free, one.largest_free) == (GB, None)
    assert zero.stand_in is False


def test_free_memory_is_known_only_where_the_limit_and_the_use_both_are():
    no_limit = judge(PeakReadings({"gpu:0": gpu(MB)}, {"gpu:0": gpu(MB, limit=None)}, reset={}))
    assert no_limit.devices["gpu:0"].free is None
    on_cpu = judge(PeakReadings({"cpu:0": cpu(MB)}, {"cpu:0": DeviceMemory("cpu:0", MB, limit=8 * GB)}, reset={}))
    assert on_cpu.devices["cpu:0"].free is None  # a limit, but no bytes in use: live arrays say nothing of free


def test_live_arrays_stand_in_where_the_runtime_reports_no_use():
    report = judge(PeakReadings({"cpu:0": cpu(4 * MB)}, {"cpu:0": cpu(6 * MB)}, reset={}))
    d = report.devices["cpu:0"]
    assert (d.stand_in, d.peak, d.limit, d.free) == (True, 6 * MB, None, None)


def test_a_device_with_no_end_reading_is_judged_on_its_start():
    report = judge(PeakReadings({"gpu:0": gpu(12 * MB), "gpu:1": gpu(5 * MB)}, {"gpu:1": gpu(7 * MB)}, reset={}))
    alone = report.devices["gpu:0"]
    assert (alone.peak, alone.witnesses, alone.limit, alone.free) == (
        12 * MB,
        {"start": 12 * MB, "end": 12 * MB},
        80 * GB,
        80 * GB - 12 * MB,
    )
    assert report.devices["gpu:1"].peak == 7 * MB


def test_the_report_carries_the_host_peak_the_profile_and_whether_programs_were_read():
    start, end = {"gpu:0": gpu(MB)}, {"gpu:0": gpu(MB)}
    watched = judge(PeakReadings(start, end, reset={}, host_peak=3 * GB, profile=b"pprof", floor=4096))
    assert (watched.host_peak, watched.profile, watched.uncounted) == (3 * GB, b"pprof", "")
    assert watched.devices["gpu:0"].floor == 4096
    unwatched = judge(PeakReadings(start, end, reset={}, watched=False, floor=4096))
    assert (unwatched.host_peak, unwatched.profile, unwatched.uncounted) == (None, None, "unavailable")
    assert unwatched.devices["gpu:0"].floor == 0  # no program read: no step below the exact peak


def _device(label, start, peak, sampler=None):
    return DevicePeak(label, start, peak, "end", {"start": start, "end": peak}, None, True, sampler=sampler)


def test_own_use_of_the_whole_device_keeps_every_device():
    devices = {"cpu:0": _device("cpu:0", 8 * MB, 9 * MB), "cpu:1": _device("cpu:1", 6 * MB, 7 * MB)}
    left = (LeftBehind("t.py::a", {"cpu:0": 5 * MB, "cpu:1": 2 * MB}),)
    whole = own_use(PeakReport(devices, None), left, whole_device=True)
    assert {k: (d.peak, d.left) for k, d in whole.devices.items()} == {
        "cpu:0": (9 * MB, 5 * MB),
        "cpu:1": (7 * MB, 2 * MB),
    }
    one_left = own_use(PeakReport(devices, None), (LeftBehind("t.py::a", {"cpu:0": 5 * MB}),))
    assert {k: (d.peak, d.left) for k, d in one_left.devices.items()} == {
        "cpu:0": (4 * MB, 5 * MB),
        "cpu:1": (7 * MB, 0),
    }


def test_own_use_takes_a_sampler_that_saw_only_what_others_left_to_zero():
    d = _device("cpu:0", 8 * MB, 9 * MB, sampler=8 * MB)
    own = own_use(PeakReport({"cpu:0": d}, None), (LeftBehind("t.py::a", {"cpu:0": 8 * MB}),)).devices["cpu:0"]
    assert (own.sampler, own.start, own.peak) == (0, 0, MB)


def test_no_sampler_warns_of_nothing_even_at_a_budget_of_zero():
    report = PeakReport({"cpu:0": _device("cpu:0", 0, 0)}, None)
    assert report.sampled_over(0) == [] and report.over(0) == []
    sampled = PeakReport({"cpu:0": _device("cpu:0", 0, 0, sampler=1)}, None)
    assert sampled.sampled_over(0) == [sampled.devices["cpu:0"]]
