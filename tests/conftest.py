import os

# Before any jax import: the CPU backend gets two devices, as a small multi-device host would, so
# the per-device paths run. pytester's subprocesses inherit it.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

# Imported once for the whole session: pytester's in-process runs restore sys.modules after each
# run, and a second import of jaxlib's native modules in one process aborts it.
import jax  # noqa: F401
import jax.numpy  # noqa: F401
import optax  # noqa: F401

collect_ignore = ["planted"]  # suites run inside pytester by test_leaks.py
