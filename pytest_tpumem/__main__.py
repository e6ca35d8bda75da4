"""``python -m pytest_tpumem``: see cli.py."""

from .cli import main

raise SystemExit(main())
