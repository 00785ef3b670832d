"""Whether a database has an extension's tables, as a client or a store last read it."""

from __future__ import annotations

import time

# How long a "not there" answer stands before the next operation reads the ledger again.
RECHECK_S = 1.0


class Readiness:
    """An extension's readiness, read from the migration ledger at most once a second.

    Once seen ready it stays so (migrations are never undone); while it is not, an
    operation that asks reads the ledger again only when the last answer is over
    ``RECHECK_S`` old, so a database without the extension costs its operations
    no extra read each time. Tables added meanwhile (``cairnq migrate`` while the
    process runs) are noticed within that second.
    """

    __slots__ = ("_read_at", "ready")

    def __init__(self) -> None:
        self.ready = False
        self._read_at: float | None = None

    def stale(self) -> bool:
        """Whether the ledger should be read (``note`` its answer) before trusting ``ready``."""
        if self.ready:
            return False
        return self._read_at is None or time.monotonic() - self._read_at >= RECHECK_S

    def note(self, ready: bool) -> bool:
        """Record what the ledger said; returns it."""
        self.ready = self.ready or ready
        self._read_at = time.monotonic()
        return self.ready
