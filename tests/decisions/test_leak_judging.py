"""decisions.leak on readings built by hand: which series judge() makes of the measured points and
what it carries into the report, confirmation, the rates and counts a report names (what survived
where, kept programs, host lines), and the iterations left until a device is full."""

import pytest

from pytest_tpumem.decisions.leak import (
    LeakReport,
    Series,
    confirmed,
    host_sites,
    judge,
    kept_in_every_iteration,
    leak_sites,
    to_confirm,
)
from pytest_tpumem.decisions.leakoptions import LeakOptions
from pytest_tpumem.measuring.leak import HOST_MALLOC, HOST_OTHER, HOST_RSS, Runs
from pytest_tpumem.readings.arrays import ArrayInfo
from pytest_tpumem.readings.frames import Frame
from pytest_tpumem.readings.programs import ProgramMade

MB = 10**6
GB = 10**9
T = 10 * MB


def point(base, *, gpu=0, limit=16 * GB, other=True, rss=True):
    """One point as measuring.leak.read gives it: a CPU device, a GPU, and the host split in two."""
    p = {
        "cpu:0 live arrays": (base, None),
        "gpu:0 live arrays": (gpu, limit),
        "gpu:0 bytes in use": (gpu + MB, limit),
        HOST_MALLOC: (100 * MB + base, None),
    }
    if other:
        p[HOST_OTHER] = (50 * MB, None)
    if rss:
        p[HOST_RSS] = (200 * MB + base, None)
    return p


def runs(points, **more):
    return Runs(points, compiled=tuple(range(len(points) - 1)), **more)


def by_name(report):
    return {s.name: s for s in report.series}


# --- judge: the series ------------------------------------------------------------------------


def test_each_source_read_at_every_point_is_a_series_of_its_own_device():
    points = [point(0), point(T, gpu=5), point(2 * T, gpu=9)]
    points[1]["cpu:1 live arrays"] = (7, None)  # read once only: no series
    points[0]["cpu:2 live arrays"] = (7, None)  # read at the baseline only: no series
    report = judge(runs(points), LeakOptions(2, 1, T))
    series = by_name(report)
    assert list(series) == [
        "cpu:0 live arrays",
        "gpu:0 live arrays",
        "gpu:0 bytes in use",
        HOST_MALLOC,
        HOST_OTHER,
        HOST_RSS,
    ]
    assert [s.device for s in report.series] == ["cpu:0", "gpu:0", "gpu:0", "host", "host", "host"]
    assert series["cpu:0 live arrays"].values == (0, T, 2 * T)
    assert series["gpu:0 bytes in use"].values == (MB, 5 + MB, 9 + MB)  # bytes, not the limit beside them
    assert series[HOST_MALLOC].values == (100 * MB, 100 * MB + T, 100 * MB + 2 * T)


def test_a_devices_limit_is_its_own_and_a_target_gives_one_to_a_device_without():
    points = [point(0), point(T)]
    plain = by_name(judge(runs(points), LeakOptions(1, 1, T)))
    assert plain["gpu:0 live arrays"].limit == 16 * GB and plain["gpu:0 live arrays"].limit_source == "bytes_limit"
    assert plain["cpu:0 live arrays"].limit is None
    hbm = (16_911_433_728, "v5e:2x2 usable HBM")
    target = by_name(judge(runs(points), LeakOptions(1, 1, T), capacity=hbm))
    assert (target["cpu:0 live arrays"].limit, target["cpu:0 live arrays"].limit_source) == hbm
    assert (target["gpu:0 live arrays"].limit, target["gpu:0 live arrays"].limit_source) == (16 * GB, "bytes_limit")
    assert all(target[n].limit is None for n in (HOST_MALLOC, HOST_OTHER, HOST_RSS))  # the host has no HBM
    assert target[HOST_MALLOC].limit_source == "bytes_limit"
    moved = by_name(judge(runs([point(0), point(T, limit=8 * GB), point(2 * T, limit=4 * GB)]), LeakOptions(2, 1, T)))
    assert moved["gpu:0 live arrays"].limit == 16 * GB  # the baseline's


