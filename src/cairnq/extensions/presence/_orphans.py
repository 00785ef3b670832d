"""Orphaned tasks on a worker's queues: due tasks of names no live worker serves.

A task submitted under a name nobody handles (a typo, a worker not deployed yet)
is never claimed. The worker that serves its queue is the process an operator is
watching, so it says so: once per (queue, name) per run, at warning, naming the
name, the queue, how many tasks wait and what this worker does serve. The check
runs after each presence refresh (``Presence.after_beat``), when this worker's
own row is fresh; it reads ``reads.unserved`` for the worker's queues, so a name
another live worker serves is never reported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ...backends import Backend
from ...models import UnservedTasks
from . import _ops

log = logging.getLogger("cairnq.worker")


class OrphanWatch:
    """Logs due tasks on ``queues`` that no live worker serves, once per (queue, name)."""

    def __init__(
        self,
        backend: Backend,
        worker_id: str,
        queues: Sequence[str],
        names: Sequence[str],
        *,
        within_ms: int = _ops.ALIVE_WINDOW_MS,
    ) -> None:
        self.backend = backend
        self.worker_id = worker_id
        self.queues = list(queues)
        self.names = sorted(names)
        self.within_ms = within_ms
        self.told: set[tuple[str, str]] = set()

    async def check(self) -> list[UnservedTasks]:
        """Read the orphans on this worker's queues and log the new ones; returns those logged."""
        found = await self.backend.arun(
            _ops.unserved(within_ms=self.within_ms, queues=self.queues), write=False
        )
        fresh = [
            item
            for item in found
            if item.name not in self.names and (item.queue, item.name) not in self.told
        ]
        for item in fresh:
            self.told.add((item.queue, item.name))
            log.warning(
                "queue %r holds %s due task%s named %r that no live worker serves, so nothing "
                "claims them (this worker serves %s on %s); a typo in the task name, or a "
                "worker not running?",
                item.queue,
                f"{item.count}+" if item.capped else item.count,
                "" if item.count == 1 else "s",
                item.name,
                ", ".join(self.names),
                ", ".join(self.queues),
                extra={
                    "worker_id": self.worker_id,
                    "queue": item.queue,
                    "task_name": item.name,
                    "count": item.count,
                },
            )
        return fresh
