"""The package's imports run one way, read from the source with ast (no import is run):
units, defaults, errors and targets <- readings <- measuring <- decisions <- telling <- glue, checks and cli
<- plugin;
and no module imports itself back through others (no circle, within a layer either).

A module may import its own layer and the layers below it, never one above, at the top of the
file or inside a function (a lazy import is how a circle hides). Type-only imports (under
``if TYPE_CHECKING:``) are not imports at run time and are left out."""

import ast
import pathlib
import sys

import pytest_tpumem

PACKAGE = pathlib.Path(pytest_tpumem.__file__).parent
LAYERS = {
    "units": 0,
    "defaults": 0,
    "errors": 0,
    "targets": 0,
    "readings": 1,
    "measuring": 2,
    "decisions": 3,
    "telling": 4,
    "glue": 5,
    "cli": 5,
    "checks": 5,
    "__main__": 5,
    "plugin": 6,
    "__init__": 6,
}

KNOWN: set[tuple[str, str]] = set()  # imports against the grain that remain: none, and none may come back


def _layer(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def _module_of(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _imports(path: pathlib.Path) -> set[str]:
    """The package's modules ``path`` imports at run time, as ``layer.module`` names."""
    module = _module_of(path)
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
    tree = ast.parse(path.read_text())
    type_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only |= {id(n) for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in type_only or not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        target = ".".join(p for p in [*base, node.module or ""] if p)
        for alias in node.names:
            name = f"{target}.{alias.name}" if target else alias.name
            out.add(name if (PACKAGE / name.replace(".", "/")).with_suffix(".py").exists() else target)
    return {t for t in out if t and t != module and t.split(".")[0] in LAYERS}


def _against_the_grain() -> set[tuple[str, str]]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module_of(path)
        found |= {(module, t) for t in _imports(path) if _layer(t) > _layer(module)}
    return found


def test_no_module_imports_a_layer_above_its_own_beyond_the_known_ones():
    found = _against_the_grain()
    assert found - KNOWN == set(), "new imports against the grain"
    assert KNOWN - found == set(), "gone: take them off KNOWN"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> modules it imports): each a path that comes back to its start."""
    found, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(module, ())):
            if nxt in path:
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_of(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_module_imports_itself_back_through_others():
    assert _circles(_graph()) == []


def test_the_circle_finder_sees_a_planted_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_reader_sees_a_planted_import_against_the_grain(tmp_path, monkeypatch):
    """The check itself: a readings module importing telling inside a function is found."""
    (tmp_path / "readings").mkdir()
    (tmp_path / "telling").mkdir()
    (tmp_path / "telling" / "text.py").write_text("")
    planted = tmp_path / "readings" / "planted.py"
    planted.write_text("def f():\n    from ..telling.text import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert _imports(planted) == {"telling.text"}
    assert _against_the_grain() == {("readings.planted", "telling.text")}


def _sections(text: str) -> dict[str, str]:
    """docs/architecture.md's text under each ``## `` heading, by heading."""
    sections, heading = {}, ""
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:]
        sections[heading] = sections.get(heading, "") + line + "\n"
    return sections


def test_every_module_is_named_in_the_package_map_under_its_folder():
    """docs/architecture.md is the package's map: each module named in its folder's section (or a
    top-level one in "The rest of the package"), so that a new module is placed and said."""
    sections = _sections((PACKAGE.parent / "docs" / "architecture.md").read_text())
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and rel.parent != pathlib.Path("."):
            continue  # a layer's __init__ holds nothing
        if rel.parent != pathlib.Path("."):
            text = "".join(t for h, t in sections.items() if f"`pytest_tpumem/{rel.parent}/`" in h)
        else:  # plugin.py has its place beside glue/
            text = "".join(t for h, t in sections.items() if h == "The rest of the package" or f"`{rel}`" in h)
        names = {f"`{rel.name}`", f"`{rel}`", f"`pytest_tpumem/{rel}`"}
        if not any(name in text for name in names):
            missing.append(str(rel))
    assert not missing, f"not named in docs/architecture.md under its folder: {missing}"
