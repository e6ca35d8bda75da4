"""Sphinx configuration of pytest-tpumem's documentation (MyST Markdown, the furo theme).

Built by .ci/run with warnings as errors: ``sphinx-build -W --keep-going -b html docs docs/_build/html``.
Two parts are made at build time and never edited by hand (docs/_ext/tpumem_docs.py):
docs/reference/ (options, markers, fixtures and the command line, from the code) and docs/_outputs/
(every block of real output, from the commands that print it: docs/outputs.py).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, os.path.dirname(HERE))  # the package from this checkout, whatever is installed

from pytest_tpumem import __version__  # noqa: E402

project = "pytest-tpumem"
author = "the pytest-tpumem authors"
copyright = "2026, the pytest-tpumem authors"
release = version = __version__

extensions = ["myst_parser", "tpumem_docs"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "_outputs", "validation/out", "Thumbs.db", ".DS_Store"]
root_doc = "index"

html_theme = "furo"
html_title = f"pytest-tpumem {release}"
html_static_path: list[str] = []
html_copy_source = False
