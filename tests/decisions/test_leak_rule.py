"""The decision rule on series of readings, and check_leaks on real jax code without pytest."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_tpumem import LeakError, check_leaks, message
from pytest_tpumem.decisions.leak import LeakReport, Series
from pytest_tpumem.telling.results import section

MB = 10**6
T = 100 * MB


def report(*values, limit=None, iterations=None):
    s = Series("gpu:0 bytes in use", "gpu:0", tuple(values), limit)
    return LeakReport(iterations or len(values) - 1, 1, T, (s,))


def test_steady_leak_at_threshold_is_caught_in_three_iterations():
    assert report(0, T, 2 * T, 3 * T).leaking


def test_steady_leak_just_below_threshold_is_not():
    assert not report(0, T - 1, 2 * (T - 1), 3 * (T - 1)).leaking


def test_one_off_allocation_is_not_a_leak():
    assert not report(0, 5 * T, 5 * T, 5 * T).leaking  # a cache filled once, in iteration 1
    assert not report(0, 0, 5 * T, 5 * T).leaking  # ... or in iteration 2


def test_noise_is_not_a_leak():
    assert not report(0, 3 * MB, 1 * MB, 4 * MB).leaking
    assert not report(10 * T, 10 * T + 50 * MB, 10 * T - 30 * MB, 10 * T + 20 * MB).leaking


def test_memory_that_goes_up_and_down_is_not_growth():
    # Seen on CPU: RSS jumps by a program's temporaries and falls back; net 5 MB/iteration.
    values = (357.0, 381.6, 405.1, 357.6, 381.7, 382.2)
    r = report(*(int(v * MB) for v in values))
    (s,) = r.series
    assert sorted(s.deltas)[2] > 20 * MB  # the lower median alone would call it 23.5 MB/iteration
    assert s.growth == int(25.2 * MB) // 5
    assert not LeakReport(5, 1, 20 * MB, r.series).leaking


def test_growing_leak_is_caught():
    assert report(0, T, 3 * T, 6 * T).leaking  # a list of tokens that grows each iteration


def test_two_iterations_need_both_to_grow():
    assert not report(0, 3 * T, 3 * T).leaking
    assert report(0, T, 2 * T).leaking


def test_single_iteration_decides_on_its_delta():
    assert report(0, T).leaking
    assert not report(0, T - 1).leaking


def test_lower_median_with_four_iterations():
    assert not report(0, T, 2 * T, 2 * T, 2 * T).leaking  # grew in 2 of 4: the lower median is 0
    assert not report(0, T, 2 * T, 2 * T, 3 * T).leaking  # 3 of 4, but the mean is 0.75 T
    assert report(0, T, 2 * T, 2 * T, 4 * T).leaking  # 3 of 4 and a mean of T


def test_iterations_left_until_exhausted():
    r = report(0, T, 2 * T, 3 * T, limit=10 * T)
    (s,) = r.leaking_series
    assert s.iterations_left() == 7
    assert "exhausted in ~7 more iterations (limit 1.0GB)" in message(r)


def test_message_names_device_growth_and_figures():
    msg = message(report(0, T, 2 * T, 3 * T))
    assert msg.splitlines()[0] == (
        "leak_check: gpu:0 bytes in use grew 100.0MB/iteration over 3 iterations (threshold 100.0MB/iteration)"
    )
    assert "0B -> 100.0MB (+100.0MB) -> 200.0MB (+100.0MB) -> 300.0MB (+100.0MB)" in msg


def test_report_is_frozen():
    r = report(0, 0, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.threshold = 1  # type: ignore[misc]


def test_check_leaks_without_pytest_catches_a_planted_leak_and_passes_its_twin():
    kept = []

    def leaky():
        kept.append(jnp.ones((1_000_000,), jnp.float32))  # 4 MB a call

    def clean():
        return jnp.ones((1_000_000,), jnp.float32).sum()

    leak = check_leaks(leaky, threshold="2MB")
    assert leak.leaking
    assert leak.worst.name == f"{jax.devices()[0].platform}:{jax.devices()[0].id} live arrays"
    assert leak.worst.growth == 4_000_000
    assert not check_leaks(clean, threshold=2 * MB).leaking
    with pytest.raises(LeakError) as e:
        check_leaks(leaky, threshold=2 * MB, raise_on_leak=True)
    assert e.value.report.leaking
    kept.clear()


def test_check_leaks_reads_every_device():
    if len(jax.local_devices()) < 2:
        pytest.skip("needs two devices (the root conftest asks the CPU backend for two)")
    kept = []
    dev1 = jax.local_devices()[1]

    def leaky_on_second_device():
        kept.append(jax.device_put(jnp.ones((1_000_000,), jnp.float32), dev1))

    r = check_leaks(leaky_on_second_device, threshold=2 * MB)
    devices = [s.device for s in r.leaking_series if s.device != "host"]  # on CPU the host grows too
    assert devices == [f"{dev1.platform}:{dev1.id}"]
    kept.clear()


def test_check_leaks_rejects_bad_counts():
    with pytest.raises(ValueError, match="iterations=0"):
        check_leaks(lambda: None, iterations=0)
    with pytest.raises(ValueError, match="warmup=-1"):
        check_leaks(lambda: None, warmup=-1)


def test_survivors_are_grouped_by_the_line_that_made_them():
    from pytest_tpumem.decisions.leak import leak_sites
    from pytest_tpumem.readings.arrays import ArrayInfo
    from pytest_tpumem.readings.frames import Frame

    a, b, state = Frame("t.py", 3, "f"), Frame("t.py", 9, "g"), Frame("t.py", 12, "step")
    made = [(ArrayInfo(4 * MB, ("cpu:0",), "f32[1000000]", a), run) for run in (1, 2, 3)]
    made += [(ArrayInfo(MB, ("cpu:1",), "s32[250000]", b), run) for run in (1, 1, 2, 2, 3, 3)]
    made += [
        (ArrayInfo(64 * MB, ("cpu:0",), "f32[4000,4000]", state), 3),
        (None, 2),
    ]  # replaced every run: the last one
    sites = leak_sites(made, iterations=3)
    assert [(s.site, s.count, s.nbytes, s.per_iteration, s.runs) for s in sites] == [
        (a, 3, 12 * MB, 4 * MB, 3),
        (b, 6, 6 * MB, 2 * MB, 3),
        (state, 1, 64 * MB, 64 * MB // 3, 1),  # the largest, but made in one run: last, and not as a rate
    ]
    assert [s.accumulates for s in sites] == [True, True, False]
    assert len(leak_sites(made, 3, top=1)) == 1


def test_only_programs_new_to_every_iteration_and_held_at_the_end_grow_the_cache():
    """The lists are each run's new programs that jax still held at the end (measuring.leak.NewPrograms):
    a program in every list grows the cache; one missing from a run (a branch taken once, a cache the
    code replaces) does not; one run alone cannot show growth."""
    from pytest_tpumem.decisions.leak import kept_in_every_iteration
    from pytest_tpumem.readings.programs import ProgramMade

    step, once = ProgramMade("jit_step", "t.py:3"), ProgramMade("jit_init", "t.py:1")
    grown = kept_in_every_iteration([[step, once], [step, step], [step]])
    assert [(k.name, k.per_iteration) for k in grown] == [("jit_step", 1)]  # the fewest of any run
    assert kept_in_every_iteration([[step, step], [step, step]])[0].per_iteration == 2
    assert kept_in_every_iteration([[step], [], [step]]) == ()  # not new to the second run, or let go of
    assert kept_in_every_iteration([[step]]) == ()  # one run cannot show growth
    assert [k.name for k in kept_in_every_iteration([[step], [step]])] == ["jit_step"]  # two can
    other_line = ProgramMade("jit_step", "t.py:9")
    assert kept_in_every_iteration([[step], [other_line]]) == ()  # the same name from another line is another program


def test_a_kept_program_says_how_many_of_its_copies_an_earlier_test_compiled():
    """Order does not decide the verdict: a program an earlier test compiled is new to this check's
    run all the same, and the report says how many were (ProgramMade.earlier)."""
    from pytest_tpumem.decisions.leak import kept_in_every_iteration
    from pytest_tpumem.readings.programs import ProgramMade

    cached, fresh = ProgramMade("jit_step", "t.py:3", earlier=True), ProgramMade("jit_step", "t.py:3")
    (kept,) = kept_in_every_iteration([[cached], [cached], [fresh]])
    assert (kept.per_iteration, kept.earlier) == (1, 2)


def test_check_leaks_names_the_line_of_a_planted_leak_without_pytest():
    kept = []

    def remember():
        kept.append(jnp.ones((1_000_000,), jnp.float32))  # the planted leak's own line

    report = check_leaks(remember, threshold="2MB")
    (site, *_) = report.sites
    assert (site.site.function, site.count, site.per_iteration) == (
        "test_check_leaks_names_the_line_of_a_planted_leak_without_pytest.<locals>.remember",
        3,
        4_000_000,
    )
    assert site.site.file.endswith("test_leak_rule.py") and site.site.line == remember.__code__.co_firstlineno + 1
    kept.clear()


def test_host_sites_keep_the_largest_and_drop_noise():
    from pytest_tpumem.decisions.leak import host_sites
    from pytest_tpumem.readings.frames import Frame

    big, small = Frame("t.py", 4, ""), Frame("t.py", 5, "")
    sites = host_sites([(small, 5_000, 50), (big, 16 * MB, 1), (None, 9_000, 90)])
    assert [(h.site, h.nbytes) for h in sites] == [(big, 16 * MB)]  # the rest is under 1% of it


def test_a_host_leak_without_pytest_names_the_numpy_line():
    kept = []

    def copy_to_host():
        kept.append(jnp.arange(4_000_000, dtype=jnp.float32).__array__() + 0)  # a 16 MB numpy copy

    report = check_leaks(copy_to_host, threshold="8MB")
    assert [s.name for s in report.leaking_series] == ["host malloc"]  # RSS is shown, split into malloc's and the rest
    (top, *_) = report.host_sites
    assert top.site.line == copy_to_host.__code__.co_firstlineno + 1 and top.nbytes >= 16_000_000
    kept.clear()


def test_a_confirmed_growth_is_the_smaller_of_the_two():
    suspect = Series("host malloc", "host", (100 * MB, 130 * MB, 160 * MB, 160 * MB))  # 2 blocks kept, then nothing
    assert suspect.growth == 20 * MB
    assert dataclasses.replace(suspect, confirmation=(160 * MB, 160 * MB, 161 * MB, 160 * MB)).growth == 0
    steady = Series(
        "host malloc",
        "host",
        (100 * MB, 120 * MB, 140 * MB, 160 * MB),
        confirmation=(160 * MB, 179 * MB, 198 * MB, 217 * MB),
    )
    assert steady.growth == 19 * MB  # the leak, at the smaller of its two rates


def test_host_rss_has_grown_only_where_every_delta_grew():
    """RSS moves by whole blocks a thread's arena keeps for a few runs (seen: +16.8, +16.8, 0 for
    clean code): the lower median would call that growth; every delta must grow instead."""
    kept_twice = Series("host RSS", "host", (100 * MB, 116 * MB, 133 * MB, 133 * MB), every=True)
    assert kept_twice.growth == 0 and dataclasses.replace(kept_twice, every=False).growth > 10 * MB
    at_threshold = Series("host RSS", "host", (100 * MB, 110 * MB, 120 * MB, 130 * MB), every=True)
    one_under = Series("host RSS", "host", (100 * MB, 110 * MB, 120 * MB, 130 * MB - 1), every=True)
    assert at_threshold.growth == 10 * MB and one_under.growth == 10 * MB - 1


def test_a_host_growth_of_two_runs_only_is_not_confirmed():
    """Planted twin of a host leak: two runs each keep a 20 MB numpy block, the runs after keep
    nothing. The first iterations look like growth (lower median 20 MB); the confirmation does not."""
    kept, runs = [], []

    def blocks_kept_twice():
        runs.append(1)
        if len(runs) in (2, 3):
            kept.append(np.ones((5_000_000,), np.float32))

    report = check_leaks(blocks_kept_twice, iterations=3, threshold="10MB")
    host = next(s for s in report.series if s.name == "host malloc")
    assert _rule_of(host.values) >= 10 * MB and report.confirmed_by == 3
    assert not report.leaking and host.growth < MB, message(report)
    assert len(runs) == 1 + 3 + 3
    kept.clear()


def test_a_host_leak_is_confirmed_at_its_true_rate():
    kept = []

    def copy_to_host():
        kept.append(np.full((5_000_000,), 1.0, np.float32))  # 20 MB of host memory a run, kept

    report = check_leaks(copy_to_host, iterations=3, threshold="10MB")
    # "host other" (RSS less what malloc took) may grow too, now and then: where a run's 20 MB reuses
    # pages of malloc's heap that malloc_trim gave back after an earlier test, RSS grows and what
    # malloc took does not. The leak is the same one; the figure is malloc's.
    names = [s.name for s in report.leaking_series]
    assert names in (["host malloc"], ["host malloc", "host other"]), message(report)
    host = report.leaking_series[0]
    assert report.confirmed_by == 3 and len(host.confirmation) == 4
    assert abs(host.growth - 20 * MB) <= 0.02 * 20 * MB and report.figure is host, message(report)
    assert "confirmed by 3 more runs" in message(report)
    kept.clear()


def test_the_sweep_credits_only_what_the_caches_gained_during_the_check():
    """Caches kept between runs (the sweep). Before the check, jax's caches hold a program with a
    50 MB constant; the code leaks 20 MB of host memory a run. Clearing the caches frees the 50 MB
    too: credited against the growth, it hid the leak. The confirmation's baseline is read after
    clearing, so it is not."""
    const = np.ones((12_500_000,), np.float32)
    warm = jax.jit(lambda x: x + const)  # noqa: F821 (const is deleted below: only the cached program holds it)
    warm(jnp.ones((12_500_000,), jnp.float32)).block_until_ready()  # the caches now hold 50 MB
    del const
    kept = []

    def leaky():
        kept.append(np.full((5_000_000,), 2.0, np.float32))

    report = check_leaks(leaky, iterations=2, threshold="10MB", clear_caches=False, confirm_cleared=True)
    host = report.leaking_series[0]
    assert host.name == "host malloc" and report.confirmed_by == 2
    assert abs(host.growth - 20 * MB) <= 0.02 * 20 * MB, message(report)
    kept.clear()


def test_a_leak_of_small_python_objects_is_caught_outside_malloc():
    """pymalloc's arenas are mapped directly, not malloc'd: a list of small dicts kept every run
    grows host RSS and not host malloc. 'host other' (RSS less malloc's heaps) catches it; its clean
    twin builds the same list and drops it."""
    kept = []

    def keep_records():
        kept.append([{"step": i} for i in range(100_000)])  # ~23 MB of small objects a run

    def drop_records():
        records = [{"step": i} for i in range(100_000)]
        assert len(records) == 100_000

    leaky = check_leaks(keep_records, iterations=3, threshold="10MB")
    assert [s.name for s in leaky.leaking_series] == ["host other"] and leaky.confirmed_by == 3, message(leaky)
    malloc = next(s for s in leaky.series if s.name == "host malloc")
    assert malloc.growth < 5 * MB  # the dicts' tables are malloc'd only past 512 bytes: most of it is not seen there
    kept.clear()
    clean = check_leaks(drop_records, iterations=3, threshold="10MB")
    assert not clean.leaking and clean.growth("host") < MB, message(clean)


def _rule_of(values):
    from pytest_tpumem.decisions.leak import _rule

    return _rule(values)


def test_host_false_reads_host_rss_and_does_not_judge_it():
    kept = []

    def copy_to_host():
        kept.append(np.full((5_000_000,), 1.0, np.float32))

    report = check_leaks(copy_to_host, iterations=2, threshold="10MB", host=False)
    assert not report.leaking and any(s.device == "host" for s in report.series)
    assert "(not judged: host=False)" in section(report)
    own = check_leaks(copy_to_host, iterations=2, threshold="10MB", host="30MB")
    assert not own.leaking and "under the host threshold 30.0MB/iteration" in message(own)
    kept.clear()
    with pytest.raises(
        ValueError,
        match=r"^host: 'much' is not a size; .*; or True \(judged with the threshold\) or False \(not judged\)$",
    ):
        check_leaks(copy_to_host, host="much")


def test_confirm_cleared_needs_caches_kept():
    from pytest_tpumem import check_leaks

    with pytest.raises(ValueError, match="confirm_cleared=True: expected clear_caches=False"):
        check_leaks(lambda: None, confirm_cleared=True)


# --- the rule at its boundaries, on hand-built series --------------------------------------------


def test_the_lower_median_of_four_even_where_the_mean_reaches_the_threshold():
    r = report(0, 0, 0, 2 * T, 4 * T)  # grew in 2 of 4 by 2T: the mean is T, the lower median 0
    assert r.series[0].growth == 0 and not r.leaking


def test_host_rss_is_judged_by_its_smallest_delta():
    rss = Series("host RSS", "host", (0, T, 2 * T, 2 * T), every=True)
    assert rss.growth == 0
    assert Series("host RSS", "host", (0, T, 2 * T, 3 * T), every=True).growth == T


def test_the_confirming_runs_cap_the_growth():
    s = Series("host malloc", "host", (0, T, 2 * T, 3 * T), confirmation=(3 * T, 3 * T, 3 * T))
    assert s.growth == 0 and not LeakReport(3, 1, T, (s,)).leaking
    grew = dataclasses.replace(s, confirmation=(3 * T, 4 * T, 5 * T))
    assert grew.growth == T and LeakReport(3, 1, T, (grew,)).leaking


def test_each_series_is_judged_with_its_own_threshold_or_not_at_all():
    host = Series("host malloc", "host", (0, T, 2 * T, 3 * T))
    rss = Series("host RSS", "host", (0, T, 2 * T, 3 * T), every=True, shown_only=True)
    assert LeakReport(3, 1, T, (host,)).leaking_series == (host,)
    assert LeakReport(3, 1, T, (host,), host=False).leaking_series == ()
    assert LeakReport(3, 1, T, (host,), host=T + 1).leaking_series == ()  # its own threshold, one byte over
    assert LeakReport(3, 1, T, (host,), host=T).leaking_series == (host,)
    assert LeakReport(3, 1, T, (rss,)).threshold_for(rss) is None and not LeakReport(3, 1, T, (rss,)).leaking


def test_a_growth_read_off_the_devices_is_not_confirmed_and_one_of_the_host_alone_is():
    from pytest_tpumem.decisions.leak import to_confirm

    device = Series("cpu:0 live arrays", "cpu:0", (0, T, 2 * T, 3 * T))
    host = Series("host malloc", "host", (0, T, 2 * T, 3 * T))
    assert not to_confirm(LeakReport(3, 1, T, (device, host)))
    assert to_confirm(LeakReport(3, 1, T, (host,)))
    assert to_confirm(LeakReport(3, 1, T, (device,), confirmed_cleared=True))  # the sweep confirms every growth
    assert not to_confirm(LeakReport(3, 1, T, (dataclasses.replace(host, values=(0, 0, 0, 0)),)))


def test_programs_kept_by_the_caches_are_a_leak_under_the_sweep_too():
    """The sweep keeps jax's caches between runs as a plain run does: a program new to every run and
    kept is a leak there as under clear_caches=False, whatever confirmed its bytes (issue 27)."""
    from pytest_tpumem.decisions.leak import KeptProgram

    kept = (KeptProgram("jit_step", None, 1),)
    assert LeakReport(3, 1, T, (), kept_programs=kept).leaking
    assert LeakReport(1, 1, T, (), kept_programs=kept, confirmed_cleared=True, programs_confirmed_by=2).leaking
    assert not LeakReport(1, 1, T, (), confirmed_cleared=True, programs_confirmed_by=2).leaking


def test_host_sites_under_a_hundredth_of_the_largest_are_noise():
    from pytest_tpumem.decisions.leak import host_sites

    sites = host_sites([("a", 100 * MB, 1), ("b", MB, 1), ("c", MB - 1, 1)])
    assert [(h.site, h.nbytes) for h in sites] == [("a", 100 * MB), ("b", MB)]


# --- programs new to every run (jax's caches kept): real jax, no pytest ---------------------------


def test_a_jit_made_and_kept_on_every_call_is_a_leak_confirmed_by_two_more_runs():
    """The sweep's shape (one iteration): the new program it kept is confirmed by 2 more runs with
    the caches kept, then judged, whatever its bytes; the line that compiled it is named."""
    registry = []

    def make_and_keep():
        step = jax.jit(lambda v: v * 2 + 1)
        registry.append(step)
        step(jnp.ones(4)).block_until_ready()  # the line that compiles it

    report = check_leaks(make_and_keep, iterations=1, threshold="1GB", clear_caches=False, confirm_cleared=True)
    assert report.leaking and report.cache_grows and report.programs_confirmed_by == 2, message(report)
    (kept,) = report.kept_programs
    assert (kept.name, kept.per_iteration, kept.earlier) == ("jit__lambda", 1, 0)
    assert (
        kept.site.function
        == "test_a_jit_made_and_kept_on_every_call_is_a_leak_confirmed_by_two_more_runs.<locals>.make_and_keep"
    )
    registry.clear()


def test_its_clean_twins_a_closure_that_dies_and_a_program_compiled_once_are_not():
    def fresh_closure():
        jax.jit(lambda v: v * 2 + 1)(jnp.ones(4)).block_until_ready()

    once = jax.jit(lambda v: v * 3)

    for fn in (fresh_closure, lambda: once(jnp.ones(4)).block_until_ready()):
        report = check_leaks(fn, iterations=1, threshold="1GB", clear_caches=False, confirm_cleared=True)
        assert not report.leaking and report.kept_programs == () and report.programs_confirmed_by == 0, message(report)


def test_eager_control_flow_over_a_new_function_is_held_by_jax_alone_and_said_not_judged():
    """jax keeps an eager scan's program by its jaxpr in a cache of its own (at most 4096): new every
    call, but not held by anything of the code's; said in the section, not a leak."""

    def eager_scan():
        def body(carry, x):
            return carry + x, carry

        jax.lax.scan(body, 0.0, jnp.arange(8.0))[0].block_until_ready()

    report = check_leaks(eager_scan, iterations=3, threshold="1GB", clear_caches=False)
    assert not report.leaking and [k.name for k in report.held_by_jax] == ["jit_scan"], message(report)
    assert "held by jax's own caches alone" in section(report)


def test_a_program_an_earlier_test_compiled_is_new_to_the_check_all_the_same():
    """The verdict does not depend on what ran before: programs compiled before the check (here,
    the same static arguments) are new to each run that asks for them, and counted as earlier."""

    @jax.jit
    def scale(x, k):
        return x * k

    scale_static = jax.jit(scale.__wrapped__, static_argnums=1)
    for k in range(5):  # "an earlier test": every program the check will ask for, compiled now
        scale_static(jnp.ones(4), k).block_until_ready()
    steps = iter(range(5))

    report = check_leaks(
        lambda: scale_static(jnp.ones(4), next(steps)).block_until_ready(), iterations=3, clear_caches=False
    )
    (kept,) = report.kept_programs
    assert report.leaking and report.compiled == (0, 0, 0) and kept.earlier == 3, message(report)


def test_a_cache_that_replaces_its_last_program_and_a_branch_taken_once_do_not_grow():
    last = {}

    def replace_last():
        last["step"] = jax.jit(lambda v: v + 1)  # the one before dies with its closure
        last["step"](jnp.ones(4)).block_until_ready()

    calls = iter(range(100))
    once_kept = []

    def branch_once():
        if next(calls) == 1:  # the first run after the warmup only
            once_kept.append(jax.jit(lambda v: v - 1))
            once_kept[-1](jnp.ones(4)).block_until_ready()

    for fn in (replace_last, branch_once):
        report = check_leaks(fn, iterations=3, threshold="1GB", clear_caches=False)
        assert not report.leaking and report.kept_programs == (), message(report)
