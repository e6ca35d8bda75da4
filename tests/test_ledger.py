"""The suite ledger (issue 18) on planted suites: each test read after its teardown, what a test
left behind named with the line that made it and what keeps it, a wider-scope fixture's memory its
own (and seen freed when its scope ends), a failed test's traceback told apart, patterns across
tests, and the flight recorder that survives a killed process (and a crashed pytest-xdist worker)."""

import json
import re
import sys

import pytest

MB = 10**6

PLANTED = """
import jax
import jax.numpy as jnp
import pytest

HOLD = []
REGISTRY = {}


def test_clean():
    x = jnp.ones((1000, 1000))
    assert float(x.sum()) == 1e6


def test_leaks_into_module_list():
    HOLD.append(jnp.ones((16_000_000,), jnp.float32))  # 64 MB


def test_compiles_into_registry():
    c = jnp.ones((1_000_000,))
    REGISTRY[len(REGISTRY)] = jax.jit(lambda x: x + c)
    REGISTRY[len(REGISTRY) - 1](c).block_until_ready()


@pytest.fixture(scope="module")
def big():
    return {"w": jnp.ones((25_000_000,), jnp.float32)}  # 100 MB


def test_uses_big(big):
    assert big["w"].shape == (25_000_000,)


def test_fails_holding():
    y = jnp.ones((12_500_000,), jnp.float32)  # 50 MB
    assert y.sum() == 0


def test_clean_after():
    z = jnp.zeros((100, 100))
    assert z.shape == (100, 100)
"""


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _lines(records):
    return {r["test"].split("::")[-1]: r for r in records if "test" in r}


@pytest.fixture
def planted(pytester):
    pytester.makepyfile(test_planted=PLANTED)
    return pytester


def test_the_planted_leak_is_named_with_its_line_and_holder_and_no_clean_test_is(planted):
    result = planted.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=ledger.jsonl")
    result.assert_outcomes(passed=5, failed=1)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*- tpumem ledger -*",
            "6 tests read between, each after its teardown; device memory as the bytes of live arrays "
            "(the runtime reports none on this backend):",
            "1 test left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):",
            "  64.0MB  test_planted.py::test_leaks_into_module_list",
            "      made at test_planted.py:15 in test_leaks_into_module_list: 64.0MB (1 array, e.g. f32[16000000])",
            "      kept by global HOLD of test_planted at [0]: 64.0MB",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "1 failed test kept 10.0MB or more of their arrays alive by the failure's traceback:",
            "  50.0MB  test_planted.py::test_fails_holding: 50.0MB still alive at the end, 50.0MB of it in reference "
            "cycles that gc.collect() freed",
            "module fixture big (test_planted.py) held ['w'] 100.0MB (its own, blamed on no test): "
            "freed when its scope ended",
        ]
    )
    for clean in ("test_clean", "test_compiles_into_registry", "test_uses_big", "test_clean_after"):
        assert f"MB  test_planted.py::{clean}" not in text
    # what one test alone left is its line's, not a pattern
    assert "tests left arrays made at" not in text and "tests compiled programs at" not in text
    lines = _lines(_records(planted.path / "ledger.jsonl"))
    assert lines["test_leaks_into_module_list"]["residue"] == 64 * MB  # the truth, to the byte
    assert lines["test_compiles_into_registry"]["residue"] == 4 * MB  # its constant, kept by the registry's jit
    assert lines["test_compiles_into_registry"]["compiled"] >= 1
    assert lines["test_uses_big"]["residue"] == 0 and lines["test_uses_big"]["fixtures"] == {
        "module fixture big (test_planted.py)": 100 * MB
    }
    assert lines["test_clean_after"]["ended"] == {"module fixture big (test_planted.py)": 0}
    # its 50 MB, and the 4 B sum and 1 B comparison of the failed assert, all kept by its traceback
    assert lines["test_fails_holding"]["residue"] == 50 * MB + 5 and lines["test_fails_holding"]["left"] == 0
    assert lines["test_fails_holding"]["traceback"] == 50 * MB + 5
    assert lines["test_clean"]["residue"] == 0 and lines["test_clean_after"]["residue"] == 0


@pytest.mark.parametrize(
    ("threshold", "named"), [("64000000B", True), ("64000001B", False), ("0", False), ("0MB", False)]
)
def test_a_test_is_named_from_a_residue_equal_to_the_threshold_and_0_names_none(planted, threshold, named):
    result = planted.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", f"--tpumem-residue={threshold}"
    )
    result.assert_outcomes(passed=5, failed=1)  # 0 is the documented way to name no test, not a usage error
    text = result.stdout.str()
    assert ("  64.0MB  test_planted.py::test_leaks_into_module_list" in text) is named
    assert ("no test left" in text) is (threshold == "64000001B")  # 0 names none: nor says that none is named
    assert not (planted.path / "ledger.jsonl").exists()


