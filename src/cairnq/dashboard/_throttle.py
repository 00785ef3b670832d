"""Rate limiting of the dashboard's task listings: one query at a time, a short shared cache.

Every open Tasks page asks for its listing again each refresh interval, and a
listing can be the most expensive read the dashboard makes. With many tabs open
(or one URL requested in a loop) each request would reach the database. Here
list queries of one dashboard wait their turn, so at most one runs at a time,
and a query equal to one answered less than a refresh interval ago gets that
answer instead of running again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 32


class ListThrottle(Generic[T]):
    """One list query in flight at a time; identical queries within ``ttl_ms`` share an answer.

    ``clock`` returns monotonic seconds (``time.monotonic``); tests pass their own.
    Only answers are kept: a query that raises is not cached, and the next one
    equal to it runs again.
    """

    def __init__(
        self,
        ttl_ms: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.ttl_s = ttl_ms / 1000
        self.clock = clock
        self.max_entries = max_entries
        self._answers: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()
        self._lock: asyncio.Lock | None = None

    def _fresh(self, key: Hashable) -> tuple[T] | None:
        """``(answer,)`` when ``key`` was answered less than ``ttl_ms`` ago, else ``None``."""
        entry = self._answers.get(key)
        if entry is None:
            return None
        stamp, value = entry
        if self.clock() - stamp >= self.ttl_s:
            del self._answers[key]
            return None
        return (value,)

    async def get(self, key: Hashable, load: Callable[[], Awaitable[T]]) -> T:
        """The answer for ``key``: a recent one, or ``await load()`` once no other query runs."""
        hit = self._fresh(key)
        if hit is not None:
            return hit[0]
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            # An equal query may have been answered while this one waited.
            hit = self._fresh(key)
            if hit is not None:
                return hit[0]
            answer = await load()
            self._answers[key] = (self.clock(), answer)
            self._answers.move_to_end(key)
            while len(self._answers) > self.max_entries:
                self._answers.popitem(last=False)
            return answer

    def clear(self) -> None:
        """Forget every answer (after an action changed tasks)."""
        self._answers.clear()
