"""Where in the user's code something happened: the innermost frame of a traceback that belongs to
the user, not to jax, numpy, pytest, the libraries models are built with, or this plugin.

jax records a traceback with every array it makes (``Array.traceback``, innermost frame first) and
with every program it compiles; the first user frame there is the line that made it, even when
that line is in a helper several calls away from the test.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import sysconfig
from dataclasses import dataclass
from typing import Any

# Packages whose frames are never the user's: jax itself, the array and test machinery, the
# libraries models are built with, and this plugin (wherever they are installed). Anything else
# installed in site-packages is a library too; the user's own code is what remains (the tests, and
# a package of theirs installed in development mode).
LIBRARIES = (
    "jax",
    "jaxlib",
    "numpy",
    "ml_dtypes",
    "opt_einsum",
    "scipy",
    "_pytest",
    "pytest",
    "pluggy",
    "pytest_tpumem",
    "optax",
    "flax",
    "chex",
    "equinox",
    "haiku",
    "orbax",
    "absl",
    "xdist",
    "execnet",
)


@dataclass(frozen=True)
class Frame:
    """A line of the user's code."""

    file: str  # as short as it reads well: relative to the working directory where it is under it
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f" in {self.function}" if self.function else "")


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site.py
        pass
    roots = {os.path.realpath(r) for r in roots if r}
    for name in LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            roots.add(os.path.realpath(location))
    return tuple(sorted(roots, key=len, reverse=True))


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    if not path or path.startswith("<"):  # <frozen ...>, <string>: no file to point at
        return False
    base = os.path.basename(path)
    if base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py":
        return True  # a test module is the user's, even one installed with a library (optax's tests)
    real = os.path.realpath(path)
    return not any(real == root or real.startswith(root + os.sep) for root in _library_roots())


def short_path(path: str) -> str:
    """``path`` relative to the working directory where it is under it, else as it is (a test
    that changes directory gets paths from the new one)."""
    try:
        return _short_path(path, os.getcwd())
    except OSError:  # the working directory was removed
        return path


@functools.lru_cache(maxsize=4096)
def _short_path(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def user_frame(traceback: Any) -> Frame | None:
    """The innermost user frame of a jax traceback (``Array.traceback``, an executable's
    ``traceback``), or None where it has none (made by a library alone, or tracebacks are off)."""
    for frame in getattr(traceback, "frames", None) or ():
        if is_user_file(frame.file_name):
            return Frame(short_path(frame.file_name), int(frame.line_num), str(frame.function_name))
    return None
