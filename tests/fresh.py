"""A new pytest process for a planted suite, forked from a server that has only imported.

``pytester.runpytest_subprocess`` starts ``python -m pytest``: each run pays the interpreter's start
and the imports of jax, pytest and every installed pytest plugin (~1.3 s of CPU here, hypothesis's
plugin alone ~0.5 s) before its suite runs. The point of a new process in these tests is a backend,
memory and a crash of its own, not new imports; so the run is a fork of a server (multiprocessing's
forkserver) that imported those modules once, as a run imports them (tests/fresh_server.py), and
started no jax backend (a fork has no XLA threads to deadlock). The child runs ``pytest.main`` as
``python -m pytest`` in the pytester directory would: that directory as the working directory and
first on ``sys.path`` and ``PYTHONPATH``, the environment pytester would pass, stdout and stderr to
files, its exit status (or minus the signal that killed it) as the result's ``ret``.

What the fork inherits that a new interpreter would read again is set again: the environment,
``PYTHONPATH``'s entries first on ``sys.path``, ``tempfile``'s directory (``TMPDIR``). An editable
install of pytest-tpumem is left for each run to import (tests/fresh_server.py). A run's
pytest-xdist workers are forked too (tests/fresh_workers.py).

A new interpreter is still started, as pytester starts it, where a fork could not be the same:
- the test is marked ``interpreter`` (what a run imports is the point);
- a variable read when jax is imported or the interpreter starts differs from the server's
  (``JAX_*``, ``XLA_FLAGS``, ``TF_CPP_*``, ``PYTHON*`` but ``PYTHONPATH``);
- ``TPUMEM_TESTS_INTERPRETER=1`` is set (every run, to check that both ways agree).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import sys
import tempfile
import time
from pathlib import Path

from _pytest.pathlib import make_numbered_dir
from _pytest.pytester import Pytester, RunResult

# Read when jax or jaxlib is imported or starts logging, or by the interpreter as it starts: a run
# that sets one other than the server's gets a new interpreter.
READ_AT_IMPORT = ("JAX_", "XLA_FLAGS", "TF_CPP_", "PYTHON")
BASE_ENV = dict(os.environ)  # the test session's environment, before any test changes it
HERE = os.path.dirname(os.path.abspath(__file__))

_context = None


def _read_at_import(environ) -> dict[str, str]:
    # PYTHONPATH is not among them: the fork puts its entries on sys.path as the interpreter would
    return {k: v for k, v in environ.items() if k.startswith(READ_AT_IMPORT) and k != "PYTHONPATH"}


def _child(cwd: str, env: dict[str, str], args: list[str], out: str, err: str) -> None:
    """In the fork: ``python -m pytest ARGS`` run in ``cwd`` with ``env``; exits with its status."""
    for fd, path in ((1, out), (2, err)):
        new = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(new, fd)
        os.close(new)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, errors="backslashreplace")
    sys.stdin = open(os.devnull)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # read from TMPDIR again, as a new interpreter would
    # as `python -m` puts the working directory first, then PYTHONPATH's entries, then its own
    import fresh_server

    sys.path[:] = [cwd, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *fresh_server.BASE_PATH]
    sys.argv = [sys.executable, *args]
    import fresh_workers
    import pytest

    fresh_workers.start()

    try:
        code = int(pytest.main(args))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _server():
    """The fork server, started once, with the session's environment as it was before any test."""
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        # The server imports what it preloads from its own sys.path (multiprocessing passes it no
        # other, and a failed preload is silently skipped): this directory is put on it through
        # PYTHONPATH; a run's sys.path leaves it out (fresh_server.BASE_PATH).
        ctx.set_forkserver_preload(["fresh_server"])
        now = dict(os.environ)
        os.environ.clear()
        os.environ.update(BASE_ENV)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, BASE_ENV.get("PYTHONPATH", "")]))
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(now)
        _context = ctx
    return _context


def forked(pytester: Pytester, *args, timeout: float | None = None) -> RunResult:
    """``pytester.runpytest_subprocess(*args, timeout=...)``, run in a fork of the server."""
    __tracebackhide__ = True
    if _read_at_import(os.environ) != _read_at_import(BASE_ENV):
        return Pytester.runpytest_subprocess(pytester, *args, timeout=timeout)
    ctx = _server()
    basetemp = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
    full = [f"--basetemp={basetemp}", *(os.fspath(a) for a in args)]
    for plugin in pytester.plugins:
        if not isinstance(plugin, str):
            raise ValueError(f"a plugin object cannot be passed to a new process; name it: {plugin}")
        full = ["-p", plugin, *full]
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    out, err = pytester.path / "stdout", pytester.path / "stderr"
    print("running (forked): pytest", *full)
    print("     in:", Path.cwd())
    start = time.perf_counter()
    proc = ctx.Process(target=_child, args=(os.getcwd(), env, full, str(out), str(err)))
    proc.start()
    proc.join(timeout)
    if proc.exitcode is None:
        proc.kill()
        proc.join()
        raise pytester.TimeoutExpired(f"{timeout} second timeout expired running: pytest {full}")
    duration = time.perf_counter() - start
    outlines = out.read_text(encoding="utf8", errors="replace").splitlines()
    errlines = err.read_text(encoding="utf8", errors="replace").splitlines()
    for line in outlines:
        print(line)
    for line in errlines:
        print(line, file=sys.stderr)
    return RunResult(proc.exitcode, outlines, errlines, duration)
