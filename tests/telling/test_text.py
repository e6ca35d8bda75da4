"""Each sentence the user reads, from results built by hand (no jax, no pytest run): failure texts,
report sections, the header and summary lines."""

import dataclasses

from pytest_tpumem.decisions.budget import Budget, BudgetResult
from pytest_tpumem.decisions.leak import LeakReport, Series
from pytest_tpumem.decisions.oom import OomResult
from pytest_tpumem.decisions.peak import DevicePeak, PeakReport
from pytest_tpumem.decisions.target import ProgramJudgement, TargetResult
from pytest_tpumem.defaults import PROGRAMS_SHOWN
from pytest_tpumem.errors import LIBTPU_INSTALL
from pytest_tpumem.readings.buffers import Buffer
from pytest_tpumem.readings.executions import Need
from pytest_tpumem.readings.tpu import HbmEstimate
from pytest_tpumem.targets import parse_target
from pytest_tpumem.telling.budget import UNCOUNTED, peak_line, peak_section, sampled_over
from pytest_tpumem.telling.header import backend_lines, settings_line, versions_line
from pytest_tpumem.telling.leak import series_line
from pytest_tpumem.telling.results import message, row, section
from pytest_tpumem.telling.run import cannot_rerun
from pytest_tpumem.telling.target import no_libtpu, target_line
from pytest_tpumem.telling.words import STAND_IN_NOTE

MB = 10**6


def device(name, peak, witness="body-end", start=0, stand_in=True, sampler=None, program="", **witnesses):
    return DevicePeak(
        name,
        start,
        peak,
        witness,
        {"end": start, witness: peak, **witnesses},
        None,
        stand_in,
        sampler=sampler,
        program=program,
    )


def peak_report(*devices, programs=(), uncounted=""):
    return PeakReport({d.device: d for d in devices}, 300 * MB, tuple(programs), uncounted=uncounted)


def test_budget_message_names_the_worst_device_witness_and_budget():
    report = peak_report(
        device("cpu:0", 40 * MB), device("cpu:1", 50 * MB, "program", program="jit(step)"), device("cpu:2", 1 * MB)
    )
    result = BudgetResult(report, Budget(30 * MB, "max_hbm('30MB')"))
    assert result.failed and result.verdict.value == "over budget"
    assert message(result).splitlines() == [
        "max_hbm: peak 50.0MB on cpu:1 is over the budget of 30.0MB (max_hbm('30MB')), judged by program jit(step); "
        + STAND_IN_NOTE,
        "  cpu:1: start 0B, peak 50.0MB by program jit(step) [end 0B, program 50.0MB]",
        "  cpu:0: start 0B, peak 40.0MB by body-end [end 0B, body-end 40.0MB]",
    ]


def test_what_only_the_sampler_saw_is_said_and_not_judged():
    report = peak_report(device("cpu:0", 4 * MB, sampler=9 * MB))
    result = BudgetResult(report, Budget(7 * MB, "max_hbm('7MB')"))
    assert not result.failed and message(result) == "" and result.sampled_over == [report.devices["cpu:0"]]
    assert peak_line(report.devices["cpu:0"]) == (
        "cpu:0: start 0B, peak 4.0MB by body-end [end 0B, body-end 4.0MB]; the sampler saw 9.0MB, 5.0MB more than "
        "any deterministic reading explains (timing-dependent, not judged)"
    )
    assert sampled_over(result).startswith(
        "max_hbm: only the sampler saw 9.0MB on cpu:0, over the budget of 7.0MB (max_hbm('7MB')); the test is judged "
        "by its deterministic peak, 4.0MB by body-end."
    )
    below = peak_report(device("cpu:0", 4 * MB, sampler=3 * MB))
    assert "sampler" not in peak_line(below.devices["cpu:0"])


def test_budget_message_without_the_stand_in_note_where_the_runtime_reports():
    report = peak_report(device("gpu:0", 3 * 10**9, "runtime-peak", stand_in=False))
    text = message(BudgetResult(report, Budget(10**9, "--tpumem-max-hbm / ini tpumem_max_hbm")))
    assert text.splitlines()[0] == (
        "max_hbm: peak 3.0GB on gpu:0 is over the budget of 1.0GB (--tpumem-max-hbm / ini tpumem_max_hbm), judged by runtime-peak"
    )


