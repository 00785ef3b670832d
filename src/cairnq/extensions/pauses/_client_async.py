"""The client's pauses: ``cq.pauses``, and the flat methods before it (kept for one
release, each warning once), async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._deprecated import renamed
from ...models import TaskDef
from .._client_async import ClientView

if TYPE_CHECKING:
    from ._ops import Pause, PauseList


class AsyncPauses:
    """``cq.pauses``: queues and task names paused across the deployment, claimed by
    no cairnq worker until resumed."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def pause_queue(self, queue: str, *, by: str | None = None, until: Any = None) -> Pause:
        """Pause a queue across the deployment: no cairnq worker claims from it until resumed,
        or until ``until`` when given.

        Workers honour it within about a second; calls already running finish.
        Tasks can still be submitted to it. Pausing a paused queue keeps its first
        pause (when, by whom); the latest call says when it ends.

        Args:
            queue: The queue.
            by: Who paused it, kept with the pause (shown by ``cairnq paused``).
            until: When the pause ends by itself: an aware ``datetime``, or a duration
                from now (``timedelta``, ``"10m"``, a number of seconds; at least 1 s),
                by the database's clock. ``None`` (the default): until resumed.

        Returns:
            The pause (the first one, when it was paused already), with ``resume_at_ms``.

        Raises:
            InvalidArgument: a bad queue name or ``until`` (a naive ``datetime``, a
                ``date``, a string without a unit, a duration under 1 s, ...).
            SchemaIncomplete: the database lacks the flow-control tables (``cairnq migrate``).

        Example::

            await cq.pauses.pause_queue("emails", by="ops: provider outage", until="30m")
        """
        from . import _ops

        pause, _ = await self._client._run(_ops.pause("queue", queue, by, until), write=True)
        return pause

    async def resume_queue(self, queue: str) -> Pause | None:
        """Resume a paused queue; ``None`` when it was not paused.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.
        """
        from . import _ops

        return await self._client._run(_ops.resume("queue", queue), write=True)

    async def pause_task(
        self, name: str | TaskDef[Any, Any], *, by: str | None = None, until: Any = None
    ) -> Pause:
        """Pause a task name across the deployment, in every queue (``by`` and ``until``
        as ``pause_queue``'s, which see).

        Example::

            await cq.pauses.pause_task("invoice.charge", until=timedelta(hours=1))
        """
        from . import _ops

        target = name.name if isinstance(name, TaskDef) else name
        pause, _ = await self._client._run(_ops.pause("name", target, by, until), write=True)
        return pause

    async def resume_task(self, name: str | TaskDef[Any, Any]) -> Pause | None:
        """Resume a paused task name; ``None`` when it was not paused."""
        from . import _ops

        target = name.name if isinstance(name, TaskDef) else name
        return await self._client._run(_ops.resume("name", target), write=True)

    async def list(self) -> PauseList:
        """Every paused queue and task name: queues first, each by name.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.
        """
        from . import _ops

        return await self._client._run(_ops.paused(), write=False)


class AsyncPausesClient:
    """The client's ``pauses`` namespace, and its flat methods (each the same as the
    namespace's method it names, deprecated: it warns once, ``CairnQDeprecationWarning``)."""

    @property
    def pauses(self: ClientView) -> AsyncPauses:
        """Queues and task names paused across the deployment: ``pause_queue``,
        ``resume_queue``, ``pause_task``, ``resume_task``, ``list``."""
        return AsyncPauses(self)

    async def pause_queue(self: ClientView, queue: str, *, by: str | None = None) -> Pause:
        """Deprecated: ``cq.pauses.pause_queue``, which see."""
        renamed("cq.pause_queue(...)", "cq.pauses.pause_queue(...)")
        return await AsyncPauses(self).pause_queue(queue, by=by)

    async def resume_queue(self: ClientView, queue: str) -> Pause | None:
        """Deprecated: ``cq.pauses.resume_queue``."""
        renamed("cq.resume_queue(...)", "cq.pauses.resume_queue(...)")
        return await AsyncPauses(self).resume_queue(queue)

    async def pause_task(
        self: ClientView, name: str | TaskDef[Any, Any], *, by: str | None = None
    ) -> Pause:
        """Deprecated: ``cq.pauses.pause_task``."""
        renamed("cq.pause_task(...)", "cq.pauses.pause_task(...)")
        return await AsyncPauses(self).pause_task(name, by=by)

    async def resume_task(self: ClientView, name: str | TaskDef[Any, Any]) -> Pause | None:
        """Deprecated: ``cq.pauses.resume_task``."""
        renamed("cq.resume_task(...)", "cq.pauses.resume_task(...)")
        return await AsyncPauses(self).resume_task(name)

    async def paused(self: ClientView) -> PauseList:
        """Deprecated: ``cq.pauses.list``."""
        renamed("cq.paused()", "cq.pauses.list()")
        return await AsyncPauses(self).list()
