"""A worker's row in ``cairnq_workers``: written on a timer of its own, deleted on a clean stop.

The row is what the dashboard's Workers page reads (``cq.presence.workers``); beside it,
the task names the worker serves (``cairnq_worker_names``, x0004), which tell
``submit(warn_unserved=True)``, ``top`` and the dashboard whether anything serves a
task. On a database without x0004 the row is written without names (logged once):
readers then count this worker as serving every name on its queues. On a
database without ``cairnq_workers`` (x0002) presence steps aside: one warning
line, then no writes at all. It is an
extension table: a write that fails (a database migrated without it, a busy
lock) never touches task work; it is reported once and tried again next time.
The row is refreshed every ``INTERVAL_S`` on a timer of its own, whatever the
heartbeat interval, so a worker stays within the dashboard's alive window; never
per task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ... import kernel
from ...backends import Backend
from ...kernel.periodic import ErrorHook, PeriodicJob
from ...protocol.steps import Op
from .._base import Part
from . import _ops
from ._orphans import OrphanWatch

log = logging.getLogger("cairnq.worker")

INTERVAL_S = 15.0
STOP_TIMEOUT_S = 2.0
DELETE_TIMEOUT_S = 1.0


class Presence:
    """Keeps one worker's row fresh while it runs: ``start`` writes it, ``job`` refreshes it.

    It runs in every worker, without a named lease: the row is this worker's own.
    """

    def __init__(
        self,
        backend: Backend,
        worker_id: str,
        queues: Sequence[str],
        concurrency: int,
        report: ErrorHook,
        *,
        names: Sequence[str] | None = None,
        after_beat: Callable[[], Awaitable[Any]] | None = None,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.backend = backend
        self.worker_id = worker_id
        self.queues = list(queues)
        self.names = None if names is None else sorted(names)
        # Whether the names table took this run's names (known once the first write lands).
        self.named = False
        self._started = False
        # Whether the database lacks cairnq_workers (x0002): then presence writes nothing.
        self.absent = False
        # Run after each refresh that lands (not the first write: workers starting
        # together have not all written theirs yet). With names and nothing else
        # given: log due tasks on these queues that no live worker serves.
        if after_beat is None and self.names is not None:
            after_beat = OrphanWatch(backend, worker_id, self.queues, self.names).check
        self.after_beat = after_beat
        self._after_failing = False
        self.concurrency = concurrency
        self.interval_s = interval_s
        self._report = report
        self._host = _hostname()
        self._pid = os.getpid()
        self._pending: asyncio.Task[None] | None = None
        self._failing = False
        # Whether the first refresh has looked for another process writing this row.
        self._shared_checked = False
        self.job = PeriodicJob(
            "cairnq.presence",
            self._refresh,
            interval_ms=max(1, round(interval_s * 1000)),
            on_error=report,
            phase="presence",
            context={"worker_id": worker_id},
        )

    def start(self) -> None:
        """Write the row now (and clear rows of workers long gone)."""
        self._pending = asyncio.ensure_future(self._first_write())

    async def _first_write(self) -> None:
        if not await self._table_present():
            return
        op = _ops.worker_start(
            self.worker_id, self.queues, self._host, self._pid, self.concurrency, self.names
        )
        try:
            self.named = await self.backend.arun(op, write=True)
        except Exception as exc:
            if not self._failing:
                self._failing = True
                self._report(exc, {"phase": "presence", "worker_id": self.worker_id})
            return
        self._started, self._failing = True, False
        if self.names is not None and not self.named:
            log.warning(
                "this database lacks migration %s, so this worker's task names are not "
                "published: readers count it as serving every name on its queues "
                "(run `cairnq migrate` to add it)",
                _ops.WORKER_NAMES_MIGRATION,
                extra={"worker_id": self.worker_id, "phase": "presence"},
            )

    async def _table_present(self) -> bool:
        """Whether the database has ``cairnq_workers``; when not, say so in one line."""
        try:
            applied = await self.backend.arun(kernel.applied_migrations(), write=False)
        except Exception:
            return True  # the write that follows reports what is wrong
        if _ops.WORKERS_MIGRATION in applied:
            return True
        self.absent = True
        log.warning(
            "this database lacks table cairnq_workers (migration %s), so this worker "
            "publishes no presence and no task names: it shows only through the tasks it "
            "runs (run `cairnq migrate` to add it)",
            _ops.WORKERS_MIGRATION,
            extra={"worker_id": self.worker_id, "phase": "presence"},
        )
        return False

    async def run(self) -> None:
        """Refresh the row every ``interval_s`` until cancelled (what ``job.start()`` runs)."""
        await self.job.run()

    async def _refresh(self) -> None:
        """Write the row in the background, unless the last write is still in flight."""
        if self.absent or (self._pending is not None and not self._pending.done()):
            return
        if not self._started:
            # The first write failed: try it whole again, names included.
            self._pending = asyncio.ensure_future(self._first_write())
            return
        if self.named and self.names is not None:
            op = _ops.worker_beat_named(
                self.worker_id, self.queues, self._host, self._pid, self.concurrency, self.names
            )
        else:
            op = _ops.worker_beat(
                self.worker_id, self.queues, self._host, self._pid, self.concurrency
            )
        check, self._shared_checked = not self._shared_checked, True
        self._start_write(op, check_shared=check)

    def _start_write(self, op: Op[None], *, check_shared: bool = False) -> None:
        self._pending = asyncio.ensure_future(self._write(op, check_shared=check_shared))

    async def _shared(self) -> None:
        """Warn once when another process wrote this worker's row since its first write:
        two live workers share the id (a crashed run writes nothing, so a restart
        under the same id is quiet)."""
        found = await self.backend.arun(_ops.worker_row(self.worker_id), write=False)
        if found is None or (found.host, found.pid) == (self._host, self._pid):
            return
        log.warning(
            "another worker runs under worker id %s (host %s, pid %s): presence, the "
            "dashboard and the logs cannot tell the two apart; give each worker its own "
            "id (Worker(worker_id=...)) or leave it unset for a fresh one per run",
            self.worker_id,
            found.host or "unknown",
            found.pid if found.pid is not None else "unknown",
            extra={"worker_id": self.worker_id, "phase": "presence"},
        )

    async def _write(self, op: Op[None], *, check_shared: bool = False) -> None:
        try:
            if check_shared:
                await self._shared()
            await self.backend.arun(op, write=True)
        except Exception as exc:
            if not self._failing:
                self._failing = True
                self._report(exc, {"phase": "presence", "worker_id": self.worker_id})
            return
        self._failing = False
        if self.after_beat is not None:
            try:
                await self.after_beat()
            except Exception as exc:
                if not self._after_failing:
                    self._after_failing = True
                    self._report(exc, {"phase": "orphans", "worker_id": self.worker_id})
                return
            self._after_failing = False

    async def stop(self, *, wait: bool = True) -> None:
        """Stop refreshing the row, then delete it (``close``)."""
        await self.job.stop(wait=wait)
        await self.close()

    async def close(self) -> None:
        """Delete the row: this worker stopped cleanly and no longer serves its queues.

        Called once ``job`` has stopped.
        """
        # One budget for both writes: a database that stopped answering delays a stop
        # by at most STOP_TIMEOUT_S here.
        deadline = time.monotonic() + STOP_TIMEOUT_S
        # A write still in flight must land before the delete, or it would recreate the
        # row; and only once the first write is over is it known whether the table exists.
        if self._pending is not None and not self._pending.done():
            await asyncio.wait({self._pending}, timeout=STOP_TIMEOUT_S)
        if self.absent:
            return
        # The delete is tried even when the refresh used the budget up: a row left
        # behind would show a stopped worker as alive for a whole window.
        remaining = max(deadline - time.monotonic(), DELETE_TIMEOUT_S)
        gone = _ops.worker_gone_named if self.named else _ops.worker_gone
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self.backend.arun(gone(self.worker_id), write=True), timeout=remaining
            )


def _hostname() -> str | None:
    try:
        return socket.gethostname()[:255] or None
    except OSError:
        return None


class PresenceComponent(Part):
    """Prepare writes the worker's row in the background; the job refreshes it and
    ``close`` deletes it."""

    name = "presence"
    # The row says the worker serves its queues until its calls have drained.
    stops_after_drain = True

    def __init__(self, presence: Presence) -> None:
        self.presence = presence
        self.job = presence.job

    async def prepare(self) -> None:
        self.presence.start()

    async def close(self) -> None:
        await self.presence.close()
