"""``python -m pytest_tpumem`` as a CI runs it: a subprocess, its output and its exit status, on
reports built by hand (the ``wire`` fixture)."""

import json
import subprocess
import sys

import pytest

from pytest_tpumem.telling import report as reports

MB = 10**6


def write(wire, path, tests, **ctx):
    """A report of ``tests`` (test id -> check records) written to ``path``; its path as text."""
    reports.write(wire.report(tests, **ctx), str(path))
    return str(path)


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pytest_tpumem", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture
def base(tmp_path, wire):
    return write(
        wire, tmp_path / "base.json", {"t.py::a": [wire.peak(100 * MB), wire.leak(0)], "t.py::b": [wire.peak(50 * MB)]}
    )


def run_with(wire, tmp_path, peak_a, peak_b=50 * MB, **ctx):
    return write(
        wire,
        tmp_path / "new.json",
        {"t.py::a": [wire.peak(peak_a), wire.leak(0)], "t.py::b": [wire.peak(peak_b)]},
        **ctx,
    )


def test_a_planted_30_percent_rise_fails_beyond_10_percent(tmp_path, base, wire):
    done = cli("compare", base, run_with(wire, tmp_path, 130 * MB), "--fail", "peak:10%")
    assert done.returncode == 1, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.endswith("t.py::a"))
    assert row.split() == [
        "peak",
        "100.0MB",
        "130.0MB",
        "+30.0%",
        "+30.0MB",
        "REGRESSED",
        "beyond",
        "peak:10%",
        "t.py::a",
    ]
    assert done.stderr == ""


def test_its_2_percent_twin_passes(tmp_path, base, wire):
    done = cli("compare", base, run_with(wire, tmp_path, 102 * MB), "--fail", "peak:10%")
    assert done.returncode == 0, done.stdout
    assert "+2.0%" in done.stdout and "REGRESSED" not in done.stdout


def test_tolerances_repeat_and_comma_separate_any_one_exceeded_fails(tmp_path, base, wire):
    new = run_with(wire, tmp_path, 102 * MB, peak_b=60 * MB)  # +2MB (+2%), +10MB (+20%)
    assert cli("compare", base, new, "--fail", "peak:50%", "--fail", "growth:1MB,peak:5MB").returncode == 1
    assert cli("compare", base, new, "--fail", "peak:50%,peak:20MB").returncode == 0


def test_without_fail_a_regression_is_shown_and_exits_0(tmp_path, base, wire):
    done = cli("compare", base, run_with(wire, tmp_path, 300 * MB))
    assert done.returncode == 0
    assert "+200.0%" in done.stdout and done.stdout.splitlines()[-1].startswith("not judged: add --fail peak:10%")


def test_improvements_are_listed_and_do_not_fail(tmp_path, base, wire):
    done = cli("compare", base, run_with(wire, tmp_path, 60 * MB), "--fail", "peak:10%")
    assert done.returncode == 0
    assert any(line.endswith("improved  t.py::a") for line in done.stdout.splitlines()), done.stdout


def test_new_and_missing_tests_are_listed(tmp_path, base, wire):
    new = write(
        wire, tmp_path / "new.json", {"t.py::a": [wire.peak(100 * MB), wire.leak(0)], "t.py::c": [wire.peak(1)]}
    )
    done = cli("compare", base, new, "--fail", "peak:10%")
    assert done.returncode == 0
    out = done.stdout.splitlines()
    assert out[out.index(f"new, not in {base}:") + 1] == "  t.py::c"
    assert out[out.index(f"missing, in {base} but not measured:") + 1] == "  t.py::b"


def test_reports_that_share_no_test_fail_the_gate_with_one_line(tmp_path, base, wire):
    """Both have tests, none in both (ids named from another rootdir, not recorded): exit 1 under
    --fail though no figure was compared; exit 0 without --fail, and said."""
    new = write(
        wire, tmp_path / "new.json", {"other/u.py::a": [wire.peak(100 * MB)], "other/u.py::b": [wire.peak(50 * MB)]}
    )
    done = cli("compare", base, new, "--fail", "peak:10%")
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines()[1] == (
        f"ERROR: no test compared with {base}: it has 2 tests, this run 2, and none is the same test (it does not say "
        "which rootdir its test ids are relative to (written by an older pytest-tpumem)); the gate fails. Take the "
        "baseline from this suite (--tpumem-save), or run pytest from where it was taken (first ids: t.py::a there, "
        "other/u.py::a here)"
    )
    assert cli("compare", base, new).returncode == 0
    moved = write(wire, tmp_path / "moved.json", {"proj/t.py::a": [wire.peak(130 * MB)]}, rootdir="/w")
    rooted = write(wire, tmp_path / "rooted.json", {"t.py::a": [wire.peak(100 * MB)]}, rootdir="/w/proj")
    done = cli("compare", rooted, moved, "--fail", "peak:10%")
    assert done.returncode == 1 and "1 test matched with" in done.stdout and "REGRESSED" in done.stdout


