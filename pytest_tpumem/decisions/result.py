"""What every check's result offers: whether it failed, its verdict, its failure text, its report
section and its summary row. The text and the row are built in telling/; a result names the
functions there that build its own."""

from __future__ import annotations

from typing import Any, ClassVar


class Told:
    """Mixin for a frozen result: ``message``, ``section`` and ``row`` from the telling layer."""

    _message: ClassVar[str]  # a function of telling/text.py
    _section: ClassVar[str]  # a function of telling/text.py
    _row: ClassVar[str]  # a function of telling/rows.py

    @property
    def message(self) -> str:
        """The failure text (empty where the check passed)."""
        from ..telling import text

        return getattr(text, self._message)(self)

    def message_at(self, verbosity: int) -> str:
        """The failure text at pytest's verbosity: -q (below 0) shorter, -v (above 0) longer."""
        from ..telling import text

        fn = getattr(text, self._message)
        return fn(self, verbosity) if "verbosity" in fn.__code__.co_varnames else fn(self)

    @property
    def section(self) -> str:
        """The long form, for the test's report section."""
        from ..telling import text

        return getattr(text, self._section)(self)

    @property
    def row(self) -> dict[str, Any]:
        """A JSON-able record for the summary (bytes as integers)."""
        from ..telling import rows

        return getattr(rows, self._row)(self)
