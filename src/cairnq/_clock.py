"""Where time comes from.

Statements take ``now_ms``. On SQLite the writer's clock supplies it; on
PostgreSQL ``None`` means the database clock, so hosts share one timeline. A
``FakeClock`` (see ``cairnq.testing``) makes time move only when a test says so.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of epoch milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The host's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_CLOCK = SystemClock()