def test_a_result_under_budget_or_without_one_has_no_message():
    report = peak_report(device("cpu:0", 40 * MB))
    assert message(BudgetResult(report, Budget(60 * MB, "x"))) == ""
    assert not BudgetResult(report, None).failed


def test_peak_section_lists_devices_host_peak_programs_and_what_was_not_read():
    programs = [
        Need(f"jit_{i}", ("cpu:0",), (48 - i) * MB, 16 * MB, 16 * MB, 16 * MB) for i in range(PROGRAMS_SHOWN + 2)
    ]
    lines = peak_section(peak_report(device("cpu:0", 40 * MB), programs=programs)).splitlines()
    assert lines == [
        "cpu:0: start 0B, peak 40.0MB by body-end [end 0B, body-end 40.0MB]",
        "host peak (VmHWM): 300.0MB",
        *(
            f"ran jit_{i} on cpu:0: needs {48 - i}.0MB (arguments 16.0MB, outputs 16.0MB, temps 16.0MB)"
            for i in range(PROGRAMS_SHOWN)
        ),
        "... and 2 smaller programs",
    ]
    for code, words in UNCOUNTED.items():
        assert f"programs run: not read ({words})" in peak_section(peak_report(device("cpu:0", 1), uncounted=code))


def test_oom_message_in_a_test_and_in_setup():
    measured = OomResult(
        "RESOURCE_EXHAUSTED: Out of memory allocating 4000000000000 bytes.",
        "in this test",
        10**9,
        peak_report(device("cpu:0", 4)),
    )
    assert message(measured).splitlines() == [
        "out of device memory in this test (budget 1.0GB): RESOURCE_EXHAUSTED: Out of memory allocating 4000000000000 bytes.",
        "  cpu:0: start 0B, peak 4B by body-end [end 0B, body-end 4B]",
        "  tpumem freed the test's frames and jax's caches so the tests after it can run",
    ]
    setup = OomResult.of(RuntimeError("RESOURCE_EXHAUSTED: too big\nmore"), "while setting up this test")
    assert (
        message(setup).splitlines()[0]
        == "out of device memory while setting up this test (budget n/a): RESOURCE_EXHAUSTED: too big"
    )
    assert setup.failed and setup.verdict.value == "oom"


def leak(*values, threshold=10 * MB, limit=None, host=None):
    series = [Series("cpu:0 live arrays", "cpu:0", tuple(values), limit)]
    if host is not None:
        series.append(Series("host RSS", "host", tuple(host)))
    return LeakReport(len(values) - 1, 1, threshold, tuple(series))


def test_leak_message_names_series_growth_and_forecast():
    report = leak(16 * MB, 32 * MB, 48 * MB, 64 * MB, limit=200 * MB, host=(300 * MB, 301 * MB, 300 * MB, 301 * MB))
    assert message(report).splitlines() == [
        "leak_check: cpu:0 live arrays grew 16.0MB/iteration over 3 iterations (threshold 10.0MB/iteration)",
        "  cpu:0 live arrays: 16.0MB -> 32.0MB (+16.0MB) -> 48.0MB (+16.0MB) -> 64.0MB (+16.0MB); "
        "exhausted in ~8 more iterations (limit 200.0MB)",
    ]
    assert (
        section(report).splitlines()[1]
        == "host RSS: 300.0MB -> 301.0MB (+1.0MB) -> 300.0MB (-1.0MB) -> 301.0MB (+1.0MB)"
    )


def test_a_clean_leak_check_reads_as_clean():
    report = leak(16 * MB, 16 * MB, 16 * MB + 98_300, 16 * MB + 98_300, host=(300 * MB, 300 * MB, 301 * MB, 301 * MB))
    assert report.leaking is False and report.leaking_series == ()
    assert message(report) == (
        "leak_check: no leak over 3 iterations: the largest growth was cpu:0 live arrays at 0B/iteration, "
        "under the threshold 10.0MB/iteration"
    )
    one = LeakReport(1, 0, MB, (Series("host RSS", "host", (5, 5)),))
    assert message(one).startswith("leak_check: no leak over 1 iteration: ")


