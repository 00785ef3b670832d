"""A clock that tests move by hand."""

from __future__ import annotations

import threading

from .._clock import SYSTEM_CLOCK

__all__ = ["FakeClock"]


class FakeClock:
    """A clock that moves only when told to; pass it as ``clock=`` to a backend.

    Leases expire, delays elapse and retention cutoffs pass when the test
    advances the clock, not when it sleeps.

    Example::

        clock = FakeClock()
        cq = CairnQ.sqlite(tmp_path / "t.db", clock=clock)
        await cq.submit("later", delay_ms=60_000)
        clock.advance(60_000)
    """

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = SYSTEM_CLOCK.now_ms() if start_ms is None else int(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms`` milliseconds; returns the new time."""
        if ms < 0:
            raise ValueError("a FakeClock only moves forward")
        with self._lock:
            self._now += int(ms)
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = int(now_ms)
