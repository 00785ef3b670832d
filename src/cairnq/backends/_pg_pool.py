"""Which idle connection a psycopg pool cairnq makes hands out next: the one returned
last, so a worker's statements stay on connections whose plans are made; and which one
the pool's shrinking closes: the one idle longest."""

from __future__ import annotations

import collections
import sys
from typing import Any

# The psycopg_pool method (of both pools) that takes the connection it closes from the
# left of the deque, where it takes the one it hands out too.
_SHRINK = "_shrink_pool"


class MostRecentFirst(collections.deque[Any]):
    """A pool's idle connections, the one returned last first in line.

    psycopg_pool hands out the idle connection at the left of this deque and puts a
    returned one at the right: the connection idle longest goes first, so every
    connection of the pool runs every statement in turn, and PostgreSQL plans each
    statement anew on each connection until psycopg prepares it and the server settles
    on a generic plan (about ten runs per statement and connection). Returned to the
    left, the connection used last is handed out again: the few statements a worker
    runs at once keep the same few connections, their plans ready. The others stay
    idle at the right, where the pool's shrinking (one connection per ``max_idle``
    while connections go unused) takes the one it closes: the connection idle longest,
    as before.
    """

    def append(self, conn: Any) -> None:
        self.appendleft(conn)

    def popleft(self) -> Any:
        if sys._getframe(1).f_code.co_name == _SHRINK:
            return self.pop()
        return super().popleft()


def hand_out_most_recent_first(pool: Any) -> None:
    """Make ``pool`` (a psycopg_pool pool, not yet open) hand out the connection returned
    last and shrink by the one idle longest (``MostRecentFirst``); a pool built otherwise
    is left as it is."""
    if type(getattr(pool, "_pool", None)) is collections.deque and hasattr(pool, _SHRINK):
        pool._pool = MostRecentFirst(pool._pool)