def estimate(peak, refused=False, buffers=()):
    return HbmEstimate(
        "v5e:2x2",
        1,
        peak,
        16 * MB,
        16 * MB,
        0,
        101_400,
        int(15.75 * 2**30),
        refused,
        "required for HLO temporaries (20.00G) exceeds available HBM (15.75G)" if refused else "",
        "scale",
        peak,
        (("default", peak),),
        tuple(buffers),
    )


BUFFERS = (
    Buffer(16 * MB, "f32[1000000,3]", "argument 0", "param.1", "x", ""),
    Buffer(16 * MB, "f32[1000000,3]", "output", "multiply_fusion", "jit(scale)/mul", "test_pad.py:4 (scale)"),
)


def test_target_message_over_the_budget_with_its_largest_buffers():
    v5e = parse_target("v5e")
    judged = ProgramJudgement("scale", "test_pad.py:3", 0, estimate(32 * MB, buffers=BUFFERS))
    result = TargetResult("max_hbm", v5e, 28 * MB, "max_hbm('28MB', target='v5e')", (judged,))
    assert result.failed and result.verdict.value == "over budget" and result.need == 32 * MB
    assert message(result).splitlines() == [
        "max_hbm: scale needs 32.0MB per device compiled for v5e:2x2, over the budget of 28.0MB (max_hbm('28MB', target='v5e'))",
        "  scale (test_pad.py:3): v5e:2x2 (1 device): 32.0MB of HBM per device of 16.9GB (headroom 16.9GB); "
        "arguments 16.0MB, outputs 16.0MB, temporaries 0B, code 101.4kB",
        "    largest buffers on v5e:2x2 (per device, as laid out):",
        "         16.0MB  f32[1000000,3]  argument 0 (x)",
        "         16.0MB  f32[1000000,3]  output from jit(scale)/mul [multiply_fusion] at test_pad.py:4 (scale)",
    ]


def test_target_message_for_a_refusal_a_program_not_moved_and_the_fixture():
    v5e = parse_target("v5e")
    refused = ProgramJudgement("double", "", 0, estimate(int(21.5 * 10**9), refused=True))
    unmoved = ProgramJudgement("pmapped", "t.py:9", 0, None, "its PmapSharding cannot be moved to another device kind")
    small = ProgramJudgement("add", "", 0, None, skipped=True)
    result = TargetResult("max_hbm", v5e, v5e.hbm_per_device, "max_hbm(target='v5e')", (refused, unmoved, small))
    lines = message(result).splitlines()
    assert (
        lines[0]
        == "max_hbm: the TPU compiler refused double for v5e:2x2, over the budget of 16.9GB (max_hbm(target='v5e'))"
    )
    assert lines[2] == (
        "max_hbm: 1 program the test ran could not be compiled for v5e:2x2, so the test is not judged there "
        "(judge it with the hbm_estimate fixture instead):"
    )
    assert (
        lines[3]
        == "  pmapped (t.py:9): not compiled for the target: its PmapSharding cannot be moved to another device kind"
    )
    assert (
        section(result).splitlines()[0]
        == "compiled for v5e:2x2: 1 program the test ran; 1 eager operation on under 1 MiB each not compiled"
    )
    fixture = TargetResult("hbm_estimate", v5e, v5e.hbm_per_device, "v5e's usable HBM", (refused,))
    assert message(fixture).startswith(
        "hbm_estimate: over the budget of 16.9GB: v5e:2x2: the TPU compiler refused the program"
    )


def test_an_unjudged_target_is_its_own_verdict():
    v5e = parse_target("v5e")
    result = TargetResult("max_hbm", v5e, MB, "s", (), ("a program could not be recorded: ValueError: x",))
    assert result.failed and result.verdict.value == "not judged"
    nothing = TargetResult("max_hbm", v5e, MB, "s", ())
    assert not nothing.failed and "none was lowered during the test" in section(nothing)


