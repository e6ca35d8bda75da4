"""Root conftest: pytester for the plugin's own tests (pytest_plugins belongs in the root conftest)."""

pytest_plugins = ["pytester"]
