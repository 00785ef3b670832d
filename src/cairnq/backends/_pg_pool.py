"""Which idle connection a psycopg pool cairnq makes hands out next: the one returned
last, so a worker's statements stay on connections whose plans are made."""

from __future__ import annotations

import collections
from typing import Any


class MostRecentFirst(collections.deque[Any]):
    """A pool's idle connections, the one returned last first in line.

    psycopg_pool hands out the idle connection at the left of this deque and puts a
    returned one at the right: the connection idle longest goes first, so every
    connection of the pool runs every statement in turn, and PostgreSQL plans each
    statement anew on each connection until psycopg prepares it and the server settles
    on a generic plan (about ten runs per statement and connection). Returned to the
    left, the connection used last is handed out again: the few statements a worker
    runs at once keep the same few connections, their plans ready, and the others stay
    idle. (The pool's shrinking, which closes one connection at the left after a
    ``max_idle`` with connections to spare, then closes the connection used last: one
    connection and its plans made again per ``max_idle``.)
    """

    def append(self, conn: Any) -> None:
        self.appendleft(conn)


def hand_out_most_recent_first(pool: Any) -> None:
    """Make ``pool`` (a psycopg_pool pool, not yet open) hand out the connection returned
    last (``MostRecentFirst``); a pool built otherwise is left as it is."""
    if type(getattr(pool, "_pool", None)) is collections.deque:
        pool._pool = MostRecentFirst(pool._pool)
