# generated from src/cairnq/extensions/history/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's attempt history, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..._deprecated import renamed
from ...durations import Duration
from .._client_sync import ClientView

if TYPE_CHECKING:
    from ..logs._ops import AttemptLog
    from . import _trends
    from ._ops import Attempt

    AttemptList = list[Attempt]
    LogList = list[AttemptLog]
    TrendList = list[_trends.Trend]


class SyncAttempts:
    """``cq.attempts``: the attempts of each task, recorded as they ended.

    Called, it is ``list`` (deprecated: ``cq.attempts(task.id)``).
    """

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

            for attempt in cq.attempts.list(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        from . import _ops

        return self._client._run(_ops.attempts(task_id), write=False)

    def logs(self, task_id: str) -> LogList:
        """What a task's handler logged in each attempt (``ctx.log``, and the records
        ``capture_logging`` kept), in the order the attempts ended.

        Args:
            task_id: The task.

        Returns:
            One ``AttemptLog`` per attempt that logged (empty on a database without
            the logs' table).

        Raises:
            InvalidArgument: a bad task id.

        Example::

            for entry in cq.attempts.logs(task.id):
                for line in entry.lines:
                    print(entry.attempt, line.level, line.message)
        """
        from ..logs._ops import logs

        return self._client._run(logs(task_id), write=False)

    def trends(self, by: str = "name", since: Duration = "7d") -> TrendList:
        """How the attempts of each task name (or queue) went over the last ``since``:
        attempts ended, succeeded, failed, canceled, throughput, failure rate and the run
        time's p50 and p95, computed from the attempt history (docs/trends.md).

        Args:
            by: ``"name"`` (the default) or ``"queue"``.
            since: The window, ending now: a duration from one minute to 366 days
                (``"1d"``, ``"7d"``, a ``timedelta``, seconds).

        Returns:
            One ``Trend`` per name (or queue) with an attempt that ended in the window,
            the busiest first.

        Raises:
            InvalidArgument: a bad ``by`` or ``since``.
            SchemaIncomplete: the database lacks the history table (``cairnq migrate``).

        Example::

            for trend in cq.attempts.trends(since="1d"):
                print(trend.key, trend.failure_rate, trend.p95_ms)
        """
        from . import _trends

        now_ms = int(time.time() * 1000)
        return self._client._run(_trends.trends(by, since, now_ms=now_ms), write=False)

    def __call__(self, task_id: str) -> AttemptList:
        """Deprecated: ``cq.attempts.list(task_id)``, which see."""
        renamed("cq.attempts(task_id)", "cq.attempts.list(task_id)")
        return self.list(task_id)


class SyncHistoryClient:
    """The client's ``attempts`` namespace, and ``history``, its deprecated first name."""

    @property
    def attempts(self: ClientView) -> SyncAttempts:
        """The attempts of each task: ``list``."""
        return SyncAttempts(self)

    @property
    def history(self: ClientView) -> SyncAttempts:
        """Deprecated: ``cq.attempts``, which see."""
        renamed("cq.history", "cq.attempts")
        return SyncAttempts(self)
