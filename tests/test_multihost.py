"""Multi-host as a CI runs it, with two real JAX CPU processes on localhost joined by
jax.distributed: each process writes its own report (r.process-0-of-2.json, r.process-1-of-2.json),
``python -m pytest_tpumem merge`` joins them, ``compare`` gates the merged reports of two runs.

Each run starts two ``pytest --tpumem`` processes at once; process 0 hosts the coordinator on a free
port. A run takes a few seconds (mostly importing jax twice)."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

# The suite's conftest: joins jax.distributed before any test starts the backend, and records the
# local devices the process saw (as the report labels them, platform:id) to check the report with.
CONFTEST = """
import json, os
import jax

def pytest_configure(config):
    jax.distributed.initialize(
        os.environ["TPUMEM_COORDINATOR"],
        num_processes=2,
        process_id=int(os.environ["PROCESS_ID"]),
        initialization_timeout=30,  # the other process never came: fail, do not wait 5 minutes
        shutdown_timeout_seconds=30,
    )

def pytest_unconfigure(config):
    seen = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "devices": [f"{d.platform}:{d.id}" for d in jax.local_devices()],
    }
    with open(f"seen-{os.environ['RUN']}-{os.environ['PROCESS_ID']}.json", "w") as f:
        json.dump(seen, f)
    jax.distributed.shutdown()  # both processes leave together (jax's atexit would too)
"""

# test_scaled holds TPUMEM_N float32s on the process's first local device, test_fixed TPUMEM_FIXED
# (FIXED unless a run says otherwise) on its second:
# each peak is exactly what the test holds, on the device that holds it. Copied there from the host:
# no program runs and no other array is made (jnp.ones would make its fill value, a 4-byte device
# scalar, that the sampler may see beside the result; jnp.ones(..., device=d) fills on the default
# device first and copies, a transient on the first device).
FIXED = 500_000
TESTS = """
import os
import jax, numpy as np, pytest

N = int(os.environ["TPUMEM_N"])
FIXED = int(os.environ["TPUMEM_FIXED"])

@pytest.mark.max_hbm("1GB")
def test_scaled():
    x = jax.device_put(np.ones((N,), np.float32), jax.local_devices()[0])
    x.block_until_ready()

@pytest.mark.max_hbm("1GB")
def test_fixed():
    y = jax.device_put(np.ones((FIXED,), np.float32), jax.local_devices()[1])
    y.block_until_ready()
"""
SCALED, FIXED_ID = "test_mh.py::test_scaled", "test_mh.py::test_fixed"
N = 1_000_000
RUN_TIMEOUT_S = 50  # both processes of one run, from start to exit
# Process 0 could not take the port (another took it meanwhile): jax logs the first, then raises
# the second or, inside pytest_configure, may crash outright.
BIND_FAILED = ("Failed to add port to server", "Failed to start RPC server")


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def child_env(port, process_id, n, run, fixed=FIXED):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER")}
    env.update(
        TPUMEM_COORDINATOR=f"localhost:{port}",
        PROCESS_ID=str(process_id),
        TPUMEM_N=str(n),
        TPUMEM_FIXED=str(fixed),
        RUN=run,
        JAX_PLATFORMS="cpu",
        # Kept (tests/conftest.py sets the same, and the processes would inherit it), set here so the
        # test does not depend on it: 2 CPU devices per process, as a host with several chips has,
        # so the report keys peaks per local device and the merge joins 2 x 2 devices.
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    return env


def run_processes(pytester, n, report, *args, tests="test_mh.py", fixed=FIXED):
    """Both processes of one jax.distributed run writing ``report``; [(pid, output)] per process.
    Fails, with both outputs, where a process fails or the run outlasts RUN_TIMEOUT_S; kills both."""
    run = report.split(".")[0]
    for attempt in range(3):
        port = free_port()
        procs, logs = [], []
        try:
            for i in range(2):
                logs.append(open(pytester.path / f"{run}-{i}.log", "w+"))
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "pytest",
                            "--tpumem",
                            "--tpumem-json",
                            report,
                            *args,
                            "-p",
                            "no:cacheprovider",
                            tests,
                        ],
                        cwd=pytester.path,
                        env=child_env(port, i, n, run, fixed),
                        stdout=logs[i],
                        stderr=subprocess.STDOUT,
                    )
                )
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while any(p.poll() is None for p in procs):
                if time.monotonic() > deadline or any(p.returncode for p in procs):
                    break  # timed out, or one failed: the other would wait on it
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            outputs = []
            for log in logs:
                log.seek(0)
                outputs.append(log.read())
                log.close()
        shown = "\n".join(
            f"--- process {i} (exit {p.returncode}) ---\n{out}" for i, (p, out) in enumerate(zip(procs, outputs))
        )
        if any(m in out for out in outputs for m in BIND_FAILED) and attempt < 2:
            continue  # the free port was taken before process 0 bound it: another port
        if any(p.returncode != 0 for p in procs):
            pytest.fail(
                f"the processes of run {run!r} did not both pass (killed after {RUN_TIMEOUT_S}s or on a failure):\n{shown}"
            )
        return [(p.pid, out) for p, out in zip(procs, outputs)]
    raise AssertionError("unreachable")


def seen(pytester, run, i):
    return json.loads((pytester.path / f"seen-{run}-{i}.json").read_text())


def cli(pytester, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest_tpumem", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        timeout=60,
    )


def merged_labels(devices_0, devices_1):
    """The device labels of a merged report: process 1's label is prefixed where process 0 has it too."""
    return devices_0 + [d if d not in devices_0 else f"p1:{d}" for d in devices_1]


