"""Every block of real output in the docs and the README, made by running the command that prints
it, never pasted by hand.

    python docs/outputs.py [--out docs/_outputs] [--keep] [NAME ...]   # run them, write NAME.txt
    python docs/outputs.py --readme README.md [--check]                 # README's blocks from them

The docs build (docs/_ext/tpumem_docs.py) runs the first form; docs include ``_outputs/NAME.txt``.
The README's blocks follow ``<!-- output: NAME -->``: ``--readme`` writes them from the outputs
(less the lines that differ from run to run: host figures and times, see VOLATILE), and
``--check`` (run by .ci/run after the docs build) fails where the README says otherwise.

Each scenario writes a small suite into a temporary directory, runs it there with this Python (the
CPU backend with two devices, as the plugin's tests run), and keeps the part of the output the docs
show. The suites are the plugin's own planted tests where those exist (tests/), so the docs show
what the tests pin."""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "_outputs")
# What moves between runs of the same code: host memory, times. Left out of the README's blocks.
VOLATILE = re.compile(
    r"\bhost (RSS|malloc|other|peak)\b|\bin \d+\.\d+s\b|^\s*ran jit\(convert_element_type\)|^\s*jax's backend started in test"
)


def _test_module(name: str) -> object:
    """A module of the plugin's tests (for its planted suite), loaded from its file."""
    path = os.path.join(ROOT, "tests", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PADDED = """
import jax, jax.numpy as jnp, pytest


def scale(x):
    return x * 2


@pytest.mark.max_hbm("28MB", target="v5e")
def test_padded():
    x = jnp.ones((1_000_000, 3))
    jax.jit(scale)(x).block_until_ready()
"""

GROWING = """
import jax.numpy as jnp, pytest

N = {n}


@pytest.mark.max_hbm("100MB")
def test_decode_step():
    cache = jnp.zeros((N,), jnp.float32)
    assert float(cache.sum()) == 0
"""


@dataclass
class Scenario:
    """A suite (file name -> source), the runs to make in its directory, and the part of the
    last run's output to keep."""

    files: Callable[[], dict[str, str]]
    runs: list[list[str]]
    keep: Callable[[str], str]
    env: dict[str, str] = field(default_factory=dict)
    between: Callable[[str], None] | None = None  # called with the directory before the second run


FINAL = re.compile(r"^=+ .*\bin \d+\.\d+s")  # pytest's closing line ("= 1 failed, 4 passed in 2.18s =")


def _section(text: str, start: str, *stops: str) -> str:
    """From the first line containing ``start`` up to (not including) the next line containing one
    of ``stops`` or pytest's closing line."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    end = next(
        (i for i in range(first + 1, len(lines)) if FINAL.match(lines[i]) or any(s in lines[i] for s in stops)),
        len(lines),
    )
    return "\n".join(lines[first:end]).rstrip()


def _failures(text: str, captured: bool = False) -> str:
    """The FAILURES section's blocks, each without its captured sections unless asked."""
    body = _section(text, "= FAILURES =", "= tpumem =", "- tpumem ledger -", "short test summary info")
    out, skipping = [], False
    for line in body.splitlines()[1:]:
        if re.match(r"^-+ Captured ", line):
            skipping = not (captured and "tpumem" in line)
        elif re.match(r"^_+ .* _+$", line):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out).rstrip()


def _summary(text: str) -> str:
    """The tpumem summary and the ledger's."""
    return _section(text, "= tpumem =", "short test summary info")


def _measured(text: str) -> str:
    """The tpumem summary of the measured tests alone."""
    return _section(text, "= tpumem =", "- tpumem ledger -", "short test summary info")


def _ledger(text: str) -> str:
    return _section(text, "- tpumem ledger -", "short test summary info")


def _crash(text: str) -> str:
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "crashed while running" in line)
    return "\n".join(lines[first : first + 3])


def _examples() -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if name.endswith(".py"):
            with open(os.path.join(ROOT, "examples", name)) as f:
                out[f"examples/{name}"] = f.read()
    return out


def _grow(directory: str) -> None:
    with open(os.path.join(directory, "test_decode.py"), "w") as f:
        f.write(GROWING.format(n=13_000_000))  # 40 MB -> 52 MB


PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]

