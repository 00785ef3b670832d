"""The client's snoozes: ``cq.snooze``, and the flat method before it (kept for one
release, warning once), async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from ..._deprecated import renamed
from .._client_async import ClientView
from . import _ops
from ._ops import Snoozes


class AsyncSnooze:
    """``cq.snooze``: what tasks' snoozes (``ctx.snooze``, ``raise Snooze(...)``) left."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def get(self, task_id: str) -> Snoozes | None:
        """How many times a task snoozed, and its latest snooze; ``None`` when it never did.

        A snoozed task is ``queued`` with ``run_at_ms`` at the snooze's end and
        its attempt given back.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.

        Example::

            snoozes = await cq.snooze.get(task.id)
            if snoozes:
                print(snoozes.count, snoozes.wake_at_ms)
        """
        return await self._client._run(_ops.snoozes(task_id), write=False)


class AsyncSnoozeClient:
    """The client's ``snooze`` namespace, and its deprecated flat method."""

    @property
    def snooze(self: ClientView) -> AsyncSnooze:
        """What tasks' snoozes left: ``get``."""
        return AsyncSnooze(self)

    async def snoozes(self: ClientView, task_id: str) -> Snoozes | None:
        """Deprecated: ``cq.snooze.get``, which see."""
        renamed("cq.snoozes(...)", "cq.snooze.get(...)")
        return await AsyncSnooze(self).get(task_id)
