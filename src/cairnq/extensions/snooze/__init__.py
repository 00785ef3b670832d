"""Snooze: a handler hands its attempt back and the task is queued again after a delay,
no attempt spent (``ctx.snooze``, ``raise Snooze(...)``), at most ``max_snoozes`` times.

Each snooze is counted in ``cairnq_task_snoozes``, in the transaction that hands the
attempt back (``_ops.snooze``). That table is created by ``x0007_flow.sql``, which
the pauses extension owns and ships, so this extension needs it; it owns
``x0012_snoozes_forget.sql`` (a task's counts go with its row), which it works
without.

The operations (``_ops``), the statements (``sql/<dialect>/snooze_*.sql``) and
the migration are in this folder. The worker's context, executor and client call
them; ``cairnq.flow`` re-exports ``Snooze``, ``Snoozes`` and ``DEFAULT_MAX_SNOOZES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .._base import Extension, Option, TaskRows
from ._ops import DEFAULT_MAX_SNOOZES, Snoozes, check_max_snoozes, snooze_delay_ms

__all__ = ["DEFAULT_MAX_SNOOZES", "Snooze", "Snoozes", "Snoozing"]


class Snooze(Exception):
    """Raise from a handler to queue its task again after a delay without spending an attempt.

    The same as ``await ctx.snooze(delay)`` and returning: bounded by the task's
    ``max_snoozes``, past which the task fails with a ``snooze_limit`` error.
    Raised from a batch handler, it snoozes every task of the call still unsettled.

    Args:
        delay: Seconds (a number), a ``timedelta``, or a duration such as ``"30s"``;
            give it or ``delay_ms``.
        delay_ms: The delay in milliseconds.

    Raises:
        InvalidArgument: no delay, both, or a bad one (when raised, not when handled).

    Example::

        @worker.task
        async def call_api(ctx, payload):
            response = await http.post(URL, json=payload)
            if response.status_code == 429:
                raise Snooze(float(response.headers.get("Retry-After", 30)))
            return response.json()
    """

    def __init__(self, delay: Any = None, *, delay_ms: int | None = None) -> None:
        self.delay_ms = snooze_delay_ms(delay, delay_ms)
        super().__init__(f"snooze for {self.delay_ms} ms")


class Snoozing(Extension):
    """The snooze extension (``Snooze`` is the exception a handler raises)."""

    name = "snooze"
    migrations = ("x0012_snoozes_forget.sql",)
    optional = ("x0012_snoozes_forget.sql",)
    needs = ("x0007_flow.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_snoozes": "trigger"}
    words = ("snooze",)
    cli = "cairnq.extensions.snooze._surfaces.cli"
    pages = "cairnq.extensions.snooze._surfaces.pages"
    # How many times a task may snooze: the worker's, and a handler's own.
    options: ClassVar[Mapping[str, Option]] = {
        "max_snoozes": Option(DEFAULT_MAX_SNOOZES, check_max_snoozes)
    }
    task_options: ClassVar[Mapping[str, Option]] = {"max_snoozes": Option(None, check_max_snoozes)}