SCENARIOS: dict[str, Scenario] = {
    "examples": Scenario(_examples, [[*PYTEST, "--tpumem", "examples/"]], _summary),
    "leak": Scenario(
        lambda: {"test_leaky.py": open(os.path.join(ROOT, "tests", "planted", "test_leaky.py")).read()},
        [[*PYTEST, "--tpumem", "test_leaky.py", "-k", "module_list or helper_method or static_argument"]],
        _failures,
    ),
    "budget": Scenario(
        lambda: {"test_sizes.py": _test_module("test_budgets").SIZES},  # type: ignore[attr-defined]
        [[*PYTEST, "--tpumem", "test_sizes.py"]],
        lambda text: _failures(text, captured=True) + "\n\n" + _measured(text),
    ),
    "upcast": Scenario(
        lambda: {"test_gn.py": _test_module("test_budgets").GROUP_NORM},  # type: ignore[attr-defined]
        [[*PYTEST, "--tpumem", "test_gn.py", "-k", "upcast"]],
        _failures,
    ),
    "target": Scenario(lambda: {"test_pad.py": PADDED}, [[*PYTEST, "--tpumem", "test_pad.py"]], _failures),
    "left-behind": Scenario(
        lambda: {"test_orders.py": open(os.path.join(ROOT, "tests", "planted", "test_orders.py")).read()},
        [[*PYTEST, "--tpumem", "test_orders.py", "-k", "leaves_array or arrays_over_budget"]],
        _failures,
    ),
    "ledger": Scenario(
        lambda: {"test_planted.py": _test_module("test_ledger").PLANTED},  # type: ignore[attr-defined]
        [[*PYTEST, "--tpumem", "--tpumem-ledger=ledger.jsonl", "test_planted.py"]],
        _ledger,
    ),
    "baseline": Scenario(
        lambda: {"test_decode.py": GROWING.format(n=10_000_000)},  # 40 MB
        [
            [*PYTEST, "--tpumem", "--tpumem-save=base.json", "test_decode.py"],
            [
                *PYTEST,
                "--tpumem",
                "--tpumem-json=new.json",
                "--tpumem-compare=base.json",
                "--tpumem-compare-fail=peak:10%",
                "test_decode.py",
            ],
        ],
        lambda text: _failures(text) + "\n\n" + _measured(text),
        between=_grow,
    ),
    "compare": Scenario(
        lambda: {"test_decode.py": GROWING.format(n=10_000_000)},
        [
            [*PYTEST, "--tpumem", "--tpumem-save=base.json", "test_decode.py"],
            [*PYTEST, "--tpumem", "--tpumem-json=new.json", "test_decode.py"],
            [sys.executable, "-m", "pytest_tpumem", "compare", "base.json", "new.json", "--fail", "peak:10%"],
        ],
        lambda text: text.rstrip(),
        between=_grow,
    ),
    "crash": Scenario(
        lambda: {"test_killed.py": _test_module("test_ledger").KILLED},  # type: ignore[attr-defined]
        [[*PYTEST, "--tpumem", "-n", "1", "--tpumem-ledger=ledger.jsonl", "test_killed.py"]],
        _crash,
    ),
}


def run(name: str) -> str:
    """The scenario's output as the docs show it: paths relative to its directory."""
    scenario = SCENARIOS[name]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "80"
    for key in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        env.pop(key, None)
    env.update(scenario.env)
    directory = tempfile.mkdtemp(prefix="tpumem-docs-")
    try:
        for path, text in scenario.files().items():
            os.makedirs(os.path.dirname(os.path.join(directory, path)), exist_ok=True)
            with open(os.path.join(directory, path), "w") as f:
                f.write(text)
        out = ""
        for i, argv in enumerate(scenario.runs):
            if i == 1 and scenario.between is not None:
                scenario.between(directory)
            proc = subprocess.run(argv, cwd=directory, env=env, capture_output=True, text=True, timeout=600)
            out = proc.stdout + proc.stderr
        try:
            kept = scenario.keep(out)
        except StopIteration:
            raise SystemExit(f"docs/outputs.py: {name}: the output lacks what the docs show:\n{out}") from None
        real = os.path.realpath(directory)
        return kept.replace(real + os.sep, "").replace(directory + os.sep, "").replace(real, ".") + "\n"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def readme_blocks(readme: str, outputs: dict[str, str]) -> str:
    """README with each ``<!-- output: NAME -->`` block made from NAME's output, less VOLATILE lines."""
    pattern = re.compile(r"(<!-- output: ([\w-]+) -->\n```text\n)(.*?)(```)", re.S)

    def block(m: re.Match[str]) -> str:
        lines = [line for line in outputs[m.group(2)].splitlines() if not VOLATILE.search(line)]
        return m.group(1) + "\n".join(lines) + "\n" + m.group(4)

    return pattern.sub(block, readme)


def _write(path: str, name: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    print(f"docs/outputs.py: {name}: {len(text.splitlines())} lines", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"scenarios to run (default all: {', '.join(SCENARIOS)})")
    ap.add_argument("--out", default=OUT, help="where NAME.txt are written (default docs/_outputs)")
    ap.add_argument("--keep", action="store_true", help="do not run a scenario whose file is there already")
    ap.add_argument("--readme", metavar="PATH", help="write PATH's output blocks from the outputs in --out")
    ap.add_argument("--check", action="store_true", help="with --readme: exit 1 where PATH's blocks differ")
    a = ap.parse_args(argv)
    if a.readme:
        outputs = {}
        for name in SCENARIOS:
            with open(os.path.join(a.out, f"{name}.txt")) as f:
                outputs[name] = f.read()
        with open(a.readme) as f:
            old = f.read()
        new = readme_blocks(old, outputs)
        if a.check:
            if new != old:
                import difflib

                sys.stdout.writelines(
                    difflib.unified_diff(old.splitlines(True), new.splitlines(True), a.readme, "from the outputs")
                )
                print(
                    f"{a.readme}: its output blocks are not what the commands print now: python docs/outputs.py --readme {a.readme}"
                )
                return 1
            return 0
        with open(a.readme, "w") as f:
            f.write(new)
        return 0
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in a.names or list(SCENARIOS) if not (a.keep and os.path.exists(os.path.join(a.out, f"{n}.txt")))]
    # each scenario is a process of its own in a directory of its own: as many at once as there are cores
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        texts = pool.map(run, names)
        for name, text in zip(names, texts):
            _write(os.path.join(a.out, f"{name}.txt"), name, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
