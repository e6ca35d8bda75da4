"""The parts of the docs made from the code at build time, so that they cannot drift from it:

- reference/options.md: every option with its ini twin, the ini type, the default and its help
  (pytest_tpumem.glue.options: OPTIONS, DEFAULTS);
- reference/markers.md: each marker's signature and help as ``pytest --markers`` prints them
  (glue/markers.py), the fixtures' docstrings (plugin.py) and the public names of the package;
- reference/cli.md: ``python -m pytest_tpumem`` and each command's ``--help`` (cli.py);
- _outputs/NAME.txt: the real output blocks, from docs/outputs.py (each command run now).

The generated files are not in git (docs/.gitignore)."""

from __future__ import annotations

import inspect
import io
import os
import sys
from contextlib import redirect_stdout
from typing import Any

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # docs/
GENERATED = "This page is generated from the code when the docs are built; edit the code, not the page."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def options_page() -> str:
    from pytest_tpumem.glue.options import DEFAULTS, OPTIONS

    lines = [
        "# Options",
        "",
        GENERATED,
        "",
        "Every option has an ini twin (`pytest.ini`, `[tool.pytest.ini_options]`, `tox.ini`, `setup.cfg`, "
        "or pytest 9's typed `[tool.pytest]` table). The command line wins, then the ini, then the default. "
        "Sizes are `B`, `kB`, `MB`, `GB`, `TB` (powers of 10) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 2).",
        "",
        "| option | ini | ini type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in OPTIONS:
        flag = o.flag if o.action == "store_true" else f"{o.flag}=VALUE"
        lines.append(f"| `{flag}` | `{o.name}` | {o.ini_type} | `{DEFAULTS[o.name]}` | {_cell(o.help)} |")
    return "\n".join(lines) + "\n"


def markers_page() -> str:
    import pytest_tpumem
    from pytest_tpumem import plugin
    from pytest_tpumem.glue.markers import MARKERS, help_line, signature

    lines = ["# Markers, fixtures and the Python API", "", GENERATED, "", "## Markers", ""]
    for marker in MARKERS:
        lines += [f"### `{marker.__name__}`", "", "```python", f"@pytest.mark.{signature(marker)}", "```", ""]
        lines += [help_line(marker).partition(": ")[2], ""]
    lines += ["## Fixtures", ""]
    for name in ("leak_check", "hbm_estimate"):
        fixture = getattr(plugin, name)
        # pytest 9 wraps a fixture's function; older ones leave it as it is
        fn = fixture._get_wrapped_function() if hasattr(fixture, "_get_wrapped_function") else fixture
        doc = inspect.cleandoc(fn.__doc__ or "")
        lines += [f"### `{name}`", "", "```text", doc, "```", ""]
    lines += ["## The package's public names", "", "| name | what it is |", "| --- | --- |"]
    for name in sorted(pytest_tpumem.__all__):
        obj = getattr(pytest_tpumem, name)
        doc = (inspect.getdoc(obj) or "").strip().split("\n\n")[0]
        lines.append(f"| `{name}` | {_cell(doc)} |")
    return "\n".join(lines) + "\n"


def cli_page() -> str:
    from pytest_tpumem import cli

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same page everywhere
    top = cli.parser()
    lines = ["# The command line: `python -m pytest_tpumem`", "", GENERATED, "", "It needs no jax.", ""]

    def helped(parser: Any) -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            parser.print_help()
        return out.getvalue().rstrip()

    lines += ["```text", helped(top), "```", ""]
    commands = next(a for a in top._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in commands.choices.items():
        lines += [f"## `{name}`", "", "```text", helped(sub), "```", ""]
    return "\n".join(lines) + "\n"


def _write(path: str, text: str) -> None:
    """Written only where it changed, so Sphinx rebuilds only what did."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w") as f:
        f.write(text)


def generate(app: Any) -> None:
    for name, make in (("options", options_page), ("markers", markers_page), ("cli", cli_page)):
        _write(os.path.join(HERE, "reference", f"{name}.md"), make())
    sys.path.insert(0, HERE)
    import outputs

    outputs.main(["--out", os.path.join(HERE, "_outputs")] + (["--keep"] if os.environ.get("TPUMEM_DOCS_KEEP") else []))


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
