"""(t) Mutation testing of the decisions and their figures, with mutmut (the ``mutation`` extra).

Runs ``mutmut run`` with the project's ``[tool.mutmut]`` (pyproject.toml: the modules mutated and the
in-process tests given to it) in a copy of this checkout, so that nothing here is touched, then
counts each module's mutants by what became of them. The mutants judged equivalent (no behaviour
tells them apart) are listed, each with why, in ``mutation_equivalent.txt`` beside this script;
the score is killed over the mutants not judged equivalent.

    pip install -e ".[mutation]"
    python benchmarks/bench_mutation.py                        # every module [tool.mutmut] names
    python benchmarks/bench_mutation.py pytest_tpumem/units.py # only these (files or folders)
    python benchmarks/bench_mutation.py --keep DIR             # keep the copy: `cd DIR && mutmut show NAME`

Killed: a test failed. Survived: every test given passed. Timeout: the tests ran past mutmut's
limit (15x their time unmutated), which is a kill for a mutant that makes a loop endless. No tests:
no test given to mutmut runs the function; counted as not killed.

``--table DIR`` prints the table of a kept copy again (a run stopped part way: its mutants not yet
run are counted under "other")."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import copy_checkout  # noqa: E402

EQUIVALENT = Path(__file__).resolve().parent / "mutation_equivalent.txt"
COLUMNS = ("mutants", "killed", "timeout", "survived", "equivalent", "no tests", "other")


def equivalents() -> dict[str, str]:
    """Mutant name -> why it is equivalent, from mutation_equivalent.txt (``name  # why`` a line)."""
    out = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            name, _, why = line.partition("#")
            if name.strip():
                out[name.strip()] = why.strip()
    return out


def only(pyproject: Path, paths: list[str]) -> None:
    """Mutate only ``paths``: the copy's source_paths replaced."""
    text = pyproject.read_text()
    listed = "source_paths = [" + ", ".join(json.dumps(p) for p in paths) + "]"
    text, n = re.subn(r"source_paths = \[[^\]]*\]", listed, text)
    if n != 1:
        raise SystemExit("pyproject.toml has no [tool.mutmut] source_paths to replace")
    pyproject.write_text(text)


NO_BACKEND = """
import os, sys, tomllib, pytest
selection = tomllib.load(open("pyproject.toml", "rb"))["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]
code = pytest.main(["--collect-only", "-q", "-p", "no:randomly", *selection])
started = sorted(getattr(sys.modules.get("jax._src.xla_bridge"), "_backends", None) or ())
print(f"backends started at collection: {started}")
sys.exit(code or (3 if started else 0))
"""


def check_collection(work: Path, env: dict[str, str]) -> None:
    """mutmut forks each mutant's run from a server that has collected the tests: a jax backend
    started then (a module constant made with jnp) has threads a fork can deadlock on, and every
    mutant would hang to its timeout. Refused here, by name, before the run."""
    done = subprocess.run([sys.executable, "-c", NO_BACKEND], cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            "the tests given to mutmut do not collect without starting jax's backend; take the module that "
            f"starts it out of [tool.mutmut] pytest_add_cli_args_test_selection:\n{done.stdout[-2000:]}"
        )


def results(mutants: Path) -> dict[str, dict[str, str]]:
    """Source file -> mutant name -> its status as mutmut names it, from mutmut's .meta files."""
    from mutmut.stats import status_by_exit_code

    out: dict[str, dict[str, str]] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        source = str(meta.relative_to(mutants))[: -len(".meta")]
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        out[source] = {name: status_by_exit_code[code] for name, code in codes.items()}
    return out


def table(by_file: dict[str, dict[str, str]], judged: dict[str, str]) -> tuple[str, list[str], Counter]:
    rows, survivors, total = [], [], Counter()
    for source, mutants in by_file.items():
        c = Counter()
        for name, status in mutants.items():
            if status == "survived" and name in judged:
                status = "equivalent"
            if status == "survived":
                survivors.append(name)
            c["mutants"] += 1
            c[status if status in COLUMNS else "other"] += 1
        total.update(c)
        rows.append((source, c))
    rows.append(("all", total))
    head = "| module | " + " | ".join(COLUMNS) + " | killed of non-equivalent |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for source, c in rows:
        scored = c["mutants"] - c["equivalent"]  # a mutant no test runs is not killed
        share = f"{100 * (c['killed'] + c['timeout']) / scored:.1f}%" if scored else "-"
        lines.append(f"| {source} | " + " | ".join(str(c[k]) for k in COLUMNS) + f" | {share} |")
    return "\n".join(lines), survivors, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="mutate only these files or folders (default: [tool.mutmut]'s)")
    ap.add_argument("--keep", metavar="DIR", help="run in DIR (made empty first) and keep it")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--table", metavar="DIR", help="only print the table of a copy kept with --keep")
    a = ap.parse_args()
    if a.table:
        text, survivors, _ = table(results(Path(a.table) / "mutants"), equivalents())
        print(text + f"\n\nsurvivors ({len(survivors)}):\n" + "\n".join("  " + n for n in survivors))
        return
    mutmut = shutil.which("mutmut", path=os.path.dirname(sys.executable)) or shutil.which("mutmut")
    if mutmut is None:
        raise SystemExit('mutmut is not installed: pip install -e ".[mutation]"')
    work = Path(a.keep).resolve() if a.keep else Path(tempfile.mkdtemp(prefix="tpumem-mutation-"))
    if a.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        copy_checkout(work)
        if a.paths:
            only(work / "pyproject.toml", a.paths)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
        env["JAX_PLATFORMS"] = "cpu"
        check_collection(work, env)
        began = time.monotonic()
        run = subprocess.run(
            [mutmut, "run", "--max-children", str(a.max_children)],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        took = time.monotonic() - began
        by_file = results(work / "mutants")
        if run.returncode != 0 or not by_file:
            raise SystemExit(f"mutmut run exited {run.returncode}:\n{run.stderr[-3000:]}")
        text, survivors, _ = table(by_file, equivalents())
        print(f"mutmut over {len(by_file)} modules in {took / 60:.1f} min ({a.max_children} at once)\n")
        print(text)
        print(f"\nsurvivors ({len(survivors)}): see each with `mutmut show NAME` in the kept copy")
        for name in survivors:
            print("  " + name)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
