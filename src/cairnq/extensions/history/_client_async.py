"""The client's attempt history: ``cq.history`` and the flat method before it, async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from .._client_async import ClientView
from . import _ops
from ._ops import Attempt

AttemptList = list[Attempt]


class AsyncHistory:
    """``cq.history``: the attempts of each task, recorded as they ended."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def list(self, task_id: str) -> AttemptList:
        """Every attempt of a task cairnq recorded, in the order they ran.

        Each ``Attempt`` has the worker, start and end, outcome (``succeeded``,
        ``failed``, ``retry``, ``canceled``, ``snoozed``, ``lost`` or ``released``)
        and error envelope. Attempts a reference SDK worker ran are not recorded,
        nor attempts on a database without the history table at the time.

        Args:
            task_id: The task.

        Returns:
            The attempts (empty for a task never claimed, or one purged).

        Raises:
            InvalidArgument: a bad task id.
            SchemaIncomplete: the database lacks the history table (``cairnq migrate``).

        Example::

            for attempt in await cq.history.list(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        return await self._client._run(_ops.attempts(task_id), write=False)


class AsyncHistoryClient:
    """The client's ``history`` namespace, and its flat method."""

    @property
    def history(self: ClientView) -> AsyncHistory:
        """The attempts of each task: ``list``."""
        return AsyncHistory(self)

    async def attempts(self: ClientView, task_id: str) -> AttemptList:
        """Every attempt of a task cairnq recorded: ``cq.history.list``, which see.

        Example::

            for attempt in await cq.attempts(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        return await AsyncHistory(self).list(task_id)
