"""How it is told: every sentence the user reads (text.py) and the JSON-able rows and summary table (rows.py)."""