def test_header_lines():
    assert versions_line({"jax": "0.10.2", "jaxlib": "0.10.2"}).startswith(
        "tpumem: jax 0.10.2, jaxlib 0.10.2; devices are read when the first measured test starts"
    )
    assert settings_line(None, 100 * MB) == "tpumem: default budget none, leak threshold 100.0MB/iteration"
    assert settings_line(None, 100 * MB, False).endswith("100.0MB/iteration, host RSS not judged")
    assert settings_line(None, 100 * MB, 200 * MB).endswith("100.0MB/iteration, host RSS 200.0MB/iteration")
    assert target_line(parse_target("v4")).startswith(
        "tpumem: target v4:2x2x1: 16.4GB usable HBM per TensorCore (2 a chip)"
    )
    summary = {
        "jax": "0.10.2",
        "backend": "cpu",
        "device_kind": "cpu",
        "devices": ["cpu:0"],
        "memory_stats": False,
        "known_stats": [],
        "bytes_limit": None,
        "host_peak_resettable": True,
        "host_malloc": True,
        "unavailable": {"program runs": "jax 9.9 has no jax._src.pjit._get_fastpath_data"},
    }
    assert backend_lines(summary) == [
        "tpumem: jax 0.10.2, backend cpu (cpu), 1 local device: cpu:0",
        "tpumem: sources: live arrays, no memory_stats, host malloc, host RSS + VmHWM; live arrays stand in for device memory",
        "tpumem: program runs unavailable on this jax: jax 9.9 has no jax._src.pjit._get_fastpath_data",
    ]
    summary.update(unavailable={}, host_malloc=False)
    assert backend_lines(summary)[1] == (
        "tpumem: sources: live arrays, no memory_stats, programs run, host RSS + VmHWM; live arrays stand in for device memory"
    )
    assert backend_lines({"error": "Unknown backend: 'no_such_platform'"}) == [
        "tpumem: the jax backend did not start, so no device can be read: Unknown backend: 'no_such_platform'"
    ]


def test_the_glue_lines_say_what_to_do():
    assert "call the leak_check fixture on a synchronous function" in cannot_rerun("test_a", "async")
    assert "pytest_tpumem.check_leaks on a function instead" in cannot_rerun("test_u", "unittest")
    assert no_libtpu("v5e:2x2", "max_hbm(target='v5e')").endswith("--tpumem-no-libtpu=skip skips such tests instead")
    assert 'pip install "jax[tpu]"' in LIBTPU_INSTALL and 'pip install ".[tpu]"' in LIBTPU_INSTALL


def test_a_device_leak_names_what_survived_and_where():
    from pytest_tpumem.decisions.leak import LeakSite
    from pytest_tpumem.readings.frames import Frame

    site = LeakSite(Frame("test_x.py", 17, "Recorder.remember"), 3, 48 * MB, ("f32[4000000]",), ("cpu:0",), 3, runs=3)
    unknown = LeakSite(None, 6, 12 * MB, ("f32[1000]", "s32[7]", "bf16[2,2]"), ("cpu:0", "cpu:1"), 3, runs=3)
    report = dataclasses.replace(leak(16 * MB, 32 * MB, 48 * MB, 64 * MB), sites=(site, unknown))
    lines = message(report).splitlines()
    assert lines[2:] == [
        "  still alive after the last run, made after the warmup, by the line that made them:",
        "       16.0MB/iteration  3 arrays f32[4000000] on cpu:0  at test_x.py:17 in Recorder.remember",
        "        4.0MB/iteration  6 arrays f32[1000], s32[7] and 1 more shapes on cpu:0, cpu:1  "
        "made inside a library (no line of the test's code recorded)",
    ]
    assert row(report)["growth_source"] == "cpu:0 live arrays at test_x.py:17"


def test_a_growing_compile_cache_is_a_leak_of_its_own():
    from pytest_tpumem.decisions.leak import KeptProgram
    from pytest_tpumem.readings.frames import Frame

    kept = KeptProgram("jit_scale", Frame("test_x.py", 9, "test_static"), 1)
    report = dataclasses.replace(leak(MB, MB, MB, MB), kept_programs=(kept,), compiled=(1, 1, 1), clear_caches=False)
    assert report.leaking and report.cache_grows and report.leaking_series == ()
    assert message(report).splitlines() == [
        "leak_check: jax's compile cache grows: 1 program new in every one of the 3 iterations and still held by "
        "jax's caches at the end, whatever the threshold: a jit made again on every call, a new static argument or a "
        "new shape each time",
        "  jit_scale compiled at test_x.py:9 in test_static (1 per run)",
    ]
    assert "programs compiled in each iteration: 1, 1, 1" in section(report)
    assert row(report)["growth_source"] == "compile cache grows"


