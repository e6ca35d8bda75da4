"""The accelerator validation in one command: every check of docs/validation/README.md, each step
under its own timeout, all of them inside one time budget, one results file at the end.

    bash docs/validation/run.sh                       # what a lent GPU machine runs (OUT: where to write)
    python3 docs/validation/validate.py --out DIR     # the same, without the wrapper
    python3 docs/validation/validate.py --record-cpu  # on a CPU machine: rewrite cpu_expected.json

It needs only what the GPU machine has: python3 with jax, pytest and pytest-xdist (optax for the
examples). The plugin runs from this checkout (``PYTHONPATH``; ``PYTEST_PLUGINS=pytest_tpumem.plugin``
where no installed entry point loads it). A failing, hanging or crashing step is recorded and the next one
runs. The figures come from the plugin's own JSON report (``--tpumem-json``), the outcomes from
pytest's JUnit XML; each figure is written next to what the same test gave on the CPU
(cpu_expected.json, made by ``--record-cpu``). The steps that need a GPU are recorded as skipped,
with the reason, on a machine without one.

Results: OUT/validation.json and OUT/validation.md; the JSON reports and full logs under OUT/.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CPU_EXPECTED = HERE / "cpu_expected.json"
SCHEMA = "pytest-tpumem-validation"
TAIL = 4000  # characters of stdout kept in the results per step (stderr: half of it)
LOG_LIMIT = 2_000_000  # bytes of a step's log kept under OUT/logs
MB = 10**6
MEMORY_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "TF_GPU_ALLOCATOR",
)
PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rA"]

PROBE = r"""
import importlib.metadata as md, json, os, platform, sys
out = {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform()}
versions = {}
for name in ("jax", "jaxlib", "pytest", "pytest-xdist", "optax", "flax", "libtpu", "numpy",
             "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt"):
    try:
        versions[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
out["versions"] = versions
try:
    import pytest_tpumem
    out["pytest_tpumem"] = pytest_tpumem.__file__
except Exception as e:
    out["pytest_tpumem"] = f"not importable: {e!r}"
out["plugin_entry_point"] = [e.value for e in md.entry_points(group="pytest11") if e.value.startswith("pytest_tpumem")]
import jax
out["default_backend"] = jax.default_backend()
devices = jax.devices()
out["devices"] = [f"{d.platform}:{d.id} {d.device_kind}" for d in devices]
stats = devices[0].memory_stats()
out["memory_stats"] = dict(stats) if stats else None
out["bytes_limit"] = (stats or {}).get("bytes_limit")
print("PROBE " + json.dumps(out))
"""

OOM_TEST = '''"""Written by docs/validation/validate.py: an allocation over the device's bytes_limit, then tests
that each allocate a known size, to check the plugin says out-of-memory and measures the tests after it."""
import jax, jax.numpy as jnp, pytest


@pytest.mark.max_hbm("2GB")
def test_0_before_50MB():
    jnp.ones((12_500_000,), jnp.float32).block_until_ready()


@pytest.mark.max_hbm("2GB")
def test_1_over_the_limit():
    limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
    if not limit:
        pytest.skip("no bytes_limit on this backend")
    # twice the limit, in rows of 2 MiB (no dimension near 2**31): RESOURCE_EXHAUSTED
    jnp.ones((limit // 2**20, 2**19), jnp.float32).block_until_ready()


@pytest.mark.max_hbm("2GB")
def test_2_after_100MB():
    jnp.ones((25_000_000,), jnp.float32).block_until_ready()


@pytest.mark.max_hbm("2GB")
def test_3_after_200MB():
    jnp.ones((50_000_000,), jnp.float32).block_until_ready()


@pytest.mark.max_hbm("2GB")
def test_4_after_1GB():
    jnp.ones((250_000_000,), jnp.float32).block_until_ready()
'''
OOM_SIZES = {"test_2_after_100MB": 100 * MB, "test_3_after_200MB": 200 * MB, "test_4_after_1GB": 1000 * MB}
OOM_TOLERANCE = (0.01, 2 * MB)  # within 1% or 2 MB: the allocator's rounding, a program's constants

SHARE_TEST = '''"""Written by docs/validation/validate.py: each pytest-xdist worker records its environment and
its device's memory_stats after allocating 400 MB on it."""
import json, os
import jax, jax.numpy as jnp

NAMES = __NAMES__


def test_worker_records_its_share(worker_id):
    x = jnp.ones((100_000_000,), jnp.float32)  # 400 MB
    assert float(x[:10].sum()) == 10.0
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    record = {
        "worker": worker_id,
        "pid": os.getpid(),
        "env": {name: os.environ.get(name) for name in NAMES},
        "devices": [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()],
        "memory_stats": {k: v for k, v in stats.items() if k in ("bytes_limit", "bytes_in_use", "peak_bytes_in_use")},
    }
    with open(os.path.join(os.environ["VALIDATE_RECORDS"], worker_id + ".json"), "w") as fh:
        json.dump(record, fh)
'''.replace("__NAMES__", repr(MEMORY_ENV))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def mb(n: Any) -> str:
    if n is None:
        return "-"
    if not isinstance(n, int | float):
        return str(n)
    return f"{n / MB:.1f}MB"


def tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


class Run:
    """One validation: the machine, the steps' results, and where they are written."""

    def __init__(self, out: Path, budget: float, force: bool, python: str):
        self.out = out
        self.started = time.monotonic()
        self.deadline = self.started + budget
        self.budget = budget
        self.force = force
        self.python = python
        self.results: dict[str, Any] = {
            "schema": SCHEMA,
            "version": 1,
            "started": now(),
            "finished": None,
            "wall_s": None,
            "budget_s": budget,
            "root": str(ROOT),
            "out": str(out),
            "forced": force,
            "machine": {},
            "cpu_expected": None,
            "steps": [],
        }
        self.expected = self._load_expected()
        self.env = self._env()
        self.probe: dict[str, Any] = {}
        self.last_stdout = ""
        self.scratch = Path(tempfile.mkdtemp(prefix="tpumem-validate-"))

    def _load_expected(self) -> dict[str, Any]:
        try:
            expected: dict[str, Any] = json.loads(CPU_EXPECTED.read_text())
        except (OSError, ValueError) as e:
            self.results["cpu_expected"] = {"file": str(CPU_EXPECTED), "error": repr(e)}
            return {}
        self.results["cpu_expected"] = {"file": str(CPU_EXPECTED.relative_to(ROOT)), **expected.get("recorded", {})}
        steps: dict[str, Any] = expected.get("steps", {})
        return steps

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        installed = [
            e.value for e in importlib.metadata.entry_points(group="pytest11") if e.value.startswith("pytest_tpumem")
        ]
        if not installed:
            # Not installed: load it from the checkout through PYTEST_PLUGINS, which pytester's runs
            # inherit (pytester deletes PYTEST_ADDOPTS, so "-p pytest_tpumem.plugin" there would not
            # reach them). Where an entry point loads it, this would register it a second time.
            env["PYTEST_PLUGINS"] = ",".join(filter(None, [env.get("PYTEST_PLUGINS", ""), "pytest_tpumem.plugin"]))
        self.results["plugin"] = {
            "loaded_by": "entry point (installed)" if installed else "PYTEST_PLUGINS=pytest_tpumem.plugin",
            "PYTHONPATH": env["PYTHONPATH"],
            "PYTEST_PLUGINS": env.get("PYTEST_PLUGINS"),
        }
        return env

    def left(self) -> float:
        return self.deadline - time.monotonic()

    # -- running ---------------------------------------------------------------------------------

    def command(
        self, args: list[str], timeout: float, cwd: Path = ROOT, env: dict[str, str] | None = None, log: str = ""
    ) -> dict[str, Any]:
        """Run ``args`` in a session of its own; kill the whole group at the timeout."""
        timeout = max(1.0, min(timeout, self.left() - 5))
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0 = time.monotonic()
            try:
                proc = subprocess.Popen(
                    args, cwd=cwd, env=env or self.env, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as e:
                return {"rc": None, "wall_s": 0.0, "timed_out": False, "stdout": "", "stderr": repr(e)}
            timed_out = False
            try:
                rc: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(proc.pid, sig)
                    except ProcessLookupError:
                        break
                    try:
                        proc.wait(timeout=10)
                        break
                    except subprocess.TimeoutExpired:
                        continue
                rc = proc.returncode
            wall = time.monotonic() - t0
            texts = []
            for fh in (out, err):
                fh.seek(0)
                texts.append(fh.read().decode("utf-8", "replace"))
        if log:
            logs = self.out / "logs"
            logs.mkdir(exist_ok=True)
            body = (
                f"$ {' '.join(args)}\n(cwd {cwd}, rc {rc}, {wall:.1f}s)\n--- stdout\n{texts[0]}\n--- stderr\n{texts[1]}"
            )
            (logs / f"{log}.log").write_text(tail(body, LOG_LIMIT))
        return {
            "rc": rc,
            "wall_s": round(wall, 1),
            "timed_out": timed_out,
            "timeout_s": round(timeout),
            "stdout": texts[0],
            "stderr": texts[1],
        }

    def step(self, name: str, title: str, body: Callable[[dict[str, Any]], None], min_s: float = 20) -> None:
        """Run one step; whatever it raises is recorded, and the next step runs."""
        record: dict[str, Any] = {"name": name, "title": title, "status": "ran", "checks": []}
        t0 = time.monotonic()
        if self.left() < min_s:
            record.update(status="skipped", reason=f"out of time: {self.left():.0f}s of the budget left")
        else:
            try:
                body(record)
            except Skip as e:
                record.update(status="skipped", reason=str(e))
            except Exception as e:  # a bug of this script or a surprise of the machine: recorded, next step
                import traceback

                record.update(status="error", reason=repr(e), traceback=tail(traceback.format_exc(), 3000))
        record["wall_s"] = round(time.monotonic() - t0, 1)
        if record["status"] == "ran":
            checks = [c["ok"] for c in record["checks"] if c["ok"] is not None]
            record["expect_met"] = all(checks) if checks else None
        self.results["steps"].append(record)
        self.write()
        print(f"validate: {name}: {record['status']} {_counts_text(record)} ({record['wall_s']}s)", flush=True)

    def pytest(
        self,
        record: dict[str, Any],
        args: list[str],
        timeout: float,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
        report: bool = False,
    ) -> dict[str, Any] | None:
        """Run pytest with a JUnit XML (and the plugin's JSON report); fill ``record``; return the report."""
        name = record["name"]
        junit = self.scratch / f"{name}.xml"
        command = [self.python, *PYTEST, f"--junitxml={junit}", *args]
        json_path = self.out / "reports" / f"{name}.json"
        if report:
            json_path.parent.mkdir(exist_ok=True)
            command.append(f"--tpumem-json={json_path}")
        done = self.command(command, timeout, cwd=cwd, env=env, log=name)
        self._fill(record, command, cwd, done)
        record["tests"] = junit_tests(junit)
        record["counts"] = counts(record["tests"])
        if not report:
            return None
        try:
            loaded: dict[str, Any] = json.loads(json_path.read_text())
        except (OSError, ValueError) as e:
            record["report_error"] = repr(e)
            return None
        record["report"] = str(json_path.relative_to(self.out))
        record["context"] = {
            k: loaded.get("context", {}).get(k)
            for k in ("platform", "device_kind", "devices", "bytes_limit", "stand_in")
        }
        record["figures"] = self._figures(name, loaded)
        return loaded

    def _fill(self, record: dict[str, Any], command: list[str], cwd: Path, done: dict[str, Any]) -> None:
        record["command"] = " ".join(command)
        record["cwd"] = str(cwd)
        for key in ("rc", "timed_out", "timeout_s"):
            record[key] = done.get(key)
        record["run_s"] = done["wall_s"]
        record["stdout_tail"] = tail(done["stdout"], TAIL)
        said = [x for x in done["stdout"].splitlines() if x.startswith("tpumem: ") and "report written" not in x]
        if said:
            record["tpumem_lines"] = [x[:400] for x in said[:20]]
        self.last_stdout = done["stdout"]
        record["stderr_tail"] = tail(done["stderr"], TAIL // 2)
        if done.get("timed_out"):
            record["checks"].append(check(f"finished within {done['timeout_s']}s", False, "killed at the timeout"))

    def _figures(self, step: str, report: dict[str, Any]) -> dict[str, Any]:
        """Each test's figures, each beside its CPU twin from cpu_expected.json."""
        cpu = self.expected.get(step, {}).get("figures", {})
        figures = {}
        for test, entry in sorted(report.get("tests", {}).items()):
            mine = entry_figures(entry)
            twin = cpu.get(test, {})
            figures[test] = {key: {"value": value, "cpu": twin.get(key)} for key, value in mine.items()}
        return figures

    # -- results ---------------------------------------------------------------------------------

    def write(self) -> None:
        self.results["finished"] = now()
        self.results["wall_s"] = round(time.monotonic() - self.started, 1)
        steps = self.results["steps"]
        self.results["summary"] = {
            "steps": len(steps),
            "ran": sum(s["status"] == "ran" for s in steps),
            "skipped": sum(s["status"] == "skipped" for s in steps),
            "errors": sum(s["status"] == "error" for s in steps),
            "expectations_met": sum(s.get("expect_met") is True for s in steps),
            "expectations_missed": [s["name"] for s in steps if s.get("expect_met") is False],
        }
        (self.out / "validation.json").write_text(json.dumps(self.results, indent=1, default=str) + "\n")
        (self.out / "validation.md").write_text(markdown(self.results))


class Skip(Exception):
    """A step that cannot run here; the message is the reason."""


def check(what: str, ok: bool | None, detail: Any = None) -> dict[str, Any]:
    return {"check": what, "ok": ok, "detail": detail}


def junit_tests(path: Path) -> list[dict[str, Any]]:
    """Every test case of a JUnit XML: its id, outcome and message (bounded)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    tests = []
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        nodeid = f"{classname.replace('.', '/')}.py::{case.get('name')}" if classname else str(case.get("name"))
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "") + (
                    "\n" + child.text if child.text and outcome != "skipped" else ""
                )
                break
        tests.append({"id": nodeid, "outcome": outcome, "message": message.strip()[:1500], "time": case.get("time")})
    return tests


def counts(tests: list[dict[str, Any]]) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for t in tests:
        out[t["outcome"]] += 1
    return out


def _counts_text(record: dict[str, Any]) -> str:
    c = record.get("counts")
    return "" if not c else ", ".join(f"{n} {k}" for k, n in c.items() if n)


def label(series: str) -> str:
    """A series name with its device made platform-free: ``cpu:0 live arrays`` -> ``dev:0 live arrays``."""
    head, _, rest = series.partition(" ")
    platform, colon, index = head.partition(":")
    if colon and index.isdigit() and platform in ("cpu", "gpu", "tpu", "cuda", "rocm"):
        return f"dev:{index} {rest}"
    return series


def entry_figures(entry: dict[str, Any]) -> dict[str, Any]:
    """The figures the plugin prints for one test, from its report entry."""
    figures: dict[str, Any] = {
        key: entry.get(key) for key in ("outcome", "verdict", "peak", "budget", "witness", "growth", "threshold")
    }
    figures["growth_source"] = label(entry.get("growth_source") or "") or None
    for record in entry.get("checks", []):
        if record.get("check") == "leak":
            for name, series in sorted((record.get("series") or {}).items()):
                figures[f"growth {label(name)}"] = series.get("growth")
        if record.get("check") == "oom":
            figures["oom_error"] = (record.get("error") or "")[:300]
    return figures


# -- the steps --------------------------------------------------------------------------------------


def header(run: Run, record: dict[str, Any]) -> None:
    machine: dict[str, Any] = {"hostname": os.uname().nodename, "cpus": os.cpu_count()}
    if shutil.which("nvidia-smi"):
        for key, args in (
            ("nvidia_smi_L", ["nvidia-smi", "-L"]),
            ("nvidia_smi_query", ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"]),
        ):
            done = run.command(args, 30)
            machine[key] = (done["stdout"] or done["stderr"]).strip()
    else:
        machine["nvidia_smi"] = "not found"
    machine["env"] = {name: os.environ.get(name) for name in MEMORY_ENV if name in os.environ}
    done = run.command([run.python, "-c", PROBE], 120, log="probe")
    line = next((x for x in done["stdout"].splitlines() if x.startswith("PROBE ")), None)
    if line is None:
        record["checks"].append(check("jax starts and reports its devices", False, tail(done["stderr"], 2000)))
    else:
        run.probe = json.loads(line[6:])
        machine.update(run.probe)
        record["checks"].append(check("jax starts and reports its devices", True, run.probe["devices"]))
        here = str(ROOT / "pytest_tpumem")
        record["checks"].append(
            check("pytest_tpumem is imported from this checkout", run.probe["pytest_tpumem"].startswith(here))
        )
    machine["probe_s"] = done["wall_s"]
    run.results["machine"] = machine


def backend(run: Run) -> str:
    return str(run.probe.get("default_backend", "unknown"))


def outcome_checks(record: dict[str, Any], want: Callable[[dict[str, Any]], str | None]) -> None:
    """One check per test case: its outcome against what ``want`` says it must be (None: any)."""
    if not record.get("tests"):
        record["checks"].append(check("pytest ran and wrote its JUnit XML", False, f"rc {record.get('rc')}"))
    for t in record.get("tests", []):
        must = want(t)
        if must is not None:
            record["checks"].append(check(f"{t['id']} {must}", t["outcome"] == must, t["outcome"]))


def gpu_tests(run: Run, record: dict[str, Any]) -> None:
    run.pytest(record, ["-v", "tests/test_gpu.py"], 180)
    on_device = backend(run) in ("gpu", "tpu")
    outcome_checks(record, lambda t: "passed" if on_device else "skipped")
    if not on_device:
        record["note"] = f"the default backend is {backend(run)}: test_gpu.py skips every test (its reason above)"


def gpu_tests_interpreter(run: Run, record: dict[str, Any], first: dict[str, Any]) -> None:
    """test_gpu.py's failures again, each pytester run in a new interpreter rather than a fork."""
    failed = [t["id"] for t in first.get("tests", []) if t["outcome"] in ("failed", "error")]
    if first.get("status") != "ran" or not (failed or first.get("timed_out")):
        raise Skip("test_gpu.py had no failure to run again")
    env = dict(run.env, TPUMEM_TESTS_INTERPRETER="1")
    run.pytest(record, ["-v", *(failed or ["tests/test_gpu.py"])], 100, env=env)
    record["note"] = "TPUMEM_TESTS_INTERPRETER=1: pytester starts an interpreter for each run instead of a fork"
    outcome_checks(record, lambda t: "passed")


def fake_device(run: Run, record: dict[str, Any], platform: str | None) -> None:
    env = dict(run.env)
    if platform:
        env["JAX_PLATFORMS"] = platform
        record["note"] = f"JAX_PLATFORMS={platform}: the fake wraps the CPU devices, as on the CPU machine"
    elif backend(run) == "cpu":
        raise Skip("the default backend is the CPU: the same run as the step above")
    else:
        record["note"] = (
            f"the fake wraps this machine's {backend(run)} devices; the tests expect the CPU's labels "
            "(cpu:0, cpu:1, 'backend cpu'), so failures here say the tests assume CPU devices"
        )
    run.pytest(record, ["-v", "tests/test_fake_device.py"], 120, env=env)
    outcome_checks(record, lambda t: "passed" if platform else None)


def examples(run: Run, record: dict[str, Any]) -> None:
    # Without libtpu (a GPU machine), the v5e target's test skips rather than fails.
    run.pytest(record, ["-v", "--tpumem", "--tpumem-no-libtpu=skip", "examples/"], 200, report=True)
    outcome_checks(record, lambda t: None if t["outcome"] == "skipped" else "passed")
    for t in record.get("tests", []):
        if t["outcome"] == "skipped":
            record["checks"].append(
                check(f"{t['id']} skipped (allowed: a v5e target needs libtpu)", None, t["message"])
            )


def planted(run: Run, record: dict[str, Any]) -> None:
    args = ["-v", "--tpumem", "tests/planted/test_leaky.py", "tests/planted/test_clean.py"]
    run.pytest(record, args, 180, report=True)
    outcome_checks(record, lambda t: "failed" if "test_leaky" in t["id"] else "passed")
    for test, figures in (record.get("figures") or {}).items():
        want = "leak" if "test_leaky" in test else "ok"
        record["checks"].append(check(f"{test} verdict {want}", figures["verdict"]["value"] == want))


def compare_peaks(run: Run, record: dict[str, Any]) -> None:
    path = run.out / "reports" / "compare_peaks.json"
    path.parent.mkdir(exist_ok=True)
    command = [run.python, str(HERE / "compare_peaks.py"), "--json", str(path)]
    done = run.command(command, 200, log="compare_peaks")
    run._fill(record, command, ROOT, done)
    try:
        programs = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        record["checks"].append(check("compare_peaks.py wrote its JSON", False, repr(e)))
        return
    cpu = {p["program"]: p for p in run.expected.get("compare_peaks", {}).get("programs", [])}
    record["programs"] = [
        {
            **{k: p.get(k) for k in ("program", "device", "compiled_peak", "measured", "ratio", "arguments", "temps")},
            "cpu_compiled_peak": cpu.get(p["program"], {}).get("compiled_peak"),
        }
        for p in programs
    ]
    names = [p["program"] for p in programs]
    record["checks"].append(check("every program ran", len(names) == 5, names))
    if backend(run) != "cpu":
        record["checks"].append(
            check("a runtime peak was measured for every program", all(p["measured"] for p in programs))
        )


def need_gpu(run: Run, what: str) -> None:
    if run.force:
        return
    if backend(run) != "gpu":
        raise Skip(f"needs a GPU: the default backend is {backend(run)} ({what})")


def out_of_memory(run: Run, record: dict[str, Any]) -> None:
    if not run.force and not run.probe.get("bytes_limit"):
        raise Skip(
            f"needs a device with a bytes_limit: the {backend(run)} backend reports none, and an allocation "
            "over the device's memory would land on the host's"
        )
    folder = run.scratch / "oom"
    folder.mkdir()
    (folder / "test_oom.py").write_text(OOM_TEST)
    record["source"] = "test_oom.py (OOM_TEST in validate.py)"
    report = run.pytest(record, ["-v", "--tpumem", "test_oom.py"], 150, cwd=folder, report=True)
    record["bytes_limit"] = run.probe.get("bytes_limit")
    tests = {t["id"].split("::")[-1]: t for t in record.get("tests", [])}
    over = tests.get("test_1_over_the_limit", {})
    if over.get("outcome") == "skipped":
        record["checks"].append(check("test_1_over_the_limit ran out of memory", None, over.get("message")))
    else:
        entry = (report or {}).get("tests", {}).get("test_oom.py::test_1_over_the_limit", {})
        said = "out of device memory in this test" in run.last_stdout or any(
            "out of device memory in this test" in t.get("message", "") for t in tests.values()
        )
        record["checks"].append(check("test_1_over_the_limit failed", over.get("outcome") == "failed", over))
        record["checks"].append(check("its verdict is oom", entry.get("verdict") == "oom", entry.get("verdict")))
        record["checks"].append(check("the plugin says 'out of device memory in this test'", said))
    for name, size in OOM_SIZES.items():
        entry = (report or {}).get("tests", {}).get(f"test_oom.py::{name}", {})
        peak = entry.get("peak")
        near = peak is not None and abs(peak - size) <= max(OOM_TOLERANCE[0] * size, OOM_TOLERANCE[1])
        record["checks"].append(
            check(
                f"{name} passed, its peak {mb(size)} within 1% or 2MB",
                near and entry.get("outcome") == "passed",
                {"peak": peak, "expected": size, "outcome": entry.get("outcome"), "witness": entry.get("witness")},
            )
        )


FRACTION_NAMES = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def share_one_gpu(run: Run, record: dict[str, Any]) -> None:
    need_gpu(run, "--tpumem-gpus shares a GPU's memory between pytest-xdist workers")
    if importlib.util.find_spec("xdist") is None:
        raise Skip("pytest-xdist is not installed")
    folder = run.scratch / "share"
    records = folder / "records"
    records.mkdir(parents=True)
    (folder / "test_share.py").write_text(SHARE_TEST)
    env = dict(run.env, VALIDATE_RECORDS=str(records))
    # A CUDA_VISIBLE_DEVICES the machine sets is the GPUs --tpumem-gpus shares: each worker gets its first entry.
    record["outer_mask"] = env.get("CUDA_VISIBLE_DEVICES")
    args = ["-v", "--tpumem", "-n", "2", "--dist", "each", "--tpumem-gpus=1", "test_share.py"]
    run.pytest(record, args, 150, cwd=folder, env=env)
    workers = {}
    for path in sorted(records.glob("*.json")):
        workers[path.stem] = json.loads(path.read_text())
    record["workers"] = workers
    record["header_line"] = next((x for x in record.get("tpumem_lines", []) if "--tpumem-gpus" in x), None)
    record["checks"].append(check("both workers ran and recorded", sorted(workers) == ["gw0", "gw1"], sorted(workers)))
    fractions = {w: [n for n in FRACTION_NAMES if (r.get("env") or {}).get(n)] for w, r in workers.items()}
    record["checks"].append(
        check(
            "each worker has one memory-fraction variable, never both (jaxlib refuses both)",
            bool(workers) and all(len(names) == 1 for names in fractions.values()),
            fractions,
        )
    )
    alone = run.probe.get("bytes_limit")
    limits = [w["memory_stats"].get("bytes_limit") for w in workers.values()]
    if alone and all(limits):
        ratios = [round(limit / alone, 3) for limit in limits]
        record["checks"].append(
            check(
                "each worker's bytes_limit is about half of one process's (the share took effect)",
                all(r <= 0.6 for r in ratios),
                {"alone": alone, "workers": limits, "ratios": ratios},
            )
        )
    else:
        record["checks"].append(check("each worker reports a bytes_limit", None, {"alone": alone, "workers": limits}))


# -- markdown ---------------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    m = results.get("machine", {})
    lines = [
        "# Accelerator validation",
        "",
        f"Started {results['started']}, {results['wall_s']}s of a {results['budget_s']:.0f}s budget"
        + (" (forced: GPU steps run on any backend)" if results.get("forced") else "")
        + ".",
        "",
        "## Machine",
        "",
    ]
    for key in ("hostname", "cpus", "nvidia_smi_L", "nvidia_smi_query", "nvidia_smi", "python", "executable"):
        if key in m:
            value = str(m[key]).replace("\n", "; ")
            lines.append(f"- {key}: `{value}`")
    if m.get("versions"):
        lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()))
    for key in ("default_backend", "devices", "bytes_limit", "pytest_tpumem", "plugin_entry_point", "env", "probe_s"):
        if key in m:
            lines.append(f"- {key}: `{m[key]}`")
    if m.get("memory_stats"):
        lines.append("- memory_stats() of device 0: " + ", ".join(f"{k}={v}" for k, v in m["memory_stats"].items()))
    elif "memory_stats" in m:
        lines.append("- memory_stats() of device 0: none (this backend reports no memory statistics)")
    plugin = results.get("plugin", {})
    lines.append(f"- plugin loaded by: {plugin.get('loaded_by')}; PYTHONPATH `{plugin.get('PYTHONPATH')}`")
    cpu = results.get("cpu_expected") or {}
    lines.append(f"- CPU expectations: `{cpu.get('file')}` ({cpu.get('date', cpu.get('error'))}, {cpu.get('machine')})")
    s = results.get("summary", {})
    lines += [
        "",
        "## Steps",
        "",
        f"{s.get('ran')} ran, {s.get('skipped')} skipped, {s.get('errors')} errors; "
        f"expectations met in {s.get('expectations_met')}, missed in {s.get('expectations_missed') or 'none'}.",
        "",
        "| step | status | rc | passed | failed | skipped | error | wall | expectation | reason (not run) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for step in results["steps"]:
        c = step.get("counts") or {}
        met = {True: "met", False: "**missed**", None: "-"}[step.get("expect_met")]
        status = step["status"] + (" (timed out)" if step.get("timed_out") else "")
        lines.append(
            f"| {step['name']} | {status} | {step.get('rc', '-')} | {c.get('passed', '-')} | {c.get('failed', '-')} "
            f"| {c.get('skipped', '-')} | {c.get('error', '-')} | {step['wall_s']}s | {met} "
            f"| {step.get('reason', '') if step['status'] != 'ran' else ''} |"
        )
    for step in results["steps"]:
        lines += step_markdown(step)
    return "\n".join(lines) + "\n"


def step_markdown(step: dict[str, Any]) -> list[str]:
    lines = ["", f"## {step['name']}: {step['title']}", ""]
    if step["status"] != "ran":
        lines.append(f"**{step['status']}**: {step.get('reason')}")
        if step.get("traceback"):
            lines += ["", "```text", step["traceback"], "```"]
        return lines
    if step.get("command"):
        lines.append(f"`{step['command']}` (in `{step['cwd']}`): rc {step.get('rc')}, {step.get('run_s')}s")
    if step.get("tpumem_lines"):
        lines += ["", "The plugin's header:", "", "```text", *step["tpumem_lines"], "```"]
    if step.get("note"):
        lines += ["", step["note"]]
    if step.get("context"):
        lines += ["", f"report context: `{step['context']}`"]
    if step.get("tests"):
        lines += ["", "| test | outcome | message |", "| --- | --- | --- |"]
        for t in step["tests"]:
            msg = t["message"].splitlines()[0][:160] if t["message"] else ""
            lines.append(f"| {t['id']} | {t['outcome']} | {msg.replace('|', '/')} |")
    if step.get("figures"):
        lines += [
            "",
            "Figures (this run / CPU expectation):",
            "",
            "| test | verdict | peak | budget | witness | growth/iteration | growth source "
            "| dev:0 live arrays growth | dev:0 bytes in use growth |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for test, f in step["figures"].items():

            def pair(key: str, show: Callable[[Any], str] = mb, f: dict[str, Any] = f) -> str:
                got = f.get(key, {})
                return f"{show(got.get('value'))} / {show(got.get('cpu'))}"

            lines.append(
                f"| {test.split('::')[-1]} | {pair('verdict', str)} | {pair('peak')} | {pair('budget')} "
                f"| {pair('witness', str)} | {pair('growth')} | {pair('growth_source', str)} "
                f"| {pair('growth dev:0 live arrays')} | {pair('growth dev:0 bytes in use')} |"
            )
    if step.get("programs"):
        lines += [
            "",
            "| program | device | compiled peak | measured peak | measured/compiled | CPU compiled peak |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for p in step["programs"]:
            ratio = "-" if p["ratio"] is None else f"{p['ratio']:.3f}"
            lines.append(
                f"| {p['program']} | {p['device']} | {mb(p['compiled_peak'])} | {mb(p['measured'])} | {ratio} "
                f"| {mb(p['cpu_compiled_peak'])} |"
            )
    if step.get("workers"):
        lines += ["", f"header: `{step.get('header_line')}`", ""]
        if step.get("unset"):
            lines += [f"unset for this step: `{step['unset']}`", ""]
        for worker, w in step["workers"].items():
            lines.append(f"- {worker}: env `{w['env']}`, memory_stats `{w['memory_stats']}`, devices `{w['devices']}`")
    if step.get("checks"):
        lines += ["", "Checks:", ""]
        for c in step["checks"]:
            mark = {True: "ok", False: "**FAILED**", None: "not judged"}[c["ok"]]
            detail = "" if c["detail"] is None else f": `{str(c['detail'])[:300]}`"
            lines.append(f"- {mark}: {c['check']}{detail}")
    out = step.get("stdout_tail", "")
    if out:
        lines += [
            "",
            "<details><summary>stdout (tail)</summary>",
            "",
            "```text",
            tail(out, 2500),
            "```",
            "",
            "</details>",
        ]
    return lines


# -- main -------------------------------------------------------------------------------------------


def record_cpu(results: dict[str, Any]) -> None:
    """cpu_expected.json: each step's outcomes and figures, as the CPU gave them."""
    machine = results["machine"]
    steps: dict[str, Any] = {}
    for step in results["steps"]:
        if step["status"] != "ran" or step["name"] == "header":
            continue
        kept: dict[str, Any] = {
            "counts": step.get("counts"),
            "outcomes": {t["id"]: t["outcome"] for t in step.get("tests", [])},
        }
        if step.get("figures"):
            kept["figures"] = {test: {k: v["value"] for k, v in f.items()} for test, f in step["figures"].items()}
        if step.get("programs"):
            kept["programs"] = [
                {k: p[k] for k in ("program", "compiled_peak", "arguments", "temps")} for p in step["programs"]
            ]
        if step.get("workers"):
            kept["workers"] = {w: {k: v for k, v in r.items() if k != "pid"} for w, r in step["workers"].items()}
        steps[step["name"]] = kept
    recorded = {
        "date": results["started"][:10],
        "machine": f"{machine.get('default_backend')}, {machine.get('cpus')} CPUs, python {machine.get('python')}, "
        f"jax {machine.get('versions', {}).get('jax')}",
        "by": "python3 docs/validation/validate.py --record-cpu",
    }
    CPU_EXPECTED.write_text(json.dumps({"recorded": recorded, "steps": steps}, indent=1, sort_keys=True) + "\n")
    print(f"validate: wrote {CPU_EXPECTED}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "out"), help="where the results go ($OUT)")
    ap.add_argument(
        "--budget",
        type=float,
        default=float(os.environ.get("VALIDATE_BUDGET_S", 420)),
        help="seconds for all the steps together (default 420, $VALIDATE_BUDGET_S)",
    )
    ap.add_argument("--force", action="store_true", help="run the GPU-only steps on any backend (to try them)")
    ap.add_argument(
        "--record-cpu",
        action="store_true",
        help="run every step (GPU-only ones forced) and write cpu_expected.json from this CPU run",
    )
    ap.add_argument("--only", help="comma-separated step names (for trying one step)")
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out, a.budget, a.force or a.record_cpu, sys.executable)
    only = set(a.only.split(",")) if a.only else None
    first: dict[str, Any] = {}

    def keep_first(record: dict[str, Any]) -> None:
        gpu_tests(run, record)
        first.update(record)

    steps: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
        ("header", "the machine, jax and its devices", lambda r: header(run, r)),
        ("test_gpu", "tests/test_gpu.py: the real-accelerator twins", keep_first),
        (
            "test_gpu_interpreter",
            "test_gpu.py's failures again, without the fork server",
            lambda r: gpu_tests_interpreter(run, r, first),
        ),
        ("oom", "a real out-of-memory, then tests of known sizes", lambda r: out_of_memory(run, r)),
        ("gpus", "--tpumem-gpus=1 with two pytest-xdist workers on one GPU", lambda r: share_one_gpu(run, r)),
        ("planted", "the planted leaks (all fail) and their clean twins (all pass)", lambda r: planted(run, r)),
        ("examples", "pytest --tpumem examples/", lambda r: examples(run, r)),
        ("compare_peaks", "compiled peak against runtime peak (compare_peaks.py)", lambda r: compare_peaks(run, r)),
        ("fake_device", "tests/test_fake_device.py on the CPU devices", lambda r: fake_device(run, r, "cpu")),
        (
            "fake_device_default",
            "tests/test_fake_device.py on the default backend's devices",
            lambda r: fake_device(run, r, None),
        ),
    ]
    for name, title, body in steps:
        if only is None or name in only or name == "header":
            run.step(name, title, body)
    run.write()
    shutil.rmtree(run.scratch, ignore_errors=True)
    print(f"validate: {out / 'validation.json'} and validation.md, {run.results['wall_s']}s", flush=True)
    if a.record_cpu:
        record_cpu(run.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
