"""Imported once, by the fork server of tests/fresh.py only: what every run would import, imported
as a run imports it. pytest runs one test that does nothing (in a directory of its own, no
conftest), so that its assertion rewriting hook imports every installed plugin and pytest-tpumem's
modules as it would in a run (a plugin module imported before pytest marks it for rewriting would
warn in every run), and what plugins import only as a session ends is imported too (hypothesis's
terminal summary imports hypothesis: ~0.8 s of CPU a run). No jax backend is started."""

import contextlib
import io
import os
import pkgutil
import sys
import tempfile

import jax  # noqa: F401
import jax.numpy  # noqa: F401
import numpy  # noqa: F401
import pytest


class _ImportAll:
    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        import pytest_tpumem

        for m in pkgutil.walk_packages(pytest_tpumem.__path__, "pytest_tpumem."):
            if not m.name.endswith("__main__"):
                __import__(m.name)


with tempfile.TemporaryDirectory() as _scratch, contextlib.redirect_stdout(io.StringIO()):
    _cwd = os.getcwd()
    os.chdir(_scratch)
    try:
        with open("test_nothing.py", "w") as f:
            f.write("def test_nothing():\n    pass\n")
        pytest.main(["--noconftest", "-p", "no:cacheprovider", "-q", "test_nothing.py"], plugins=[_ImportAll()])
    finally:
        os.chdir(_cwd)

import fresh  # noqa: E402,F401  (what each run's target is unpickled from)
import fresh_workers  # noqa: E402,F401  (each run's xdist workers)
from _pytest.assertion.rewrite import AssertionRewritingHook  # noqa: E402

# An editable install is imported past pytest's rewriting hook (its finder is not on sys.path), and
# a run that finds a plugin it marks for rewriting already imported warns: the package is then left
# for each run to import, as a new interpreter would.
_package = sys.modules.get("pytest_tpumem")
if _package is not None and not isinstance(getattr(_package, "__loader__", None), AssertionRewritingHook):
    for _name in [n for n in sys.modules if n == "pytest_tpumem" or n.startswith("pytest_tpumem.")]:
        del sys.modules[_name]

# What a new interpreter's sys.path holds after the working directory and PYTHONPATH's entries (this
# directory among them, for these imports only): tests/fresh.py gives each run this, not the test
# session's path that multiprocessing hands the fork, so no run sees the tests' modules.
BASE_PATH = [p for p in sys.path if p and p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
