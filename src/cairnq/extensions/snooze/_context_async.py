"""What snoozing adds to a handler's context: ``ctx.snooze`` (``SnoozeContext``; its
blocking twin is generated from it, ``_context_sync``), the ``Snooze`` signal a handler
raises instead, and how many snoozes each task may take.

How many times a task may snooze is the extension's option ``max_snoozes``: the
handler's own (``@worker.task(max_snoozes=...)``), else the worker's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from ...errors import SchemaIncomplete, error_envelope
from ...models import Task
from .._context import ContextHost, Settle
from . import _ops
from ._ops import Snoozes, snooze_delay_ms


class Snooze(Exception):
    """Raise from a handler to queue its task again after a delay without spending an attempt.

    The same as ``await ctx.snooze(delay)`` and returning: bounded by the task's
    ``max_snoozes``, past which the task fails with a ``snooze_limit`` error.
    Raised from a batch handler, it snoozes every task of the call still unsettled.

    Args:
        delay: Seconds (a number), a ``timedelta``, or a duration such as ``"30s"``.
        delay_ms: The old spelling (int ms), kept for one release; it warns once.

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
        self.delay_ms = snooze_delay_ms(delay, delay_ms, spelled="Snooze")
        super().__init__(f"snooze for {self.delay_ms} ms")


@dataclass
class Snoozed:
    """One attempt's snooze, once it was counted: its delay and the task's counts after it."""

    delay_ms: int | None = None
    snoozes: Snoozes | None = None


class SnoozeContext:
    """``ctx.snooze``, mixed into ``TaskContext``."""

    @property
    def snoozed_ms(self: ContextHost) -> int | None:
        """The delay of the snooze that settled this attempt, if one did."""
        return self._state(Snoozed).delay_ms

    @property
    def snoozes(self: ContextHost) -> Snoozes | None:
        """The task's snooze counts after the snooze that settled this attempt, if one did."""
        return self._state(Snoozed).snoozes

    async def snooze(
        self: ContextHost, delay: Any = None, *, delay_ms: int | None = None
    ) -> Task | None:
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
                return await ctx.snooze(float(response.headers["Retry-After"]))
        """
        if self.settled:
            return None
        return await _snooze_for(self, snooze_delay_ms(delay, delay_ms))


async def _snooze_for(ctx: ContextHost, ms: int) -> Task | None:
    """Snooze the task ``ctx`` holds for ``ms`` milliseconds (checked)."""
    runtime = ctx._runtime
    codec = runtime.client.codec
    limit = cast(int, ctx._option("max_snoozes"))

    def limit_error(count: int) -> str:
        return codec.encode_error(_ops.snooze_limit_error(count, limit), retryable=False)

    hooks = runtime.points.ending().attempt
    outcome = await ctx._owned(
        _ops.snooze_ending(
            ctx.lease,
            ctx.worker_id,
            ms,
            max_snoozes=limit,
            limit_error=limit_error,
            started=ctx.claimed_at_ms,
            hooks=hooks,
        )
        if hooks
        else _ops.snooze(ctx.lease, ctx.worker_id, ms, max_snoozes=limit, limit_error=limit_error)
    )
    counts = outcome.snoozes
    if counts is None:
        return ctx._settled_as(outcome.row)
    state = ctx._state(Snoozed)
    state.delay_ms, state.snoozes = ms, counts
    words = f"snoozed for {_seconds(ms)} (snooze {counts.count})"
    return ctx._settled_as(outcome.row, event="snoozed", ending=("snoozed", words))


async def settle_snooze(
    raised: BaseException, contexts: Sequence[ContextHost], settle: Settle
) -> SchemaIncomplete | None:
    """The ``Snooze`` signal: every task of the call still unsettled is snoozed; those a
    handler settled stay. Returns the ``SchemaIncomplete`` that failed their attempts
    instead (no flow tables), which the attempts' log lines name."""
    assert isinstance(raised, Snooze)
    unavailable: list[SchemaIncomplete] = []
    write = functools.partial(_snooze_or_fail, delay_ms=raised.delay_ms, unavailable=unavailable)
    await asyncio.gather(
        *(
            settle(ctx, functools.partial(write, ctx))
            for ctx in contexts
            if not ctx.settled and not ctx.lost_lease
        )
    )
    return unavailable[0] if unavailable else None


async def _snooze_or_fail(
    ctx: ContextHost, *, delay_ms: int, unavailable: list[SchemaIncomplete]
) -> None:
    """Snooze for a raised ``Snooze``; without the flow tables, fail the attempt instead
    (retryable), so the task is not left to its lease, and add the error to
    ``unavailable``."""
    try:
        if not ctx.settled:
            await _snooze_for(ctx, delay_ms)
    except SchemaIncomplete as exc:
        envelope = error_envelope("SchemaIncomplete", "snooze_unavailable", str(exc))
        await ctx._record_failure(envelope, retryable=True)
        unavailable.append(exc)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3g}s" if ms >= 1000 else f"{ms:.0f}ms"