def test_a_residue_of_0_in_the_ini_names_none_and_the_report_says_0(pytester):
    pytester.makepyfile("import jax.numpy as jnp\nHOLD = []\n\ndef test_a():\n    HOLD.append(jnp.ones(3_000_000))\n")
    pytester.makeini("[pytest]\ntpumem_residue = 0\n")
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-ledger=off", "--tpumem-json=r.json")
    result.assert_outcomes(passed=1)
    assert "12.0MB  " not in result.stdout.str() and "no test left" not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["ledger"]["threshold"] == 0 and report["context"]["settings"]["residue"] == 0


def test_a_bad_residue_is_a_usage_error_naming_it(pytester):
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("--tpumem", "--tpumem-residue=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tpumem-residue*'lots'*"])


def test_the_pattern_of_many_small_residues_is_named_by_its_line(pytester):
    pytester.makepyfile(
        test_climb="""
import functools

import jax
import jax.numpy as jnp
import pytest


@functools.lru_cache(maxsize=None)
def scaler(i):
    c = jnp.full((1_000_000,), float(i))  # 4 MB, closed over by a program the cache keeps
    return jax.jit(lambda x: x * c)


@pytest.mark.parametrize("i", range(20))
def test_closure(i):
    assert scaler(i)(jnp.ones(1_000_000))[0] == i
"""
    )
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=off")
    result.assert_outcomes(passed=20)
    result.stdout.fnmatch_lines(
        [
            "no test left 10.0MB or more of the arrays it made alive after its teardown (--tpumem-residue)",
            "20 tests left arrays made at test_climb.py:10 in scaler alive: 80.0MB at the end",
        ]
    )
    said = re.search(
        r"^20 tests compiled programs at test_climb.py:16 in test_closure that jax's caches keep: (\d+) at the end, "
        r"about [\d.]+[kMG]?B of host memory \([\d.]+[kMG]?B a program: the median over \d+ tests that compiled and "
        r"kept no arrays\) \(jax.clear_caches\(\) frees them\)$",
        result.stdout.str(),
        re.M,
    )
    assert said is not None, result.stdout.str()
    assert int(said.group(1)) >= 20  # each test's own program, and what jax compiles beside it for its version


KILLED = """
import os

import jax.numpy as jnp

HOLD = []


def test_before():
    HOLD.append(jnp.ones((5_000_000,), jnp.float32))  # 20 MB


def test_dies():
    os._exit(3)


def test_never_runs():
    pass
"""


def test_the_flight_recorder_says_which_test_a_killed_process_was_in(pytester):
    pytester.makepyfile(test_killed=KILLED)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=ledger.jsonl")
    assert result.ret == 3
    records = _records(pytester.path / "ledger.jsonl")
    assert records[0]["schema"] == "pytest-tpumem-ledger" and records[0]["worker"] is None
    assert records[-1]["start"] == "test_killed.py::test_dies" and records[-1]["rss"] > 0  # its RSS at its start
    before = records[-2]
    assert before["test"] == "test_killed.py::test_before" and before["residue"] == 20 * MB
    assert before["devices"] == {"cpu:0": 20 * MB, "cpu:1": 0}


def test_a_crashed_xdist_worker_is_told_with_its_last_readings(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_killed=KILLED)
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "-n", "1", "--tpumem-ledger=ledger.jsonl", "--tpumem-json=r.json"
    )
    result.stdout.fnmatch_lines(
        [
            "*worker 'gw0' crashed while running 'test_killed.py::test_dies'",
            f"tpumem: gw0's flight recorder ({pytester.path / 'ledger.gw0.jsonl'}): "
            "the last test it began was test_killed.py::test_dies",
            "  after test_killed.py::test_before: cpu:0 20.0MB, cpu:1 0B; programs held *; host RSS *",
        ]
    )
    ledger = json.loads((pytester.path / "r.json").read_text())["ledger"]  # the JSON report keeps them
    (crash,) = ledger["crashed"]
    assert crash["worker"] == "gw0" and crash["test"] == "test_killed.py::test_dies"
    assert crash["said"][1].startswith("  after test_killed.py::test_before: cpu:0 20.0MB")
    # what the crashed worker read before it died is not lost: its flight recorder had it; the worker
    # that replaced it ran the last test, which started no backend: its host figures alone
    assert list(ledger["tests"]) == ["test_killed.py::test_before", "test_killed.py::test_never_runs"]
    assert ledger["tests"]["test_killed.py::test_before"]["residue"] == 20 * MB
    never = ledger["tests"]["test_killed.py::test_never_runs"]
    assert never["started"] is False and never["devices"] == {} and never["host"]["rss"] > 0


def test_without_a_cache_and_a_path_no_recorder_is_written(pytester):
    pytester.makepyfile("import jax.numpy as jnp\n\ndef test_a():\n    assert jnp.ones(3).sum() == 3\n")
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not list(pytester.path.rglob("*.jsonl"))
    result.stdout.fnmatch_lines(["1 test read between, each after its teardown*"])


