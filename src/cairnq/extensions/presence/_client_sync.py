# generated from src/cairnq/extensions/presence/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's view of worker presence, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from ..._deprecated import renamed
from ...durations import Duration
from ...errors import CairnQError
from ...models import Task, UnservedTasks, WorkerInfo
from .._client_sync import ClientView
from . import _ops
from ._ops import ALIVE_WINDOW_MS

WorkerList = list[WorkerInfo]
UnservedList = list[UnservedTasks]


class SyncPresence:
    """``cq.presence``: the workers alive now, and the queued tasks none of them serves."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    def workers(
        self, *, within: Duration | None = None, within_ms: int | None = None
    ) -> WorkerList:
        """Workers alive now: cairnq workers seen within ``within``, and every lease holder.

        A cairnq worker records itself on its heartbeat timer and removes itself
        when it stops cleanly; workers of other SDKs appear through the running
        tasks they hold a live lease on.

        Args:
            within: How recent a cairnq worker's last heartbeat must be, a duration
                (``"5m"``, a ``timedelta``, seconds as a number; a minute).
            within_ms: The old spelling (int ms), kept for one release; it warns once.

        Returns:
            ``WorkerInfo`` per worker, sorted by id, each with its running tasks.

        Raises:
            InvalidArgument: a bad window.

        Example::

            for info in cq.presence.workers():
                print(info.worker_id, info.queues, [t.name for t in info.running])
        """
        window = _ops.within_of(within, within_ms, "cq.presence.workers")
        return self._client._run(_ops.workers(within_ms=window), write=False)

    def unserved(
        self,
        *,
        within: Duration | None = None,
        queue: str | None = None,
        within_ms: int | None = None,
    ) -> UnservedList:
        """Due queued tasks that no live cairnq worker serves, grouped by queue and name.

        A cairnq worker publishes the queues and task names it serves while it runs
        (the presence tables); a (queue, name) pair is unserved when no worker seen
        within ``within`` has that queue and that name. A worker that publishes
        no names (an older cairnq) counts as serving every name on its queues;
        workers of other SDKs publish nothing, so tasks they alone serve are listed.
        The read costs an index seek per queue and per distinct queued name, plus a
        count (capped at 10,000) per unserved pair; served backlogs are not read.

        Args:
            within: How recently a worker must have been seen, a duration (a
                minute, the dashboard's alive window).
            queue: Only this queue.
            within_ms: The old spelling (int ms), kept for one release; it warns once.

        Returns:
            One ``UnservedTasks`` per (queue, name), sorted by queue then name;
            empty when the database has no presence table (another SDK's schema).

        Raises:
            InvalidArgument: a bad window or queue.

        Example::

            for item in cq.presence.unserved():
                print(item.describe())   # emial.send on default: 3 queued, ...
        """
        queues = None if queue is None else [queue]
        window = _ops.within_of(within, within_ms, "cq.presence.unserved")
        op = _ops.unserved(within_ms=window, queues=queues)
        return self._client._run(op, write=False)


class _Checking(ClientView, Protocol):
    """A client that says once that its database cannot tell who serves what."""

    _told_no_presence: bool


class SyncPresenceClient:
    """The client's ``presence`` namespace, the deprecated flat reads (each the same as the
    namespace's method it names) and the check of ``submit(warn_unserved=True)``."""

    # Said once per client: the database cannot tell who serves what.
    _told_no_presence: bool = False

    @property
    def presence(self: ClientView) -> SyncPresence:
        """The workers alive now and what they serve: ``workers``, ``unserved``."""
        return SyncPresence(self)

    def workers(self: ClientView, *, within_ms: int = ALIVE_WINDOW_MS) -> WorkerList:
        """Deprecated: ``cq.presence.workers``, which see."""
        renamed("cq.workers()", "cq.presence.workers()")
        return SyncPresence(self).workers(within=timedelta(milliseconds=within_ms))

    def unserved(
        self: ClientView, *, within_ms: int = ALIVE_WINDOW_MS, queue: str | None = None
    ) -> UnservedList:
        """Deprecated: ``cq.presence.unserved``, which see."""
        renamed("cq.unserved()", "cq.presence.unserved()")
        window = timedelta(milliseconds=within_ms)
        return SyncPresence(self).unserved(within=window, queue=queue)

    def _check_served(self: _Checking, task: Task) -> None:
        """Warn when no live worker serves ``task`` (``submit(warn_unserved=True)``)."""
        from ._served import cannot_tell, check_failed, warn_unserved

        try:
            workers = self._run(_ops.serving(task.queue, task.name), write=False)
            served = None
            if workers == []:
                served = self._run(_ops.served(), write=False)
        except CairnQError as exc:
            # The task is stored: a failed check must not look like a failed submit.
            check_failed(task, exc)
            return
        if workers is None:
            if not self._told_no_presence:
                self._told_no_presence = True
                cannot_tell(self._where())
            return
        if not workers:
            warn_unserved(task, self._where(), served)
