"""The package's size and shape at one or more commits: what a maintainer reads.

    python benchmarks/bench_lean.py REV [REV ...]

For each commit, its ``pytest_tpumem/`` as git holds it (``git archive``, not the working tree):

- modules, and lines: every line, and code lines (no blank lines, comments or docstrings);
- functions, and those over complexity 10: ruff's C901 (McCabe's count, ruff as the lint extra pins
  it), and radon's where it is installed (``RADON=path/to/radon``);
- imports inside a function or method (ast);
- ``Any`` as a name in the code, per 1,000 code lines;
- pairs of places that share six or more lines, where a ``duplicates`` command is on the PATH.

No timing: every figure is a count, the same on every run of the same commit.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "pytest_tpumem"


def _tree(rev: str, into: str) -> str:
    data = subprocess.run(["git", "-C", ROOT, "archive", rev, PACKAGE], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return os.path.join(into, PACKAGE)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _code_lines(source: str, tree: ast.AST) -> int:
    skip = _docstring_lines(tree)
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            continue
        code.update(line for line in range(tok.start[0], tok.end[0] + 1) if line not in skip)
    return len(code)


LAZY_ON_PURPOSE = ("jax", "jaxlib", "numpy", "ml_dtypes")  # imported where used, so no module imports jax
OFF_RUN = {  # the modules a run without --tpumem loads: their package imports wait for --tpumem
    "__init__.py",
    "plugin.py",
    "units.py",
    "defaults.py",
    "glue/__init__.py",
    "glue/options.py",
    "glue/markers.py",
    "glue/off.py",
    "glue/hookspecs.py",
}


def _inner_imports(tree: ast.AST, module: str) -> tuple[int, int]:
    """Imports inside functions: (all of them, those neither of jax's family nor of an off-run module)."""
    every = other = 0
    seen: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)) and id(inner) not in seen:
                    seen.add(id(inner))
                    every += 1
                    names = [a.name for a in inner.names] if isinstance(inner, ast.Import) else [inner.module or ""]
                    jaxish = all(n.split(".")[0] in LAZY_ON_PURPOSE for n in names)
                    if not jaxish and module not in OFF_RUN:
                        other += 1
    return every, other


def _over_ten(path: str) -> int:
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff is None:
        return -1
    out = subprocess.run(
        [
            ruff,
            "check",
            "--isolated",
            "--select",
            "C901",
            "--config",
            "lint.mccabe.max-complexity=10",
            "--output-format",
            "concise",
            path,
        ],
        capture_output=True,
        text=True,
    ).stdout
    return sum(1 for line in out.splitlines() if " C901 " in line)


def _radon(path: str) -> tuple[int, int] | None:
    """(functions, those over 10) by radon's count, which adds boolean operators, comprehensions and
    ``with``; radon is found on the PATH or by $RADON, and is not one of the project's dependencies."""
    radon = os.environ.get("RADON") or shutil.which("radon")
    if not radon:
        return None
    out = subprocess.run([radon, "cc", "-j", path], capture_output=True, text=True, check=True).stdout
    blocks = [b for file in json.loads(out).values() for b in file if b.get("type") in ("function", "method")]
    return len(blocks), sum(b["complexity"] > 10 for b in blocks)


def _pairs(path: str) -> str:
    tool = shutil.which("duplicates")
    if tool is None:
        return "n/a"
    out = subprocess.run([tool, "--repo", path, "--seconds", "120"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else ""
    match = re.match(r"(\d+) pairs?", first)
    return match.group(1) if match else ("0" if first.startswith("no duplicates") else "?")


def measure(rev: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        package = _tree(rev, tmp)
        modules = lines = code = functions = inner = other = anys = 0
        for folder, _, files in os.walk(package):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    source = f.read()
                tree = ast.parse(source)
                modules += 1
                lines += source.count("\n")
                code += _code_lines(source, tree)
                functions += sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree))
                every, rest = _inner_imports(tree, os.path.relpath(os.path.join(folder, name), package))
                inner += every
                other += rest
                anys += sum(
                    (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
                    for n in ast.walk(tree)
                )
        over = _over_ten(package)
        radon = _radon(package)
        return {
            "commit": subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--short", rev], capture_output=True, text=True
            ).stdout.strip(),
            "modules": modules,
            "lines": lines,
            "code lines": code,
            "functions": functions,
            "over complexity 10": f"{over} ({100 * over / functions:.1f}%)" if over >= 0 else "n/a",
            "over 10, radon's count": f"{radon[1]} of {radon[0]} ({100 * radon[1] / radon[0]:.1f}%)"
            if radon
            else "n/a",
            "imports in functions": inner,
            "  of which not jax's nor off-run": other,
            "Any": anys,
            "Any per 1,000 code lines": f"{1000 * anys / code:.1f}",
            "duplicate pairs": _pairs(package),
        }


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    rows = [measure(rev) for rev in argv]
    keys = list(rows[0])
    width = max(map(len, keys))
    for key in keys:
        print(f"{key:<{width}}  " + "  ".join(f"{str(r[key]):>12}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