def test_by_default_the_recorder_is_in_pytests_cache(pytester):
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--tpumem")
    result.assert_outcomes(passed=1)
    records = _records(pytester.path / ".pytest_cache" / "d" / "tpumem" / "ledger.jsonl")
    assert [r.get("start") for r in records[1:2]] == ["test_by_default_the_recorder_is_in_pytests_cache.py::test_a"]
    assert records[2]["devices"] == {} and records[-1]["end"] is True  # jax never started: nothing on a device


SHAPES_RUN = 4  # tests in SHAPES, each compiling a program of a new shape
SHAPES = f"""
import jax
import jax.numpy as jnp
import pytest


@jax.jit
def double(x):
    return x * 2


@pytest.mark.parametrize("n", range(1, {SHAPES_RUN + 1}))
def test_new_shape(n):
    assert double(jnp.ones(n))[0] == 2
"""


def _held_at_end(text):
    said = re.search(r"^  programs jax holds compiled: (\d+) at the end$", text, re.M)
    assert said is not None, text
    return int(said.group(1))


def test_clearing_jaxs_caches_is_opt_in_and_says_what_it_freed(pytester):
    pytester.makepyfile(test_shapes=SHAPES)
    plain = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=off")
    plain.assert_outcomes(passed=SHAPES_RUN)
    held = _held_at_end(plain.stdout.str())
    assert held >= SHAPES_RUN and "malloc_trim(0) ran" not in plain.stdout.str()  # off by default
    module = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=ledger.jsonl", "--tpumem-clear-caches=module"
    )
    module.assert_outcomes(passed=SHAPES_RUN)
    assert _held_at_end(module.stdout.str()) == 0
    module.stdout.fnmatch_lines(
        [
            "  jax.clear_caches(), gc.collect() and malloc_trim(0) ran after 1 test (--tpumem-clear-caches=module): "
            f"they freed {held} programs, 0B on the devices and * of host memory (clear_caches *, gc *, malloc_trim *)"
        ]
    )
    cleared = [r for r in _records(pytester.path / "ledger.jsonl") if "cleared" in r]
    assert [r["test"] for r in cleared] == [f"test_shapes.py::test_new_shape[{SHAPES_RUN}]"]
    host = cleared[0]["cleared"].pop("host")
    assert cleared[0]["cleared"] == {"programs": held, "bytes": 0} and cleared[0]["executables"] == 0
    assert sorted(host) == ["clear_caches", "gc", "malloc_trim"] and all(isinstance(n, int) for n in host.values())
    every = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-clear-caches=test")
    every.stdout.fnmatch_lines(
        [f"  jax.clear_caches(), * ran after {SHAPES_RUN} tests (--tpumem-clear-caches=test): they freed *"]
    )


def _cleared_at(pytester, value, *args):
    """SHAPES run with ``--tpumem-clear-caches=VALUE``: host:SIZE clears after each test that leaves
    the process at SIZE or more; host:N% says what it is a share of, and where that was read;
    device:N% on a CPU says that it never clears (no device reports a limit)."""
    pytester.makepyfile(test_shapes=SHAPES)
    return pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", *args, f"--tpumem-clear-caches={value}")


def test_clearing_on_host_memory_of_1mb_clears_after_every_test(pytester):
    result = _cleared_at(pytester, "host:1MB")
    result.assert_outcomes(passed=SHAPES_RUN)
    result.stdout.fnmatch_lines(
        [f"  jax.clear_caches(), * ran after {SHAPES_RUN} tests (--tpumem-clear-caches=host:1MB): they freed *"]
    )
    assert _held_at_end(result.stdout.str()) == 0


def test_clearing_on_host_memory_of_1tb_never_clears(pytester):
    text = _cleared_at(pytester, "host:1TB").stdout.str()
    assert "malloc_trim(0) ran" not in text and _held_at_end(text) >= SHAPES_RUN


def test_clearing_on_a_share_of_the_limit_says_what_it_is_a_share_of(pytester):
    result = _cleared_at(pytester, "host:100%")
    assert "malloc_trim(0) ran" not in result.stdout.str()  # the whole of the runner's limit: never reached
    result.stdout.fnmatch_lines(["  host:100% is *B here: 100% of *B (*)"])  # a cgroup limit, else MemTotal


def test_clearing_on_a_share_of_the_limit_under_xdist_says_the_workers_share_it(pytester):
    pytest.importorskip("xdist")
    result = _cleared_at(pytester, "host:100%", "-n", "2")
    said = [line for line in result.stdout.lines if "host:100% is" in line]
    assert len(said) == 2 and all(line.endswith(", shared by 2 pytest-xdist workers)") for line in said), said


def test_clearing_on_a_share_of_a_device_limit_on_a_cpu_says_it_never_clears(pytester):
    _cleared_at(pytester, "device:80%").stdout.fnmatch_lines(
        ["  --tpumem-clear-caches=device:80% never cleared: no device here reports a bytes_limit in memory_stats()"]
    )