def test_host_rss_is_shown_only_where_it_is_split_and_judged_by_every_delta_where_not():
    split = by_name(judge(runs([point(0), point(T)]), LeakOptions(1, 1, T)))
    assert (split[HOST_RSS].every, split[HOST_RSS].shown_only) == (True, True)
    assert not any(split[n].every or split[n].shown_only for n in split if n != HOST_RSS)
    whole = by_name(judge(runs([point(0, other=False), point(T, other=False)]), LeakOptions(1, 1, T)))
    assert (whole[HOST_RSS].every, whole[HOST_RSS].shown_only) == (True, False)
    # the split not read at the baseline: RSS is judged, as where it is never read
    late = by_name(judge(runs([point(0, other=False), point(T)]), LeakOptions(1, 1, T)))
    assert HOST_OTHER not in late and (late[HOST_RSS].every, late[HOST_RSS].shown_only) == (True, False)


def test_judge_judges_the_host_with_the_threshold_and_programs_with_the_caches_cleared_by_default():
    step = ProgramMade("jit_step", "t.py:3")
    r = runs(
        [point(0), point(T), point(2 * T)],
        residue={"gpu:0": 3 * MB, "host": 4 * MB},
        profiles=(b"after warmup", b"after last"),
        new_programs=[[step], [step]],
        held_by_jax=[[step], [step]],
        programs_unjudged="",
    )
    report = judge(r, LeakOptions(2, 1, T))
    assert (report.iterations, report.warmup, report.threshold) == (2, 1, T)
    assert report.host is True and report.clear_caches is True and report.confirmed_cleared is False
    assert report.programs_confirmed_by == 0
    assert report.kept_programs == ()  # caches cleared after every run: nothing can be kept
    assert [(k.name, k.per_iteration) for k in report.held_by_jax] == [("jit_step", 1)]
    assert report.compiled == (0, 1) and report.cache_residue == {"gpu:0": 3 * MB, "host": 4 * MB}
    assert report.profiles == (b"after warmup", b"after last")
    assert [s.name for s in report.leaking_series] == ["cpu:0 live arrays", HOST_MALLOC]


def test_judge_carries_what_it_is_given():
    step = ProgramMade("jit_step", "t.py:3")
    r = runs([point(0), point(T)], new_programs=[[step], [step]], programs_unjudged="this jax keeps no weak refs")
    report = judge(
        r, LeakOptions(1, 2, T, clear_caches=False, host=False, confirm_cleared=True), programs_confirmed_by=2
    )
    assert report.host is False and report.clear_caches is False and report.confirmed_cleared is True
    assert report.programs_confirmed_by == 2 and report.programs_unjudged == "this jax keeps no weak refs"
    assert [k.name for k in report.kept_programs] == ["jit_step"] and report.held_by_jax == ()
    assert [s.name for s in report.leaking_series] == ["cpu:0 live arrays"]  # the host's growth not judged


# --- confirmation ---------------------------------------------------------------------------------


def test_confirmed_puts_the_confirming_points_beside_each_series_they_read():
    report = judge(runs([point(0), point(T)]), LeakOptions(1, 1, T))
    more = [point(T), point(T), point(T)]
    for p in more:
        del p["gpu:0 live arrays"]
    more[1].pop(HOST_OTHER)
    again = confirmed(report, more, 2)
    series = by_name(again)
    assert again.confirmed_by == 2
    assert series["cpu:0 live arrays"].confirmation == (T, T, T)
    assert series[HOST_MALLOC].confirmation == (100 * MB + T,) * 3
    assert series["gpu:0 live arrays"].confirmation == () and series[HOST_OTHER].confirmation == ()
    assert series["cpu:0 live arrays"].growth == 0 and not again.leaking


def test_a_growth_is_confirmed_where_the_host_alone_grew_or_the_sweep_asks():
    device = Series("cpu:0 live arrays", "cpu:0", (0, T, 2 * T))
    host = Series(HOST_MALLOC, "host", (0, T, 2 * T))
    flat = Series(HOST_MALLOC, "host", (0, 0, 0))
    assert to_confirm(LeakReport(2, 1, T, (host, device.__class__("cpu:0 live arrays", "cpu:0", (0, 0, 0)))))
    assert not to_confirm(LeakReport(2, 1, T, (device, host)))  # a device grew too: read off live arrays
    assert not to_confirm(LeakReport(2, 1, T, (flat,)))  # nothing grew
    assert not to_confirm(LeakReport(2, 1, T, (flat,), confirmed_cleared=True))
    assert to_confirm(LeakReport(2, 1, T, (device,), confirmed_cleared=True))