def test_the_sweep_says_the_runs_that_confirmed_the_programs_and_which_an_earlier_test_compiled():
    from pytest_tpumem.decisions.leak import KeptProgram
    from pytest_tpumem.readings.frames import Frame

    kept = KeptProgram("jit_scale", Frame("lib.py", 3, "step"), 1, earlier=2)
    report = dataclasses.replace(
        leak(MB, MB), kept_programs=(kept,), clear_caches=False, confirmed_cleared=True, programs_confirmed_by=2
    )
    assert message(report).splitlines() == [
        "leak_check: jax's compile cache grows: 1 program new in every one of 3 runs after the warmup (1 iteration and "
        "2 more to confirm it, jax's caches kept) and still held by jax's caches at the end, whatever the threshold: a "
        "jit made again on every call, a new static argument or a new shape each time",
        "  jit_scale compiled at lib.py:3 in step (1 per run; 2 of them compiled before this check, by an earlier test)",
    ]
    record = row(report)
    assert record["programs_confirmed_by"] == 2 and record["kept_programs"][0]["earlier"] == 2


def test_programs_jax_alone_holds_are_said_and_not_a_leak():
    from pytest_tpumem.decisions.leak import KeptProgram
    from pytest_tpumem.readings.frames import Frame

    scan = KeptProgram("jit_scan", Frame("test_x.py", 5, "test_eager"), 1)
    report = dataclasses.replace(leak(MB, MB), held_by_jax=(scan,), clear_caches=False, programs_confirmed_by=2)
    assert not report.leaking
    assert (
        "new in every one of 3 runs after the warmup (1 iteration and 2 more to confirm it, jax's caches kept) but "
        "held by jax's own caches alone (not a leak: jax keys them by value and keeps at most 4096 a cache; each call "
        "compiles again, which is slow): jit_scan compiled at test_x.py:5 in test_eager (1 per run)" in section(report)
    )
    assert row(report)["held_by_jax"] == [
        {"program": "jit_scan", "site": "test_x.py:5 in test_eager", "per_iteration": 1}
    ]
    unjudged = dataclasses.replace(leak(MB, MB), programs_unjudged="value-keyed caches unavailable: jax 9")
    assert (
        "were not judged: whether jax alone holds them cannot be told here (value-keyed caches unavailable: jax 9)"
        in (section(unjudged))
    )


def test_the_section_says_what_clearing_the_caches_freed():
    report = dataclasses.replace(leak(MB, MB, MB, MB), cache_residue={"gpu:0": 3_740_000_000, "host": 0})
    assert (
        "jax.clear_caches() freed after a run, at most: gpu:0 3.7GB, host 0B (what a second run would find taken without it)"
        in section(report)
    )


def test_the_forecast_names_a_target_capacity():
    s = Series(
        "cpu:0 live arrays", "cpu:0", (0, 100 * MB, 200 * MB, 300 * MB), 17 * 10**9, "a v5e:2x2 chip's usable HBM"
    )
    assert series_line(s).endswith("exhausted in ~167 more iterations (limit 17.0GB, a v5e:2x2 chip's usable HBM)")


def test_a_host_leak_names_the_lines_a_traced_run_left_memory_at():
    from pytest_tpumem.decisions.leak import HostSite
    from pytest_tpumem.readings.frames import Frame

    report = dataclasses.replace(
        leak(MB, MB, MB, MB, host=(300 * MB, 316 * MB, 332 * MB, 348 * MB)),
        host_sites=(HostSite(Frame("test_x.py", 41, ""), 16 * MB, 3), HostSite(None, 500_000, 9)),
    )
    assert message(report).splitlines()[2:] == [
        "  left allocated on the host by one more run, traced with tracemalloc (Python and numpy allocations, not XLA's), by line:",
        "       16.0MB  3 allocations  at test_x.py:41",
        "      500.0kB  9 allocations  in a library (no line of the test's code in its stack)",
    ]


def test_free_memory_and_fragmentation_next_to_the_peak():
    roomy = dataclasses.replace(device("gpu:0", 3 * 10**9, stand_in=False), free=10 * 10**9, largest_free=9 * 10**9)
    split = dataclasses.replace(roomy, largest_free=10**9)
    assert peak_line(roomy).endswith("; at the end free 10.0GB, largest free block 9.0GB")
    assert peak_line(split).endswith(
        "largest free block 1.0GB (fragmented: a larger allocation fails although the total would fit)"
    )
    assert "free" not in peak_line(device("cpu:0", 1))