@pytest.mark.parametrize(
    "value",
    ["sometimes", "0", "-3", "10000001", "host:0%", "host:101%", "host:60.5%", "device:600MB", "disk:5%", "host:"],
)
def test_a_bad_clear_caches_value_is_a_usage_error_naming_it(pytester, value):
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest("--tpumem", f"--tpumem-clear-caches={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = f"*--tpumem-clear-caches: '{value}' is not one of off, test, module, a number*host:SIZE*host:N%*device:N%*"
    if value == "host:":
        said = "*--tpumem-clear-caches (host:SIZE): '' is not a size*"
    result.stderr.fnmatch_lines([said])


def test_the_ledger_is_switched_off_by_blocking_its_plugin(planted):
    result = planted.runpytest_subprocess("--tpumem", "-p", "no:tpumem-ledger", "--tpumem-ledger=ledger.jsonl")
    result.assert_outcomes(passed=5, failed=1)
    assert "tpumem ledger" not in result.stdout.str() and not (planted.path / "ledger.jsonl").exists()


SIZED = """
import os

import jax.numpy as jnp

HOLD = []


def test_leaves():
    HOLD.append(jnp.ones((int(os.environ["SIZE"]),), jnp.int8))


def test_clean():
    assert jnp.ones(3).sum() == 3
"""


def _sized(pytester, monkeypatch, size, *args):
    monkeypatch.setenv("SIZE", str(size))
    return pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", *args)


def test_the_json_report_keeps_every_tests_residue(pytester, monkeypatch):
    pytester.makepyfile(test_sized=SIZED)
    _sized(pytester, monkeypatch, 3_000_000, "--tpumem-json=r.json").assert_outcomes(passed=2)
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["tests"] == {}  # no test was measured: the ledger's part is its own
    ledger = report["ledger"]
    assert ledger["threshold"] == 10 * MB and sorted(ledger["tests"]) == [
        "test_sized.py::test_clean",
        "test_sized.py::test_leaves",
    ]
    figures = {k: {f: v[f] for f in ("outcome", "residue", "left")} for k, v in ledger["tests"].items()}
    assert figures == {
        "test_sized.py::test_clean": {"outcome": "passed", "residue": 0, "left": 0},
        "test_sized.py::test_leaves": {"outcome": "passed", "residue": 3 * MB, "left": 3 * MB},
    }
    assert all(v["compiled"] >= 1 for v in ledger["tests"].values())  # jnp.ones, at least: the count is jax's
    assert report["context"]["settings"]["residue"] == 10 * MB


@pytest.mark.parametrize(("size", "regressed"), [(13_000_000, False), (13_000_001, True)])
def test_a_residue_regression_beyond_its_tolerance_fails_the_run(pytester, monkeypatch, size, regressed):
    pytester.makepyfile(test_sized=SIZED)
    _sized(pytester, monkeypatch, 3_000_000, "--tpumem-save=base.json").assert_outcomes(passed=2)
    result = _sized(pytester, monkeypatch, size, "--tpumem-compare=base.json", "--tpumem-compare-fail=residue:10MB")
    result.assert_outcomes(passed=2)  # the test passed: its residue is read after its report
    if regressed:  # one byte over: the figure is told apart from the tolerance
        row = "residue  3.0MB  13.0MB  +333.3%  +10,000,001B  REGRESSED beyond residue:10MB  test_sized.py::test_leaves"
    else:
        row = "residue  3.0MB  13.0MB  +333.3%  +10.0MB  -       test_sized.py::test_leaves"  # equal: within
    result.stdout.fnmatch_lines([row])
    assert result.ret == (1 if regressed else 0)
    said = "a residue is read after its test's report (once pytest has dropped its fixtures): a residue that "
    assert (said in result.stdout.str()) is regressed


def test_the_sessions_picture_is_written_beside_the_json_report(planted):
    import xml.etree.ElementTree as ET

    result = planted.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-json=out/r.json")
    result.assert_outcomes(passed=5, failed=1)
    picture = planted.path / "out" / "r.ledger.svg"
    result.stdout.fnmatch_lines([f"the session's picture (memory and programs after each test): {picture}"])
    svg = "{http://www.w3.org/2000/svg}"
    root = ET.parse(picture).getroot()
    devices = {
        p.get("data-name"): p.get("points").split() for p in root.iter(f"{svg}polyline") if p.get("class") == "device"
    }
    assert sorted(devices) == ["cpu:0", "cpu:1"] and all(len(points) == 6 for points in devices.values())
    named = [c.find(f"{svg}title").text for c in root.iter(f"{svg}circle") if c.get("class") == "named"]
    assert named == ["test_planted.py::test_leaks_into_module_list: left 64.0MB"]
    (programs,) = [p for p in root.iter(f"{svg}polyline") if p.get("class") == "programs"]
    assert len(programs.get("points").split()) == 6


def test_without_a_json_report_the_picture_is_beside_the_flight_recorder_and_a_workers_is_its_own(planted):
    pytest.importorskip("xdist")
    result = planted.runpytest_subprocess("--tpumem", "-n", "1", "--tpumem-ledger=rec/ledger.jsonl")
    result.assert_outcomes(passed=5, failed=1)
    assert sorted(p.name for p in (planted.path / "rec").iterdir()) == ["ledger.gw0.jsonl", "ledger.gw0.svg"]
    result.stdout.fnmatch_lines(
        [f"gw0's picture (memory and programs after each test): {planted.path / 'rec' / 'ledger.gw0.svg'}"]
    )


def test_a_flight_recorder_that_cannot_be_written_is_said_and_fails_no_test(pytester):
    pytester.makepyfile("import jax.numpy as jnp\n\ndef test_a():\n    assert jnp.ones(3).sum() == 3\n")
    (pytester.path / "taken").write_text("a file, not a directory")
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-ledger=taken/ledger.jsonl")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            f"tpumem: the ledger's flight recorder could not be written to {pytester.path / 'taken' / 'ledger.jsonl'}: "
            "Not a directory",
            f"tpumem: the session's picture could not be written to {pytester.path / 'taken' / 'ledger.svg'}: "
            "Not a directory",
        ]
    )