def test_a_foreign_baseline_warns_and_never_fails(tmp_path, base, wire):
    done = cli(
        "compare",
        base,
        run_with(wire, tmp_path, 300 * MB, platform="gpu", device_kind="NVIDIA H100"),
        "--fail",
        "peak:10%",
    )
    assert done.returncode == 0
    warnings = [line for line in done.stdout.splitlines() if "not comparable" in line]
    assert warnings == [
        f"WARNING: {base} is not comparable: it was taken on platform 'cpu', this run is on 'gpu'; changes are shown, none fails"
    ]


@pytest.mark.parametrize(
    "content, says",
    [
        (b"{not json", "not JSON"),
        (json.dumps({"schema": "something-else", "version": 1}).encode(), "not a pytest-tpumem report"),
        (json.dumps({**reports.build({}, {}).to_json(), "version": 99}).encode(), "schema version 99 is newer"),
        (
            json.dumps(
                {**reports.build({}, {}).to_json(), "tests": {"t.py::a": {"verdict": "ok", "peak": "big"}}}
            ).encode(),
            "'big', not bytes",
        ),
        # Valid JSON of the wrong types (each crashed show, compare or merge with exit 1, compare's "regression"):
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to be a report"),
        (
            json.dumps({**reports.build({}, {"git": {"commit": "a", "dirty": "yes"}}).to_json()}).encode(),
            'context "git" is not',
        ),
        (
            json.dumps({**reports.build({}, {"versions": ["jax"]}).to_json()}).encode(),
            "context \"versions\" is ['jax'], not an object",
        ),
        (
            json.dumps({**reports.build({}, {"merged_from": "x"}).to_json()}).encode(),
            "context \"merged_from\" is 'x', not a whole number",
        ),
        (
            json.dumps({**reports.build({}, {"hostname": ["a"]}).to_json()}).encode(),
            "context \"hostname\" is ['a'], not text",
        ),
        (
            json.dumps(reports.build({}, {}).to_json()).replace("{}", '{"bytes_limit": NaN}', 1).encode(),
            "NaN is not a JSON number",
        ),
        (
            json.dumps(
                {**reports.build({}, {}).to_json(), "tests": {"t.py::a": {"verdict": "ok", "peak": 10**20}}}
            ).encode(),
            "10000",
        ),
        (
            json.dumps(
                {**reports.build({}, {}).to_json(), "tests": {"t.py::a": {"verdict": "ok", "host_peak": "x"}}}
            ).encode(),
            "\"host_peak\" is 'x'",
        ),
        (
            json.dumps(
                {**reports.build({}, {}).to_json(), "tests": {"t.py::a": {"verdict": "ok", "checks": [1]}}}
            ).encode(),
            '"checks" is not a list of objects',
        ),
        (
            json.dumps({**reports.build({}, {}).to_json(), "tests": {"t.py::a": {"verdict": "fine"}}}).encode(),
            "\"verdict\" is 'fine', not one of",
        ),
    ],
    ids=[
        "corrupt",
        "wrong schema",
        "newer version",
        "bad figure",
        "deep",
        "git dirty text",
        "versions list",
        "merged_from text",
        "hostname list",
        "NaN",
        "peak past 2^63",
        "host_peak text",
        "checks of numbers",
        "unknown verdict",
    ],
)
def test_an_unusable_report_exits_2_naming_the_file(tmp_path, base, content, says):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for args in (
        ("compare", base, bad),
        ("compare", bad, base),
        ("show", bad),
        ("merge", base, bad, "-o", tmp_path / "out.json"),
    ):
        done = cli(*args)
        assert done.returncode == 2, args
        assert done.stderr.count("\n") == 1 and f"{bad}: " in done.stderr and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_a_missing_file_exits_2_naming_it(tmp_path, base):
    done = cli("compare", base, tmp_path / "nowhere.json")
    assert done.returncode == 2
    assert done.stderr == f"python -m pytest_tpumem compare: error: {tmp_path / 'nowhere.json'}: no such file\n"


@pytest.mark.parametrize("value", ["peek:10%", "peak:10Gb", "peak", "peak:10%,growth:lots", ","])
def test_a_bad_fail_expression_exits_2_naming_it(tmp_path, base, value):
    done = cli("compare", base, base, "--fail", value)
    assert done.returncode == 2
    assert done.stderr.startswith("python -m pytest_tpumem compare: error: --fail") and done.stderr.count("\n") == 1
    named = value.split(",")[-1] if "lots" in value else value
    assert repr(named) in done.stderr, done.stderr