# --- the rates a report names -------------------------------------------------------------------


def test_a_report_growth_is_the_largest_among_one_devices_series():
    r = LeakReport(
        2,
        1,
        T,
        (
            Series("gpu:0 live arrays", "gpu:0", (0, 3, 6)),
            Series("gpu:0 bytes in use", "gpu:0", (0, 5, 10)),
            Series("gpu:1 bytes in use", "gpu:1", (0, 7, 14)),
        ),
    )
    assert (r.growth("gpu:0"), r.growth("gpu:1"), r.growth("host")) == (5, 7, 0)


@pytest.mark.parametrize(
    ("values", "left"),
    [
        ((0, 10, 20, 30), 7),  # (100 - 30) // 10
        ((0, 10, 20, 95), 0),  # growth 10 (the lower median), 5 bytes left: none
        ((0, 10, 20, 130), 0),  # past the limit already: none, never a negative count
        ((0, 1, 2, 3), 97),  # one byte an iteration is growth too
        ((0, 30, 20, 60), 2),  # from the last reading, not the one before: (100 - 60) // 20
    ],
)
def test_iterations_left_until_the_limit(values, left):
    assert Series("gpu:0 bytes in use", "gpu:0", values, limit=100).iterations_left() == left


def test_no_iterations_left_to_count_without_a_limit_or_a_growth():
    assert Series("gpu:0 bytes in use", "gpu:0", (0, 10, 20, 30)).iterations_left() is None
    assert Series("gpu:0 bytes in use", "gpu:0", (0, 0, 0, 0), limit=100).iterations_left() is None
    assert Series("gpu:0 bytes in use", "gpu:0", (30, 20, 10, 0), limit=100).iterations_left() is None


# --- what survived, and where --------------------------------------------------------------------


def test_a_sites_shapes_are_the_most_common_first_and_its_devices_sorted():
    f = Frame("t.py", 3, "f")
    made = [
        (ArrayInfo(4, ("cpu:1",), "f32[1]", f), 1),
        (ArrayInfo(8, ("cpu:0",), "f32[2]", f), 1),
        (ArrayInfo(8, ("cpu:1", "cpu:0"), "f32[2]", f), 2),
        (None, 2),  # an array no longer readable: left out
    ]
    (site,) = leak_sites(made, iterations=2)
    assert (site.count, site.nbytes, site.runs, site.iterations) == (3, 20, 2, 2)
    assert site.shapes == ("f32[2]", "f32[1]") and site.devices == ("cpu:0", "cpu:1")
    assert site.per_iteration == 10 and site.accumulates


