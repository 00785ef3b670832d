"""The client's events: ``cq.events``, async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...durations import duration_ms
from ...models import Row
from .._client_async import ClientView

if TYPE_CHECKING:
    from ._ops import Sent, WaitRecord


class AsyncEvents:
    """``cq.events``: send events to the waits of tasks (``ctx.wait_for``), and read waits."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def send(
        self,
        key: str,
        payload: Any = None,
        *,
        task_id: str | None = None,
        to: str = "one",
        retention: Any = None,
        id: str | None = None,
    ) -> Sent:
        """Send an event on ``key``: the payload of a task's ``ctx.wait_for(key)``.

        ``to="one"`` (the default): the oldest wait waiting on ``key`` receives it
        and its task is made due now; with none waiting, it is kept, and the next
        wait on ``key`` to begin takes it (first sent, first taken). Each such
        event is received by one wait, once. ``to="all"``: every wait waiting on
        ``key`` receives it, and so does the first wait on ``key`` of every task
        that begins one before it expires (a broadcast: each task receives it
        once). An event is kept ``retention`` (7 days by default); one no wait
        took by then is forgotten.

        With ``id``, the send is idempotent: a later send with the same ``id`` (a
        sender retrying after a crash or a timeout) writes nothing and returns what
        the first did, so the event is delivered at most once. An id is remembered
        for the event's retention, and at least a day.

        Args:
            key: The event key.
            payload: Any JSON value (``None`` sends ``null``).
            task_id: Address the event to this task's waits on ``key`` alone.
            to: ``"one"`` or ``"all"``.
            retention: How long to keep it for waits that begin later: seconds, a
                ``timedelta`` or ``"7d"`` (up to 366 days; 0 keeps it for no later
                wait).
            id: The send's own id (text, at most 1000 bytes), for a sender that may
                send again: ``f"refund-{order_id}-decision"``.

        Returns:
            What the send did: the event's ``seq``, the tasks it woke, whether it is kept.

        Raises:
            InvalidArgument: a bad key, task id, ``to``, retention or id, or an id a
                remembered send used for another key; nothing is written.
            SerializationError: the payload is not portable JSON; nothing is written.
            SchemaIncomplete: the database lacks the waits' tables, or with ``id`` the
                send ids' (``cairnq migrate``).

        Example::

            await cq.events.send(f"refund-{order_id}", {"approved": True, "by": "ada"})
        """
        from . import _ops
        from ._ops import DEFAULT_RETENTION_MS, MAX_RETENTION_MS

        encoded = self._client.codec.seal(payload, what="event payload")
        retention_ms = (
            DEFAULT_RETENTION_MS
            if retention is None
            else duration_ms(retention, "retention", high_ms=MAX_RETENTION_MS)
        )
        op = _ops.send(key, encoded, task_id=task_id, to=to, retention_ms=retention_ms, send_id=id)
        return await self._client._run(op, write=True)

    async def waits(self, task_id: str) -> list[WaitRecord]:
        """A task's waits (``ctx.wait_for``, ``ctx.sleep``), in the order they began.

        Raises:
            InvalidArgument: a bad task id.
            SchemaIncomplete: the database lacks the waits' tables.

        Example::

            for wait in await cq.events.waits(task.id):
                print(wait.name, wait.state)
        """
        from . import _ops

        codec = self._client.codec

        def decode(text: str) -> Any:
            return codec.opened(codec.decode(text, what="event payload"), what="event payload")

        return await self._client._run(_ops.waits_of(task_id, decode), write=False)

    async def kept(self, key: str, *, limit: int = 100) -> list[Row]:
        """The unexpired events kept for ``key`` that a wait may still take, oldest first:
        rows of ``seq``, ``task_id``, ``fanout``, ``payload`` (JSON text), ``sent_at_ms``
        and ``expires_at_ms``.

        Raises:
            InvalidArgument: a bad key or limit.
            SchemaIncomplete: the database lacks the waits' tables.
        """
        from . import _ops

        return await self._client._run(_ops.kept(key, limit), write=False)


class AsyncEventsClient:
    """The client's ``events`` namespace."""

    @property
    def events(self: ClientView) -> AsyncEvents:
        """Events for tasks' waits: ``send``, ``waits``, ``kept``."""
        return AsyncEvents(self)
