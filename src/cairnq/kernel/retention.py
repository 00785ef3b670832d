"""Retention: delete finished tasks once they are older than a cutoff, in small batches.

A ``Retention`` on a ``CairnQ`` or a ``Worker`` starts a sweeper: it waits one
interval, then for each rule purges ``limit`` rows at a time (each batch its own
short transaction) until a batch comes back short, and waits again. Only one
process sweeps a database at a time (a named lease in ``cairnq_locks``); the
others skip their turn. On a database without ``cairnq_locks`` (x0001, opened
with ``migrate=False``) the sweep still runs, saying so once: each batch takes
a lock in its own transaction instead (PostgreSQL's transaction-level advisory
lock; SQLite's write transaction): no two batches run at once, though several
processes' sweeps may interleave batch by batch; a process that finds the lock
taken skips its turn. ``stop()`` is prompt whatever the sweeper is doing, and
a stopped sweeper can be started again.

A sweeper takes a backend or a store (``RetentionSweeper(cq.store, policy)``, as
the reference SDK's): over a store whose ``purge`` is replaced (set on the
instance or overridden by a subclass), each batch is that ``purge``; otherwise
it is the same statement run on the store's backend. The sweep is written once
(``_sweep.py``); ``RetentionSweeper`` (``_sweeper_async.py``) runs it on the
event loop, and ``SyncRetentionSweeper``, generated from it, from a daemon
thread (a replaced ``purge``'s coroutine is run to its end on a loop of its own
there).
"""

from __future__ import annotations

from ._sweep import DEFAULT_INTERVAL_MS as DEFAULT_INTERVAL_MS
from ._sweep import DEFAULT_LIMIT as DEFAULT_LIMIT
from ._sweep import LOCK_NAME as LOCK_NAME
from ._sweep import PurgingStore as PurgingStore
from ._sweep import Retention as Retention
from ._sweep import RetentionRule as RetentionRule
from ._sweep import RetentionRules as RetentionRules
from ._sweeper_async import RetentionSweeper as RetentionSweeper
from ._sweeper_sync import SyncRetentionSweeper as SyncRetentionSweeper