def test_failures_are_shorter_under_quiet_and_longer_under_verbose():
    from pytest_tpumem.decisions.leak import LeakSite
    from pytest_tpumem.readings.frames import Frame

    sites = tuple(
        LeakSite(Frame("t.py", n, "f"), 3, (10 - n) * 3 * MB, ("f32[1]",), ("cpu:0",), 3, runs=3) for n in range(1, 4)
    )
    report = dataclasses.replace(
        leak(16 * MB, 32 * MB, 48 * MB, 64 * MB, host=(300 * MB, 316 * MB, 332 * MB, 348 * MB)),
        sites=sites,
        compiled=(2, 2, 2),
    )
    quiet, default, verbose = (message(report, v).splitlines() for v in (-1, 0, 1))
    assert len(quiet) == 4 and quiet[-1].endswith("at t.py:1 in f")  # the first series, the first site
    assert len(default) == 2 + 1 + 1 + 3  # head, two leaking series, the sites' header and three sites
    assert "  programs compiled in each iteration: 2, 2, 2" in verbose and len(verbose) > len(default)
    over = BudgetResult(peak_report(device("cpu:0", 40 * MB), device("cpu:1", 1 * MB)), Budget(30 * MB, "s"))
    assert len(message(over, -1).splitlines()) == 2 and len(message(over, 1).splitlines()) == 3  # -v: every device


def test_an_errors_first_line_is_cut_between_words_never_inside_one():
    """newcomer2: the sweep's warning cut a leak's text mid-word ("a jit mad."). A line longer than
    the limit ends at the last space before it, with "..."; one that fits is whole."""
    from pytest_tpumem.errors import first_line

    assert first_line(ValueError("a jit made again"), 16) == "a jit made again"  # exactly the limit: whole
    assert first_line(ValueError("a jit made again!"), 16) == "a jit made..."
    assert first_line(ValueError("abcdefghijklmnopqrstuvwxyz"), 10) == "abcdefg..."  # no space: cut, marked
    assert first_line(ValueError("first line\nsecond"), 300) == "first line"
    assert first_line(ValueError(""), 300) == "ValueError"
    assert len(first_line(ValueError("word " * 100), 160)) <= 160


def test_what_other_tests_left_is_taken_off_every_figure_of_the_tests_own_use():
    """decisions.peak.own_use at its edges: every witness less what others left (never below 0), the
    judged witness kept; the whole device keeps the figures and says what is in them."""
    from pytest_tpumem.decisions.peak import LeftBehind, own_use

    d = device("cpu:0", 144 * MB, "program", start=64 * MB, sampler=150 * MB, program="jit(mul)")
    left = (LeftBehind("t.py::test_x", {"cpu:0": 64 * MB}, "t.py:15 in test_x", "global _SEEN of t"),)
    own = own_use(peak_report(d), left).devices["cpu:0"]
    assert (own.peak, own.start, own.witness, own.sampler, own.left) == (80 * MB, 0, "program", 86 * MB, 64 * MB)
    assert own.witnesses == {"end": 0, "program": 80 * MB}
    whole = own_use(peak_report(d), left, whole_device=True).devices["cpu:0"]
    assert (whole.peak, whole.start, whole.left) == (144 * MB, 64 * MB, 64 * MB)
    more_than_start = (LeftBehind("t.py::test_x", {"cpu:0": 100 * MB}),)  # never more than was there at the start
    assert own_use(peak_report(d), more_than_start).devices["cpu:0"].left == 64 * MB
    other_device = (LeftBehind("t.py::test_x", {"cpu:1": 64 * MB}),)
    assert own_use(peak_report(d), other_device).devices["cpu:0"] == dataclasses.replace(d, left=0)
    assert own_use(peak_report(d), ()) == peak_report(d)