def run_and_merge(pytester, n, report, merged, fixed=FIXED):
    run_processes(pytester, n, report, fixed=fixed)
    root = report.split(".")[0]
    done = cli(pytester, "merge", f"{root}.process-0-of-2.json", f"{root}.process-1-of-2.json", "-o", merged)
    assert done.returncode == 0, done.stderr
    return json.loads((pytester.path / merged).read_text())


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mh=TESTS)
    return pytester


def test_each_process_writes_its_own_report_and_merge_joins_them(project):
    pytester = project
    (pid_0, out_0), (pid_1, out_1) = run_processes(pytester, N, "r.json", "--tpumem-save", "saved/base.json")

    # Each process its own file, named with its index; no r.json that one process's file overwrote.
    assert sorted(p.name for p in pytester.path.glob("r*.json")) == ["r.process-0-of-2.json", "r.process-1-of-2.json"]
    assert f"report written to {pytester.path / 'r.process-0-of-2.json'}" in out_0
    assert f"report written to {pytester.path / 'r.process-1-of-2.json'}" in out_1

    devices = []
    for i, pid in ((0, pid_0), (1, pid_1)):
        truth = seen(pytester, "r", i)
        assert (truth["process_index"], truth["process_count"]) == (i, 2)
        assert len(truth["devices"]) == 2  # XLA_FLAGS: 2 local devices
        first, second = truth["devices"]
        devices.append(truth["devices"])
        report = json.loads((pytester.path / f"r.process-{i}-of-2.json").read_text())
        context = report["context"]
        assert context["process_index"] == i and context["process_count"] == 2, context
        assert context["pid"] == pid and context["platform"] == "cpu" and "merged_from" not in context
        assert context["devices"] == truth["devices"] and context["device_count"] == 2  # its own, not the global 4
        assert "processes" not in report
        assert set(report["tests"]) == {SCALED, FIXED_ID}
        scaled, fixed = report["tests"][SCALED], report["tests"][FIXED_ID]
        assert scaled["peaks"] == {first: 4 * N, second: 0} and scaled["peak"] == 4 * N, scaled["peaks"]
        assert fixed["peaks"] == {first: 0, second: 4 * FIXED} and fixed["peak"] == 4 * FIXED, fixed["peaks"]
        for entry in (scaled, fixed):
            assert entry["verdict"] == "ok" and entry["outcome"] == "passed" and entry["budget"] == 10**9
        assert report["summary"] == {"measured": 2, "failed": 0}
        saved = json.loads((pytester.path / "saved" / f"base.process-{i}-of-2.json").read_text())
        assert saved == report  # --tpumem-save: the same report, named the same way
    assert sorted(p.name for p in (pytester.path / "saved").iterdir()) == [
        "base.process-0-of-2.json",
        "base.process-1-of-2.json",
    ]
    assert not set(devices[0]) & set(devices[1]), devices  # jax numbers devices across processes

    done = cli(pytester, "merge", "r.process-0-of-2.json", "r.process-1-of-2.json", "-o", "merged.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "wrote merged.json: 2 tests from 2 processes"
    merged = json.loads((pytester.path / "merged.json").read_text())

    assert sorted(merged["tests"]) == sorted([FIXED_ID, SCALED])  # each test once
    assert merged["summary"] == {"measured": 2, "failed": 0}
    labels = merged_labels(*devices)
    (a0, b0), (a1, b1) = labels[:2], labels[2:]
    scaled, fixed = merged["tests"][SCALED], merged["tests"][FIXED_ID]
    assert scaled["peaks"] == {a0: 4 * N, b0: 0, a1: 4 * N, b1: 0} and scaled["peak"] == 4 * N
    assert fixed["peaks"] == {a0: 0, b0: 4 * FIXED, a1: 0, b1: 4 * FIXED} and fixed["peak"] == 4 * FIXED
    for entry in (scaled, fixed):
        assert entry["verdict"] == "ok" and entry["outcome"] == "passed"
        assert sorted(c["process_index"] for c in entry["checks"]) == [0, 1]  # one check from each
    context = merged["context"]
    assert context["merged_from"] == 2 and context["process_index"] is None and context["process_count"] == 2
    assert context["devices"] == devices[0] + devices[1] and context["device_count"] == 4
    assert [(p["process_index"], p["process_count"], p["pid"]) for p in merged["processes"]] == [
        (0, 2, pid_0),
        (1, 2, pid_1),
    ]

    shown = cli(pytester, "show", "merged.json")
    assert shown.returncode == 0, shown.stderr
    assert "4 devices" in shown.stdout and "merged from 2 processes" in shown.stdout


def test_compare_of_merged_reports_fails_a_30_percent_peak_rise_and_passes_2_percent(project):
    pytester = project
    run_and_merge(pytester, N, "r.json", "merged.json")
    # one run later: test_scaled holds 30% more, test_fixed 2% more
    later = run_and_merge(pytester, N * 130 // 100, "r2.json", "merged2.json", fixed=FIXED * 102 // 100)
    assert later["tests"][SCALED]["peak"] == 4 * N * 130 // 100
    assert later["tests"][FIXED_ID]["peak"] == 4 * FIXED * 102 // 100
    done = cli(pytester, "compare", "merged.json", "merged2.json", "--fail", "peak:10%")
    assert done.returncode == 1, done.stdout + done.stderr
    regressed = [line for line in done.stdout.splitlines() if "REGRESSED" in line]
    assert len(regressed) == 1 and regressed[0].endswith(SCALED), done.stdout
    assert regressed[0].split()[:4] == ["peak", "4.0MB", "5.2MB", "+30.0%"], regressed[0]
    (slightly,) = [line for line in done.stdout.splitlines() if line.endswith(FIXED_ID)]
    assert slightly.split()[:4] == ["peak", "2.0MB", "2.0MB", "+2.0%"], slightly


def test_a_process_that_measured_nothing_still_names_its_report_with_its_index(project):
    """A host whose share of the suite has no device test (split across hosts, -k, all skipped)
    never starts jax's backend, but it has joined jax.distributed: its report is still its own,
    r.process-1-of-2.json, not an r.json that the other process's report overwrites or that a CI
    collecting r.process-*.json misses. jax knows the index without a backend
    (jax._src.distributed.global_state.process_id / num_processes)."""
    pytester = project
    pytester.makepyfile(test_plain="def test_no_device():\n    assert 1 + 1 == 2\n")
    run_processes(pytester, N, "r.json", tests="test_plain.py")
    assert sorted(p.name for p in pytester.path.glob("r*.json")) == ["r.process-0-of-2.json", "r.process-1-of-2.json"]
    for i in range(2):
        report = json.loads((pytester.path / f"r.process-{i}-of-2.json").read_text())
        assert report["tests"] == {}
        assert (report["context"]["process_index"], report["context"]["process_count"]) == (i, 2)
