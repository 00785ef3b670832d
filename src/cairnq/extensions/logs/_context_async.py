"""What attempt logs add to a handler's context: ``ctx.log`` (``LogsContext``).

``log`` only keeps the line in the attempt's memory (``_ops.LogBuffer``): it never
waits for the database, so it is a plain method on both contexts (a plain ``def``
handler's context passes it to the async one it wraps). The attempt's settlement
writes the lines (``_ops.record``).
"""

from __future__ import annotations

from typing import cast

from .._context import ContextHost
from ._ops import LogBuffer, check_level, check_message


def log_line(ctx: ContextHost, level: str, message: str, source: str) -> None:
    """Keep one checked line in ``ctx``'s attempt log, under its cap."""
    cap = cast(int, ctx._option("log_max_bytes"))
    ctx._state(LogBuffer).add((ctx.task.id, ctx.lease.token), level, message, source, cap)


class LogsContext:
    """``ctx.log``, mixed into ``TaskContext``."""

    def log(self: ContextHost, message: str, level: str = "info") -> None:
        """Keep a line in this attempt's log, stored with the attempt when it ends and
        shown by ``cairnq get``, the dashboard's task page and ``cq.attempts.logs``.

        The lines of one attempt are kept up to the worker's ``log_max_bytes``
        (``AttemptLogs(log_max_bytes=...)``, 64 KiB by default; a handler's own with
        ``@worker.task(log_max_bytes=...)``); the lines past it are counted and a marker
        line says so. Nothing is written until the attempt's settlement, which writes
        them in its own transaction; the lines of an attempt whose worker dies first
        are lost.

        Args:
            message: The line (text).
            level: ``debug``, ``info`` (the default), ``warning``, ``error`` or
                ``critical``.

        Raises:
            InvalidArgument: a message that is not text, or an unknown level.
            LostLease: the attempt has ended (settled, or its lease lost).

        Example::

            ctx.log(f"charging {payload['amount']} cents")
            ctx.log("card declined, retrying", level="warning")
        """
        checked = check_message(message)
        chosen = check_level(level)
        self._guard()
        log_line(self, chosen, checked, "ctx.log")