def test_an_xfailed_tests_traceback_is_told_apart_as_a_failures(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp, pytest

        @pytest.mark.xfail(strict=True)
        def test_fails_holding_array():
            big = jnp.ones((3_000_000,), jnp.float32)  # 12 MB in the frame its traceback keeps
            assert float(big.sum()) < 0
        """
    )
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-ledger=ledger.jsonl")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "no test left 10.0MB or more of the arrays it made alive after its teardown (--tpumem-residue)",
            "1 failed test kept 10.0MB or more of their arrays alive by the failure's traceback:",
            "  12.0MB  test_an_xfailed_tests_traceback_is_told_apart_as_a_failures.py::test_fails_holding_array "
            "(xfailed): *",
        ]
    )
    (line,) = _lines(_records(pytester.path / "ledger.jsonl")).values()
    assert line["outcome"] == "xfailed" and line["left"] == line["residue"] - line["traceback"] < MB


def test_a_run_that_runs_no_test_leaves_the_last_flight_recorder_as_it_was(pytester):
    pytester.makepyfile(test_killed=KILLED)
    pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "--tpumem-ledger=ledger.jsonl")
    kept = (pytester.path / "ledger.jsonl").read_bytes()  # the killed run's: it says where it died
    for args in (["--collect-only"], ["-k", "no_such_test"]):
        pytester.runpytest_subprocess("--tpumem", "--tpumem-ledger=ledger.jsonl", *args)
        assert (pytester.path / "ledger.jsonl").read_bytes() == kept


# --- the flight recorder: refused where it cannot be a file of its own, one run's at a time ----------


def test_a_recorder_at_a_fifo_is_a_usage_error_at_once_and_not_a_hang(pytester):
    import os

    pytester.makepyfile("def test_a():\n    pass\n")
    os.mkfifo(pytester.path / "fifo.jsonl")
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-ledger=fifo.jsonl", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-tpumem: --tpumem-ledger {pytester.path / 'fifo.jsonl'}: is a FIFO, not a file: *give a file's path, or off)"
        ]
    )


def test_a_fifo_at_the_default_recorders_path_is_said_and_the_run_goes_on_without_one(pytester):
    import os

    pytester.makepyfile("def test_a():\n    pass\n")
    (pytester.path / ".pytest_cache" / "d" / "tpumem").mkdir(parents=True)
    fifo = pytester.path / ".pytest_cache" / "d" / "tpumem" / "ledger.jsonl"
    os.mkfifo(fifo)
    result = pytester.runpytest_subprocess("--tpumem", timeout=60)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [f"tpumem: the ledger's flight recorder could not be written to {fifo}: is a FIFO, not a file*"]
    )


def test_the_recorder_is_refused_where_another_output_or_the_baseline_is(pytester):
    pytester.makepyfile(
        "import jax.numpy as jnp, pytest\n\n@pytest.mark.max_hbm('1GB')\ndef test_a():\n    jnp.ones(3)\n"
    )
    pytester.runpytest_subprocess("--tpumem", "--tpumem-save=base.json").assert_outcomes(passed=1)
    base = (pytester.path / "base.json").read_bytes()
    for args, said in (
        (
            ["--tpumem-compare=base.json", "--tpumem-ledger=base.json"],
            "--tpumem-ledger */base.json is the baseline --tpumem-compare reads: it would be overwritten; give it another path",
        ),
        (
            ["--tpumem-json=x.json", "--tpumem-ledger=x.json"],
            "--tpumem-ledger */x.json is also --tpumem-json's file: one would overwrite the other; give each its own path",
        ),
        (
            ["--tpumem-json=r.json", "--tpumem-ledger=r.ledger.svg"],
            "the session's picture (beside --tpumem-json) */r.ledger.svg is also --tpumem-ledger's file: *",
        ),
    ):
        result = pytester.runpytest_subprocess("--tpumem", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([f"ERROR: pytest-tpumem: {said}"])
    assert (pytester.path / "base.json").read_bytes() == base and not list(pytester.path.glob("*.jsonl"))
    assert not (pytester.path / "x.json").exists() and not (pytester.path / "r.ledger.svg").exists()


WAITS = """
import os, time
import jax.numpy as jnp

HOLD = []


def test_a():
    HOLD.append(jnp.ones((3_000_000,)))


def test_wait():  # run A waits here until run B has finished
    if os.environ.get("RUN") == "A":
        open("a_waiting", "w").close()
        while not os.path.exists("b_done"):
            time.sleep(0.05)


def test_c():
    pass
"""


def test_two_runs_at_once_never_garble_the_recorder_and_the_first_says_its_record_was_replaced(pytester):
    import os
    import subprocess
    import time

    pytester.makepyfile(test_fr=WAITS)

    def run(name, *args):
        env = {**os.environ, "RUN": name}
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "--tpumem", "-p", "no:randomly", *args],
            cwd=pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    a = run("A")
    deadline = time.monotonic() + 120
    while not (pytester.path / "a_waiting").exists():
        assert time.monotonic() < deadline and a.poll() is None, (
            a.stdout.read() if a.poll() is not None else "A is slow"
        )
        time.sleep(0.05)
    b = run("B", "-k", "test_c")
    b_out = b.communicate(timeout=120)[0]
    (pytester.path / "b_done").touch()
    a_out = a.communicate(timeout=120)[0]
    assert a.returncode == 0 and b.returncode == 0, a_out + b_out
    data = (pytester.path / ".pytest_cache" / "d" / "tpumem" / "ledger.jsonl").read_bytes()
    records = [json.loads(line) for line in data.splitlines()]  # every line whole JSON: no NUL, no mix
    assert [r.get("schema") for r in records].count("pytest-tpumem-ledger") == 1
    assert [r.get("start") for r in records if "start" in r] == ["test_fr.py::test_c"]  # run B's, whole
    assert records[-1]["end"] is True and records[-1]["tests"] == 1
    assert "is now another run's: a run of this project that started after this one put its own there" in a_out
    assert "another run's" not in b_out
    assert [
        p.name for p in (pytester.path / ".pytest_cache" / "d" / "tpumem").iterdir() if p.name.startswith(".")
    ] == []


def test_without_pytests_cache_the_recorder_is_in_the_temporary_directory_one_per_rootdir(
    pytester, monkeypatch, tmp_path
):
    import hashlib

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    pytester.makepyfile(test_killed=KILLED)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == 3
    import os

    where = tmp_path / f"pytest-tpumem-of-{os.getuid()}" / hashlib.sha1(str(pytester.path).encode()).hexdigest()[:12]
    records = _records(where / "ledger.jsonl")
    assert records[-1]["start"] == "test_killed.py::test_dies" and records[-1]["rss"] > 0  # its RSS at its start
    assert (os.stat(where.parent).st_mode & 0o777) == 0o700  # this user's alone
    assert not (pytester.path / ".pytest_cache").exists()


def test_without_pytests_cache_a_crashed_workers_test_is_named_in_the_one_summary(pytester, monkeypatch, tmp_path):
    pytest.importorskip("xdist")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    pytester.makepyfile(test_crash=CRASH)
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "1", "--tpumem-json=r.json"
    )
    _one_account_names_the_crashed_workers_test(result, pytester)


CRASH = """
import os

import jax.numpy as jnp

HOLD = []


def test_before():
    HOLD.append(jnp.ones((3_000_000,)))   # 12 MB left alive after its teardown


def test_exit():
    os._exit(3)


def test_after():
    jnp.ones(10).block_until_ready()
"""


def _one_account_names_the_crashed_workers_test(result, pytester):
    text = result.stdout.str()
    ledger = text[text.index("- tpumem ledger -") :]
    assert "\n[gw" not in ledger  # one account, not a block of each worker's own summary
    result.stdout.fnmatch_lines(
        [
            "*- tpumem ledger -*",
            "2 tests read between by 2 pytest-xdist workers, each after its teardown; *",
            "  gw0: 1 test read, then it crashed",
            "    gw0's flight recorder (*ledger.gw0.jsonl): the last test it began was test_crash.py::test_exit",
            "    after test_crash.py::test_before: cpu:0 12.0MB, cpu:1 0B; programs held *; host RSS *",
            "  gw1: 1 test",
            "1 test left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):",
            "  12.0MB  test_crash.py::test_before [[]gw0]",
            "      made at test_crash.py:9 in test_before: 12.0MB (1 array, e.g. f32[3000000])",
            "      kept by global HOLD of test_crash at [0]: 12.0MB",
            "      not read at the end: gw0 crashed in test_crash.py::test_exit",
        ]
    )
    assert "no test left" not in ledger
    ledger_part = json.loads((pytester.path / "r.json").read_text())["ledger"]  # the JSON report says the same
    named = [t for t, line in ledger_part["tests"].items() if line["left"] >= ledger_part["threshold"]]
    assert named == ["test_crash.py::test_before"] and ledger_part["tests"][named[0]]["worker"] == "gw0"


def test_under_xdist_the_ledger_is_one_summary_naming_a_crashed_workers_test(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_crash=CRASH)
    result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", "-n", "1", "--tpumem-json=r.json")
    _one_account_names_the_crashed_workers_test(result, pytester)


def test_under_xdist_the_planted_leak_is_named_once_with_its_worker_and_the_clean_tests_are_not(planted):
    pytest.importorskip("xdist")
    result = planted.runpytest_subprocess("--tpumem", "-p", "no:randomly", "-n", "2", "--tpumem-json=r.json")
    result.assert_outcomes(passed=5, failed=1)
    text = result.stdout.str()
    ledger = text[text.index("- tpumem ledger -") :]
    assert ledger.count("- tpumem ledger -") == 1 and "\n[gw" not in ledger
    result.stdout.fnmatch_lines(
        [
            "6 tests read between by 2 pytest-xdist workers, each after its teardown; *",
            "  gw0: * tests",
            "  gw1: * tests",
            "1 test left 10.0MB or more of the arrays they made alive after their teardown (--tpumem-residue):",
            "  64.0MB  test_planted.py::test_leaks_into_module_list [[]gw?]",
            "      made at test_planted.py:15 in test_leaks_into_module_list: 64.0MB (1 array, e.g. f32[16000000])",
        ]
    )
    for clean in ("test_clean", "test_compiles_into_registry", "test_uses_big", "test_clean_after"):
        assert f"MB  test_planted.py::{clean} " not in ledger
    report = json.loads((planted.path / "r.json").read_text())["ledger"]
    named = sorted(t for t, line in report["tests"].items() if line["left"] >= report["threshold"])
    assert named == ["test_planted.py::test_leaks_into_module_list"]
    assert ledger.count("'s picture (memory and programs after each test): ") == 2


HOST_PLANT = """
KEEP = []
JKEEP = []


def remember(x):
    KEEP.append(x)
"""

HOST_SUITE = """
import jax.numpy as jnp
import numpy as np
import pytest

import plant


def test_starts_jax():
    assert float(jnp.ones(3).sum()) == 3.0


def test_keeps_numpy_in_a_helper_module():
    for _ in range(3):
        plant.remember(np.ones(5_000_000))  # 40 MB each, kept by the helper's list


def test_clean_twin_makes_as_much_and_drops_it():
    arrays = [np.ones(5_000_000) for _ in range(3)]
    assert sum(float(a[0]) for a in arrays) == 3.0


@pytest.fixture(scope="module")
def table():
    return np.ones(15_000_000)  # 120 MB: the fixture's, not the test's


def test_uses_the_fixture(table):
    assert table.shape == (15_000_000,)


def test_keeps_jax_arrays_in_a_helper_module():
    plant.JKEEP.append(jnp.ones((4_000_000,)))  # 16 MB on the CPU device
"""


def test_a_test_that_grew_host_memory_is_named_with_its_arrays_and_what_keeps_them(pytester):
    """Planted: numpy arrays kept by a helper module's list (the test's module and fixtures hold
    none of them), and jax arrays kept the same way; its clean twin makes as much and drops it, a
    module fixture's arrays are the fixture's; the backend's start is told apart."""
    pytester.makepyfile(plant=HOST_PLANT, test_host=HOST_SUITE)
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", "--tpumem-host-residue=60MB", f"--tpumem-json={report}"
    )
    result.assert_outcomes(passed=5)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "  jax's backend started in test 1 of 5: host memory +* in it (the runtime, its compiler and plugins "
            "load once a process; no test is named for it)",
            "1 test grew the process's host memory (RSS, after it less before it) by 60.0MB or more "
            "(--tpumem-host-residue):",
            "  +1*MB  test_host.py::test_keeps_numpy_in_a_helper_module",
            "      numpy arrays alive (new since the first test started: the tests before it may have made some): "
            "120.0MB (3 arrays, e.g. f64[5000000]), kept by global KEEP of plant at [0] and 2 more",
        ]
    )
    assert re.search(r"^  \+1[12]\d\.\dMB  test_host.py::test_keeps_numpy_in_a_helper_module$", text, re.M), text
    # the jax arrays a helper module keeps are named with their keeper too
    result.stdout.fnmatch_lines(["  16.0MB  test_host.py::test_keeps_jax_arrays_in_a_helper_module", "      made at *"])
    assert "      kept by global JKEEP of plant at [0]: 16.0MB" in text
    for clean in ("test_clean_twin_makes_as_much_and_drops_it", "test_uses_the_fixture", "test_starts_jax"):
        assert f"MB  test_host.py::{clean}" not in text
    tests = json.loads(report.read_text())["ledger"]["tests"]
    named = tests["test_host.py::test_keeps_numpy_in_a_helper_module"]["host"]
    assert named["numpy"] == [
        {
            "bytes": 120 * MB,
            "arrays": 3,
            "shape": "f64[5000000]",
            "kept_by": "global KEEP of plant at [0] and 2 more",
            "site": None,
        }
    ]
    assert named["grew"] >= 120 * MB and named["since"] == "(before the first test)"
    fixture_user = tests["test_host.py::test_uses_the_fixture"]["host"]
    assert fixture_user["fixtures_grew"] >= 120 * MB and fixture_user["grew"] < 60 * MB
    assert tests["test_host.py::test_starts_jax"]["host"]["backend_started"] is True
    assert tests["test_host.py::test_keeps_jax_arrays_in_a_helper_module"]["host"]["jax_arrays"] == 16 * MB