def process_report(wire, tmp_path, index, leak_verdict="ok"):
    device = f"cpu:{index}"
    tests = {
        "t.py::shared": [
            wire.peak((index + 1) * 10 * MB, device, budget=100 * MB),
            wire.leak(index * MB, verdict=leak_verdict),
        ],
        f"t.py::only_{index}": [wire.peak(MB, device)],
    }
    return write(
        wire, tmp_path / f"r.process-{index}-of-2.json", tests, process_index=index, process_count=2, pid=100 + index
    )


def test_merge_says_what_it_wrote_in_words_that_agree_with_the_counts(tmp_path, wire):
    one = [
        write(
            wire,
            tmp_path / f"one.process-{i}-of-2.json",
            {"t.py::a": [wire.peak(MB, f"cpu:{i}")]},
            process_index=i,
            process_count=2,
            pid=200 + i,
        )
        for i in (0, 1)
    ]
    done = cli("merge", *one, "-o", tmp_path / "m.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {tmp_path / 'm.json'}: 1 test from 2 processes\n"  # was "1 tests"


def test_merge_gives_every_test_once_with_both_devices_and_the_worst_verdict(tmp_path, wire):
    r0, r1 = process_report(wire, tmp_path, 0), process_report(wire, tmp_path, 1, leak_verdict="leak")
    out = tmp_path / "merged.json"
    done = cli("merge", r0, r1, "-o", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {out}: 3 tests from 2 processes\n"
    merged = reports.read(str(out))
    assert sorted(merged.tests) == ["t.py::only_0", "t.py::only_1", "t.py::shared"]
    shared = merged.tests["t.py::shared"]
    assert shared.peaks == {"cpu:0": 10 * MB, "cpu:1": 20 * MB} and shared.peak == 20 * MB
    assert shared.verdict == "leak" and shared.growth == MB
    assert [c["process_index"] for c in merged.processes] == [0, 1]
    assert merged.context["merged_from"] == 2 and (merged.measured, merged.failed) == (3, 1)
    assert json.loads(out.read_text())["summary"] == {"measured": 3, "failed": 1}
    shown = cli("show", out)
    assert shown.returncode == 0 and "merged from 2 processes" in shown.stdout


def test_merge_refuses_a_report_given_twice_and_an_output_that_is_an_input(tmp_path, wire):
    r0, r1 = process_report(wire, tmp_path, 0), process_report(wire, tmp_path, 1)
    before = open(r0, "rb").read()
    twice = cli("merge", r0, r0, "-o", tmp_path / "out.json")
    assert twice.returncode == 2 and f"{r0}: the same process's report as {r0}" in twice.stderr
    over = cli("merge", r0, r1, "-o", r0)
    assert over.returncode == 2 and f"{r0}: is also one of the reports to merge" in over.stderr
    through_another_path = cli("merge", "r.process-0-of-2.json", r1, "-o", "./r.process-0-of-2.json", cwd=tmp_path)
    assert through_another_path.returncode == 2
    assert open(r0, "rb").read() == before and not (tmp_path / "out.json").exists()


def test_merge_refuses_reports_of_two_schema_versions(tmp_path, wire):
    r0, r1 = process_report(wire, tmp_path, 0), process_report(wire, tmp_path, 1)
    old = json.loads(open(r1).read())
    old["version"] = 1
    open(r1, "w").write(json.dumps(old))
    mixed = cli("merge", r0, r1, "-o", tmp_path / "out.json")
    assert mixed.returncode == 2 and not (tmp_path / "out.json").exists()
    assert f"{r1}: schema version 1, but {r0} has 2; merge reports of one run" in mixed.stderr


def test_show_prints_the_context_and_the_tests_worst_first(tmp_path, wire):
    path = write(
        wire,
        tmp_path / "r.json",
        {
            "t.py::fine": [wire.peak(10 * MB, budget=100 * MB)],
            "t.py::over": [wire.peak(200 * MB, budget=100 * MB, verdict="over budget")],
        },
        versions={"python": "3.12.1", "jax": "0.6.0"},
        git={"commit": "abc123", "dirty": False},
    )
    done = cli("show", path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[:4] == [
        "platform cpu, device kind cpu, 1 device",
        "versions: python 3.12.1, jax 0.6.0",
        "git commit abc123",
        "process 0 of 1 on h, started 2025-05-01T10:00:00+00:00",
    ]
    assert [line.split() for line in out[5:]] == [
        ["verdict", "peak", "budget", "growth/iter", "test"],
        ["over", "budget", "200.0MB", "100.0MB", "-", "t.py::over"],
        ["ok", "10.0MB", "100.0MB", "-", "t.py::fine"],
        ["2", "measured,", "1", "failed", "a", "memory", "check"],
    ]


def test_help_names_every_command_and_the_exit_codes():
    done = cli("--help")
    assert done.returncode == 0
    for word in ("show", "compare", "merge", "exit status"):
        assert word in done.stdout
    compare = cli("compare", "--help").stdout
    assert "--fail EXPR" in compare and "peak:10%" in compare
    assert cli().returncode == 2  # no command: argparse's usage error


def test_no_jax_is_imported(tmp_path, base, wire):
    new = run_with(wire, tmp_path, 130 * MB)
    out = tmp_path / "merged.json"
    script = (
        "import runpy, sys\n"
        f"for argv in {[['show', base], ['compare', base, new, '--fail', 'peak:10%'], ['merge', base, '-o', str(out)]]!r}:\n"
        "    sys.argv = ['pytest_tpumem', *argv]\n"
        "    try:\n"
        "        runpy.run_module('pytest_tpumem', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'numpy', 'pytest', '_pytest')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    assert out.exists()


def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path):
    """A FIFO with no writer, or /dev/zero, would never end: refused without reading."""
    import os

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_tpumem", "show", str(path)], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 2
        assert done.stderr.strip().endswith(
            f"{path}: not a regular file (a report is a JSON file written by --tpumem-json or --tpumem-save)"
        )


def test_merge_refuses_two_runs_of_one_process_and_writes_what_show_reads(tmp_path, wire):
    """Two single-process runs are not two processes of one run; what merge writes, show reads."""
    a = write(wire, tmp_path / "a.json", {"t.py::a": [wire.peak(MB)]}, pid=1)
    b = write(wire, tmp_path / "b.json", {"t.py::a": [wire.peak(2 * MB)]}, pid=2, started="2025-05-02T10:00:00+00:00")
    done = cli("merge", a, b, "-o", tmp_path / "m.json")
    assert done.returncode == 2 and not (tmp_path / "m.json").exists()
    assert done.stderr.strip().endswith(
        f"{b}: process 0 of 1, as {a} is: two runs, not two processes of one run "
        "(merge joins the processes of one jax.distributed run or of several hosts)"
    )
    p0 = write(wire, tmp_path / "p0.json", {"t.py::a": [wire.peak(MB)]}, process_count=2)
    p1 = write(wire, tmp_path / "p1.json", {"t.py::a": [wire.peak(2 * MB)]}, process_index=1, process_count=2, pid=2)
    assert cli("merge", p0, p1, "-o", tmp_path / "m.json").returncode == 0
    shown = cli("show", tmp_path / "m.json")
    assert shown.returncode == 0 and "merged from 2 processes on h" in shown.stdout


def test_html_with_fail_says_what_regressed_as_compare_does(tmp_path, base, wire):
    new = run_with(wire, tmp_path, 130 * MB)
    page = tmp_path / "page.html"
    done = cli("html", new, "-o", page, "--baseline", base, "--fail", "peak:10%")
    assert done.returncode == 1, done.stderr
    compared = cli("compare", base, new, "--fail", "peak:10%")
    row = next(line for line in done.stdout.splitlines() if line.endswith("t.py::a"))
    assert row in compared.stdout.splitlines() and "REGRESSED beyond peak:10%" in row
    assert done.stdout.splitlines()[0].startswith(f"wrote {page}: 2 measured tests from 1 report")
    within = cli("html", run_with(wire, tmp_path, 102 * MB), "-o", page, "--baseline", base, "--fail", "peak:10%")
    assert within.returncode == 0 and "REGRESSED" not in within.stdout  # its twin: within the tolerance


@pytest.mark.parametrize("command", ["merge", "html"])
def test_an_output_that_is_not_the_plugins_is_never_overwritten(tmp_path, base, command):
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    done = cli(command, base, "-o", notes)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"python -m pytest_tpumem {command}: error: {notes}: a file pytest-tpumem did not write is there (it seems to "
        "be a text file), and is left as it is: give another path, or move that file away\n"
    )
    assert notes.read_text() == "# my notes\n"
    out = tmp_path / "out"
    assert cli(command, base, "-o", out).returncode == 0
    assert cli(command, base, "-o", out).returncode == 0  # its own last output is replaced
    out.write_bytes(b"")
    assert cli(command, base, "-o", out).returncode == 0 and out.stat().st_size > 0  # and an empty file
