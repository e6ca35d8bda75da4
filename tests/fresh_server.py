"""Imported once, by the fork server of tests/fresh.py only: what every run would import, imported
as a run imports it. pytest is run once with no tests (in an empty directory, no conftest), so that
its assertion rewriting hook imports every installed plugin and pytest-tpumem's modules as it would
in a run (a plugin module imported before pytest marks it for rewriting would warn in every run)."""

import contextlib
import io
import os
import pkgutil
import tempfile

import jax  # noqa: F401
import jax.numpy  # noqa: F401
import numpy  # noqa: F401
import pytest


class _ImportAll:
    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config):
        import pytest_tpumem

        for m in pkgutil.walk_packages(pytest_tpumem.__path__, "pytest_tpumem."):
            if not m.name.endswith("__main__"):
                __import__(m.name)
        return 0


with tempfile.TemporaryDirectory() as _empty, contextlib.redirect_stdout(io.StringIO()):
    _cwd = os.getcwd()
    os.chdir(_empty)
    try:
        pytest.main(["--noconftest", "-p", "no:cacheprovider"], plugins=[_ImportAll()])
    finally:
        os.chdir(_cwd)