def test_under_tracemalloc_a_named_tests_numpy_arrays_have_their_line(pytester):
    pytester.makepyfile(plant=HOST_PLANT, test_host=HOST_SUITE)
    # started as a conftest may start it (as -X tracemalloc=4 would, but after jax's imports, which it
    # would trace for ~20 s): 4 frames reach down to the test
    pytester.makeconftest("import tracemalloc\n\ntracemalloc.start(4)\n")
    args = ("--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", "--tpumem-host-residue=60MB", "-k", "numpy or jax")
    result = pytester.runpytest_subprocess(*args)
    source = (pytester.path / "test_host.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "plant.remember(" in text)
    result.stdout.fnmatch_lines(
        [
            f"      numpy arrays alive (new since *): 120.0MB (3 arrays, e.g. f64[[]5000000]), made at test_host.py:{line}, "
            "kept by global KEEP of plant at [[]0] and 2 more"
        ]
    )


def test_a_zero_host_residue_names_none_and_says_nothing(pytester):
    pytester.makepyfile(plant=HOST_PLANT, test_host=HOST_SUITE)
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", "--tpumem-host-residue=0"
    )
    result.assert_outcomes(passed=5)
    assert "--tpumem-host-residue" not in result.stdout.str()


def test_under_xdist_the_test_that_grew_host_memory_is_named_once_with_its_worker(pytester):
    pytester.makepyfile(plant=HOST_PLANT, test_host=HOST_SUITE)
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "-n", "2", "--tpumem-host-residue=60MB", f"--tpumem-json={report}"
    )
    result.assert_outcomes(passed=5)
    text = result.stdout.str()
    named = re.findall(r"^  \+[\d.]+MB  (test_host.py::\S+) \[(gw\d)\]$", text, re.M)
    assert [test for test, _ in named] == ["test_host.py::test_keeps_numpy_in_a_helper_module"], text
    assert "kept by global KEEP of plant at [0] and 2 more" in text
    assert re.search(
        r"^  the workers together: at most [\d.]+[MG]B \(each worker's most after a test, added\)", text, re.M
    )
    tests = json.loads(report.read_text())["ledger"]["tests"]
    assert tests["test_host.py::test_keeps_numpy_in_a_helper_module"]["worker"] == named[0][1]
    assert len(tests) == 5  # every test, those read before their worker's backend started too


