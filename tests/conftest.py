import importlib
import os
import pkgutil
from pathlib import Path

# Before any jax import: the CPU backend gets two devices, as a small multi-device host would, so
# the per-device paths run. pytester's subprocesses inherit it.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

# The suite's new processes (pytest-xdist's workers, a planted run's workers, an interpreter a test
# starts) write and read bytecode as an installed package does: under PYTHONDONTWRITEBYTECODE=1 each
# of them compiled and assertion-rewrote pytest-tpumem's modules again (~1 s of CPU a process).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Imported once for the whole session: pytester's in-process runs restore sys.modules after each
# run, and a second import of jaxlib's native modules in one process aborts it.
import jax  # noqa: F401
import jax.numpy  # noqa: F401
import optax  # noqa: F401

# And the plugin's every module, for the same reason: a module first imported inside an in-process
# run would be dropped after it and imported again by the next, its classes new ones that the
# modules kept all along (telling.results' dispatch on a result's type) do not know.
import pytest_tpumem  # noqa: E402

for _module in pkgutil.walk_packages(pytest_tpumem.__path__, "pytest_tpumem."):
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)

collect_ignore = ["planted"]  # suites run inside pytester by test_leaks.py


import fresh  # noqa: E402
import pytest  # noqa: E402

from pytest_tpumem.decisions.entry import Entry, Report  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "interpreter: pytester's subprocess runs start a new interpreter, not a fork (tests/fresh.py)"
    )


@pytest.fixture
def pytester(pytester, request):
    """pytester, whose ``runpytest_subprocess`` forks a server that has imported jax, pytest and the
    plugins rather than start an interpreter (tests/fresh.py): a new process without ~1.3 s of CPU of
    imports. ``TPUMEM_TESTS_INTERPRETER=1`` starts an interpreter for every run, as pytester does."""
    if not os.environ.get("TPUMEM_TESTS_INTERPRETER") and not request.node.get_closest_marker("interpreter"):
        pytester.runpytest_subprocess = lambda *args, timeout=None: fresh.forked(pytester, *args, timeout=timeout)
    return pytester


MB = 10**6


class Wire:
    """Check records and reports as the plugin writes them, built by hand for tests of what reads
    them (the summary, compare, show, merge): the ``wire`` fixture."""

    @staticmethod
    def context(**kw):
        """A report's context: one CPU process, started at a fixed time; ``kw`` adds or replaces keys."""
        return {
            "platform": "cpu",
            "device_kind": "cpu",
            "device_count": 1,
            "process_index": 0,
            "process_count": 1,
            "started": "2025-05-01T10:00:00+00:00",
            "hostname": "h",
            "pid": 1,
            **kw,
        }

    @staticmethod
    def peak(n, device="cpu:0", budget=None, verdict="ok"):
        """A budget's record (a peak's, without a budget), its peak ``n`` bytes on ``device``."""
        return {
            "check": "budget" if budget else "peak",
            "verdict": verdict,
            "budget": budget,
            "peaks": {device: n},
            "witness": "body-end",
        }

    @staticmethod
    def leak(growth, threshold=100 * MB, verdict="ok"):
        """A leak check's record: ``growth`` bytes per iteration on cpu:0's live arrays."""
        return {
            "check": "leak",
            "verdict": verdict,
            "growth": growth,
            "threshold": threshold,
            "growth_source": "cpu:0 live arrays",
            "iterations": 3,
            "warmup": 1,
        }

    @classmethod
    def report(cls, tests, **context) -> Report:
        """A run's report: ``tests`` maps a test id to its records (each test passed)."""
        return Report(cls.context(**context), {n: Entry.of(records, "passed") for n, records in tests.items()})


@pytest.fixture
def wire():
    return Wire


@pytest.fixture
def fake(pytester, monkeypatch):
    """A pytester whose runs (a fresh process each: absolute figures) see fake accelerators
    (tests/fakedevice.py): ``fake(allocator="cuda_async", limit=...)`` takes install's arguments."""
    import fakedevice

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent), prepend=os.pathsep)

    def setup(**kwargs):
        pytester.makeconftest(fakedevice.CONFTEST.format(kwargs=kwargs))
        return pytester

    return setup