def test_sites_of_equal_bytes_are_listed_by_their_line_and_a_one_run_site_last():
    a, b, c = Frame("a.py", 1, ""), Frame("b.py", 1, ""), Frame("c.py", 1, "")
    made = [
        (ArrayInfo(MB, ("cpu:0",), "f32[1]", c), 3),  # one run only: last, though the largest
        (ArrayInfo(MB, ("cpu:0",), "f32[1]", c), 3),
        (ArrayInfo(MB, ("cpu:0",), "f32[1]", b), 1),
        (ArrayInfo(MB, ("cpu:0",), "f32[1]", b), 2),
        (ArrayInfo(MB // 2, ("cpu:0",), "f32[1]", a), 1),
        (ArrayInfo(MB // 2, ("cpu:0",), "f32[1]", a), 2),
        (ArrayInfo(MB, ("cpu:0",), "f32[1]", a), 3),
    ]
    assert [s.site for s in leak_sites(made, iterations=3)] == [a, b, c]  # a and b 2 MB each, by name
    assert [s.site for s in leak_sites(made, iterations=3, top=2)] == [a, b]


def test_one_iteration_makes_every_site_accumulate():
    f = Frame("t.py", 3, "f")
    (site,) = leak_sites([(ArrayInfo(4, ("cpu:0",), "f32[1]", f), 1)], iterations=1)
    assert site.accumulates and site.per_iteration == 4


def test_host_sites_the_most_bytes_first_ties_by_line_down_to_a_hundredth_of_the_largest():
    sites = host_sites([("b.py:1", 100, 2), ("a.py:1", 100, 3), ("c.py:1", 10_000, 1), ("d.py:1", 99, 9)])
    assert [(h.site, h.nbytes, h.allocations) for h in sites] == [
        ("c.py:1", 10_000, 1),
        ("a.py:1", 100, 3),  # exactly 1% of the largest: kept
        ("b.py:1", 100, 2),
    ]
    assert host_sites([("a.py:1", 7, 1)]) == host_sites([("a.py:1", 7, 1)], top=1)
    assert [h.site for h in host_sites([("a.py:1", 7, 1), ("b.py:1", 7, 1)], top=1)] == ["a.py:1"]
    assert host_sites([]) == ()


# --- programs kept in every run --------------------------------------------------------------------


def test_kept_programs_are_listed_by_name_with_the_copies_earlier_tests_compiled():
    step, init = ProgramMade("jit_step", "t.py:3"), ProgramMade("jit_init", "t.py:1")
    cached_step = ProgramMade("jit_step", "t.py:3", earlier=True)
    kept = kept_in_every_iteration([[step, init, init], [cached_step, init, init, step], [init, step, init, step]])
    assert [(k.name, k.site, k.per_iteration, k.earlier) for k in kept] == [
        ("jit_init", "t.py:1", 2, 0),
        ("jit_step", "t.py:3", 1, 1),
    ]


def test_a_program_new_to_some_runs_only_or_to_too_few_is_not_kept():
    step, init = ProgramMade("jit_step", "t.py:3"), ProgramMade("jit_init", "t.py:1")
    assert kept_in_every_iteration([[init], [step], [step]]) == ()  # missing from the first run
    assert kept_in_every_iteration([[step], [init], [step]]) == ()  # from the second
    assert kept_in_every_iteration([[step], [step], [init]]) == ()  # from the third
    assert kept_in_every_iteration([[step]]) == () and kept_in_every_iteration([]) == ()
    assert [k.name for k in kept_in_every_iteration([[step], [step]])] == ["jit_step"]


def test_five_sites_are_named_unless_asked_for_more():
    frames = [Frame("t.py", line, "") for line in range(1, 8)]
    made = [(ArrayInfo(MB * line, ("cpu:0",), "f32[1]", f), run) for line, f in enumerate(frames, 1) for run in (1, 2)]
    assert [s.site.line for s in leak_sites(made, iterations=2)] == [7, 6, 5, 4, 3]
    assert len(leak_sites(made, iterations=2, top=7)) == 7
    host = [(f"t.py:{line}", MB * line, 1) for line in range(1, 8)]
    assert [h.nbytes for h in host_sites(host)] == [7 * MB, 6 * MB, 5 * MB, 4 * MB, 3 * MB]
    assert len(host_sites(host, top=7)) == 7


def test_programs_of_one_name_kept_from_two_lines_are_both_listed_in_a_fixed_order():
    a, b = Frame("a.py", 3, "f"), Frame("b.py", 9, "g")
    runs_ = [[ProgramMade("jit_step", b), ProgramMade("jit_step", a), ProgramMade("jit_step", None)]] * 2
    kept = kept_in_every_iteration(runs_)
    assert [(k.name, k.site) for k in kept] == [("jit_step", a), ("jit_step", b), ("jit_step", None)]


# --- the rule's arithmetic -----------------------------------------------------------------------


def test_a_series_read_at_its_baseline_only_has_not_grown():
    assert Series("cpu:0 live arrays", "cpu:0", (5 * MB,)).growth == 0
    assert Series(HOST_RSS, "host", (5 * MB,), every=True).growth == 0


def test_a_growth_is_whole_bytes_the_mean_rounded_down():
    s = Series("cpu:0 live arrays", "cpu:0", (0, 10, 20, 11))  # lower median 10, mean 11 / 3
    assert s.growth == 3 and isinstance(s.growth, int)
