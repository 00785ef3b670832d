# generated from src/cairnq/extensions/snooze/_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""What snoozing adds to a plain ``def`` handler's context, blocking."""

from __future__ import annotations

from typing import Any

from ...models import Task
from .._context import SyncHost
from ._context_async import SnoozeContext


class SyncSnoozeContext:
    """``ctx.snooze``, mixed into ``SyncTaskContext``."""

    def snooze(self: SyncHost, delay: Any = None, *, delay_ms: int | None = None) -> Task | None:
        """Settle now by snoozing: the task is queued again after ``delay``, no attempt spent.

        For a service that answers "not now" (an HTTP 429 with ``Retry-After``):
        the claim's attempt is given back, so ``ctx.attempt`` is the same next
        time. Each task may snooze ``max_snoozes`` times (the worker's option,
        or the handler's own, 20 by default); the snooze past that fails the
        task for good with a ``snooze_limit`` error. A pending cancel wins: the
        task ends canceled. Return from the handler after it; further writes
        raise ``LostLease``. Settling twice is a no-op returning ``None``.

        Args:
            delay: Seconds (a number), a ``timedelta``, or a duration such as
                ``"30s"`` or ``"500ms"``.
            delay_ms: The old spelling (int ms), kept for one release; it warns once.

        Returns:
            The task as written: ``queued`` (snoozed), ``failed`` (over
            ``max_snoozes``) or ``canceled``.

        Raises:
            InvalidArgument: no delay, both, or a bad one; nothing is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the flow-control tables (``cairnq migrate``).

        Example::

            if response.status_code == 429:
                return ctx.snooze(float(response.headers["Retry-After"]))
        """
        return self._call(SnoozeContext.snooze(self._inner, delay, delay_ms=delay_ms))
