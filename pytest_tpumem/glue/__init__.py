"""The pytest glue: options, markers, a test's plan, the fixtures and the active per-run object."""