CACHED = """
import functools

import numpy as np
import pytest


@functools.lru_cache(maxsize=None)
def load(name):
    return np.ones(5_000_000)  # 40 MB a dataset, kept by the cache


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_loads(name):
    assert load(name)[0] == 1.0


def test_clean():
    assert np.ones(5_000_000).sum() == 5_000_000
"""


def test_arrays_many_tests_kept_in_one_place_each_under_the_threshold_are_named_by_their_keeper(pytester):
    """Planted: a cache keeps a 40 MB dataset a test, under the 60 MB threshold; at the end, one
    look names the cache with the 120 MB it holds. The clean twin: a threshold over what it holds."""
    pytester.makepyfile(test_cached=CACHED)
    result = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", "--tpumem-host-residue=60MB"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "no test grew the process's host memory by 60.0MB or more (--tpumem-host-residue)",
            "numpy arrays made during the run and alive at the end: 120.0MB (3 arrays, e.g. f64[[]5000000]), "
            "kept by the functools cache of load (test_cached)",
        ]
    )
    quiet = pytester.runpytest_subprocess(
        "--tpumem", "-p", "no:randomly", "--tpumem-ledger=off", "--tpumem-host-residue=121MB"
    )
    assert "alive at the end: 120.0MB" not in quiet.stdout.str()
