"""The suite's own way of starting planted runs (tests/fresh.py, tests/fresh_workers.py): a forked run
and its forked pytest-xdist workers see what a new interpreter would, and a worker that dies is told
as xdist tells it of a new interpreter's."""

import json

import pytest
from _pytest.pytester import Pytester

SEEN = """
import json, os, sys
import jax

def test_{n}():
    with open(f"seen-{{os.environ['PYTEST_XDIST_WORKER']}}-{n}.json", "w") as f:
        json.dump(
            {{
                "argv0": sys.argv[0],
                "path0": sys.path[0],
                "cwd": os.getcwd(),
                "mine": os.environ.get("TPUMEM_TESTS_SEEN"),
                "dont_write_bytecode": sys.dont_write_bytecode,
                "backends_started": bool(jax._src.xla_bridge._backends),
                "stdin_is_null": os.path.samefile("/proc/self/fd/0", os.devnull),
            }},
            f,
        )
"""


def _seen(pytester, run):
    for old in pytester.path.glob("seen-*.json"):
        old.unlink()
    result = run(pytester, "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    return sorted(json.loads(p.read_text()).items() for p in pytester.path.glob("seen-*.json"))


def test_a_forked_runs_workers_see_what_a_new_interpreters_workers_see(pytester, monkeypatch):
    for n in range(4):
        pytester.makepyfile(**{f"test_{n}": SEEN.format(n=n)})
    monkeypatch.setenv("TPUMEM_TESTS_SEEN", "yes")
    forked = _seen(pytester, lambda p, *a: p.runpytest_subprocess(*a))
    new = _seen(pytester, Pytester.runpytest_subprocess)
    assert forked == new
    assert dict(forked[0]) == {
        "argv0": "-c",
        "path0": str(pytester.path),  # xdist's worker puts its rootdir first
        "cwd": str(pytester.path),
        "mine": "yes",
        "dont_write_bytecode": False,
        "backends_started": False,
        "stdin_is_null": True,
    }


CRASH = """
import os

def test_dies():
    os._exit(3)

def test_lives():
    pass
"""


@pytest.mark.parametrize("signal", [None, 9], ids=["exit", "killed"])
def test_a_worker_that_dies_is_told_as_a_new_interpreters_would_be(pytester, signal):
    body = CRASH if signal is None else CRASH.replace("os._exit(3)", f"os.kill(os.getpid(), {signal})")
    pytester.makepyfile(test_crash=body)
    args = ("-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider")
    forked = pytester.runpytest_subprocess(*args)
    new = Pytester.runpytest_subprocess(pytester, *args)
    for result in (forked, new):
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'test_crash.py::test_dies'*"])
