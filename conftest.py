"""Root conftest: pytester for the plugin's own tests, two CPU devices so per-device paths run."""

import os

# Before any jax import: the CPU backend gets two devices, as a small multi-device host would.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

pytest_plugins = ["pytester"]
