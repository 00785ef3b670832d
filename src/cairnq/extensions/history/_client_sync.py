# generated from src/cairnq/extensions/history/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's attempt history, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

from .._client_sync import ClientView
from . import _ops
from ._ops import Attempt

AttemptList = list[Attempt]


class SyncHistory:
    """``cq.history``: the attempts of each task, recorded as they ended."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    def list(self, task_id: str) -> AttemptList:
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

            for attempt in cq.history.list(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        return self._client._run(_ops.attempts(task_id), write=False)


class SyncHistoryClient:
    """The client's ``history`` namespace, and its flat method."""

    @property
    def history(self: ClientView) -> SyncHistory:
        """The attempts of each task: ``list``."""
        return SyncHistory(self)

    def attempts(self: ClientView, task_id: str) -> AttemptList:
        """Every attempt of a task cairnq recorded: ``cq.history.list``, which see.

        Example::

            for attempt in cq.attempts(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        return SyncHistory(self).list(task_id)