def test_a_budget_failure_says_which_use_judged_and_who_left_the_rest():
    from pytest_tpumem.decisions.peak import LeftBehind, own_use

    d = device("cpu:0", 264 * MB, start=64 * MB)
    left = (LeftBehind("t.py::test_x", {"cpu:0": 64 * MB}, "t.py:15 in test_x", "global _SEEN of t"),)
    budget = Budget(100 * MB, "max_hbm('100MB')")
    own = message(BudgetResult(own_use(peak_report(d), left), budget)).splitlines()
    assert own[0].startswith(
        "max_hbm: peak 200.0MB on cpu:0 is over the budget of 100.0MB (max_hbm('100MB')), judged by body-end; "
        "the test's own use, what other tests left not counted (--tpumem-budget-counts=test)"
    )
    assert own[1].endswith("; 64.0MB of the start left by other tests (not counted: the test's own use)")
    assert own[2] == (
        "  64.0MB of the start was left by t.py::test_x: made at t.py:15 in test_x, kept by global _SEEN of t"
    )
    whole = message(BudgetResult(own_use(peak_report(d), left, whole_device=True), budget)).splitlines()
    assert "peak 264.0MB" in whole[0] and "everything on the device counted" in whole[0]
    assert whole[1].endswith("(counted: --tpumem-budget-counts=device)")
    record = row(BudgetResult(own_use(peak_report(d), left), budget))
    assert record["peaks"] == {"cpu:0": 200 * MB} and record["devices"]["cpu:0"]["left"] == 64 * MB
    assert record["left_behind"] == [
        {
            "owner": "t.py::test_x",
            "devices": {"cpu:0": 64 * MB},
            "made": "t.py:15 in test_x",
            "held": "global _SEEN of t",
        }
    ]
    assert record["budget_counts"] == "test"
    # nobody left anything: the message is as it always was
    assert "budget-counts" not in message(BudgetResult(peak_report(d), budget))


def test_control_characters_in_a_failures_text_are_shown_escaped():
    """A test file's name or an owner's id may hold ESC: the failure text prints it as pytest prints
    an id (\\x1b), and keeps its lines."""
    from pytest_tpumem.decisions.peak import LeftBehind, own_use

    d = device("cpu:0", 264 * MB, start=64 * MB)
    left = (LeftBehind("t\x1b[2J.py::test_x", {"cpu:0": 64 * MB}),)
    text = message(BudgetResult(own_use(peak_report(d), left), Budget(100 * MB, "max_hbm('100MB')")))
    assert "\x1b" not in text and "t\\x1b[2J.py::test_x" in text and len(text.splitlines()) == 3


def test_a_series_below_zero_is_shown_from_its_baseline_never_as_a_negative_size():
    """host other (RSS less what malloc took) is below 0 where malloc holds memory not resident: a
    real suite printed 'host other: -893.5MB -> ...'. Such a series is shown from its baseline, and
    says so; one at or above 0 is shown as it is (0 itself included)."""
    below = Series(
        "host other", "host", (-893_500_000, -892_000_000, -890_500_000), confirmation=(-890_500_000, -889_000_000)
    )
    line = series_line(below)
    assert line.startswith(
        "host other (from its baseline: RSS less malloc's heaps is below 0 here): +0B -> +1.5MB (+1.5MB) -> +3.0MB (+1.5MB); "
        "confirmation: +3.0MB -> +4.5MB (+1.5MB)"
    )
    assert "-893" not in line
    assert series_line(Series("host other", "host", (0, 1_500_000))).startswith("host other: 0B -> 1.5MB (+1.5MB)")
    assert series_line(Series("host other", "host", (1, -1))).startswith("host other (from its baseline")


def test_the_compilers_own_float32_is_called_a_cpu_overstatement_on_the_cpu_backend_alone():
    """A backend's own float32 temporaries for bf16 work are the CPU backend's habit to name; a GPU
    judged on live arrays (XLA_PYTHON_CLIENT_ALLOCATOR=platform) is a stand-in too but no CPU."""
    from pytest_tpumem.decisions.upcast import COMPILERS_OWN, PrecisionReport
    from pytest_tpumem.telling.upcast import compilers_own_line

    temp = Buffer(40 * MB, "f32[10000000]", "temporary", "convert.1", "jit(f)/dot_general", "t.py:3 (f)")
    for where in ("cpu", "gpu"):
        report = PrecisionReport((), {where: {COMPILERS_OWN: (temp,)}}, run=where)
        line = compilers_own_line(report, temps=100 * MB)
        assert line.startswith(f"  up to 40.0MB of the figure on {where} is float32 temporaries its compiler made")
        assert ("XLA's CPU backend computes bf16" in line) == (where == "cpu"), line
