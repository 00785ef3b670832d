"""What durable waits add to a handler's context: ``ctx.wait_for``, ``ctx.sleep`` and
``ctx.sleep_until`` (``WaitsContext``; its blocking twin is generated from it,
``_context_sync``), the ``WaitTimeout`` a handler may catch, and the ``Waiting``
signal that ends an attempt a wait parked.

Each attempt counts the waits its run began, by kind and key, to name them
(``RunWaits``): the same code path names the same waits in every run, so a run
finds the waits an earlier run began.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from ...durations import delay_ms_of, point_ms
from ...errors import CairnQError, InvalidArgument
from .._context import ContextHost, Settle

if TYPE_CHECKING:
    from ._ops import Ending, Outcome


class WaitTimeout(CairnQError):
    """Raised by ``ctx.wait_for`` when its timeout passed before an event came.

    The timeout is recorded with the wait: a later attempt of the task (a retry) gets
    the same ``WaitTimeout`` at the same wait. Catch it to take another path;
    uncaught, it fails the task for good (it is permanent: a retry would meet it
    again).

    Attributes:
        key: The event key waited on.
        task_id: The waiting task.
    """

    permanent: ClassVar[bool] = True

    def __init__(self, key: str, task_id: str) -> None:
        self.key = key
        self.task_id = task_id
        super().__init__(f"task {task_id}: no event on {key!r} came before the wait's timeout")


class Waiting(Exception):
    """Raised by ``ctx.wait_for`` and ``ctx.sleep`` when the task is parked: the attempt is over.

    The task is queued again, its attempt not spent, holding no worker slot, and
    runs again when the event comes or the wake time is reached; that run goes past
    the wait. Let it propagate out of the handler (an ``except Exception`` that
    swallows it leaves the attempt settled all the same).
    """

    def __init__(self, task_id: str, what: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id} parked: {what}")


@dataclass
class RunWaits:
    """The waits one run began so far, counted by their name's stem."""

    counts: dict[str, int] = field(default_factory=dict)

    def name(self, stem: str) -> str:
        n = self.counts.get(stem, 0) + 1
        self.counts[stem] = n
        return stem if n == 1 else f"{stem}#{n}"


class WaitsContext:
    """``ctx.wait_for``, ``ctx.sleep`` and ``ctx.sleep_until``, mixed into ``TaskContext``."""

    async def wait_for(self: ContextHost, key: str, *, timeout: Any = None) -> Any:
        """The payload of an event sent on ``key`` (``cq.events.send``); until one comes,
        park the task.

        An event kept for ``key`` (sent before the wait began, within its retention)
        is taken at once. Otherwise the task is parked: queued, its attempt not
        spent, holding no worker slot, and ``Waiting`` ends this attempt (let it
        propagate). The send, or the timeout, makes the task due; its next run
        (the code before the wait runs again: put what must run once in
        ``ctx.step``) gets the payload here. A wait receives one event once: every
        later run of the task, a retry included, gets the same payload back.

        Each run names its waits by key and order (the second wait on one key in
        a run is another wait), so the same code path must reach them in the
        same order.

        Args:
            key: The event key (``"order-42:approval"``): text, at most 1000 bytes.
            timeout: How long to wait from the wait's first beginning: seconds, a
                ``timedelta`` or ``"3d"``. ``None`` (the default) waits for ever.

        Returns:
            The event's payload, as read back from JSON.

        Raises:
            Waiting: no event yet; the task is parked (the attempt is settled).
            WaitTimeout: the timeout passed first (catch it to go on without the event).
            InvalidArgument: a bad key or timeout, or a batch handler's call (its other
                tasks would be left unsettled); nothing is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the waits' tables (``cairnq migrate``).

        Example::

            @worker.task
            async def refund(ctx, payload):
                try:
                    answer = await ctx.wait_for(f"refund-{payload['id']}", timeout="3d")
                except WaitTimeout:
                    return "expired"
                return "refunded" if answer["approved"] else "rejected"
        """
        from . import _ops
        from ._ops import check_key

        checked = check_key(key)
        timeout_ms = None if timeout is None else delay_ms_of(timeout, "timeout")
        _refuse_in_batch(self, "ctx.wait_for")
        self._guard()
        name = self._state(RunWaits).name(f"event:{checked}")
        ending = _ending(self)
        outcome = await self._owned(
            _ops.event_wait(self.lease, self.worker_id, name, checked, timeout_ms, ending)
        )
        if outcome.state == "delivered":
            codec = self._runtime.client.codec
            found = codec.decode(outcome.payload or "null", what="event payload")
            return codec.opened(found, what="event payload", task_id=self.task.id)
        if outcome.state == "timed_out":
            raise WaitTimeout(checked, self.task.id)
        return _parked(self, outcome, f"waiting for an event on {checked!r}")

    async def sleep(self: ContextHost, duration: Any) -> None:
        """Sleep ``duration`` durably: the task is parked until then, holding no worker slot.

        The wake time is stored when the sleep first begins (the database's clock
        plus ``duration``); the task is queued again, due then, its attempt and
        snoozes not spent, and ``Waiting`` ends this attempt (let it propagate).
        The run at or after the wake time (never before it, after a crash too) goes
        on past the sleep; code before the sleep runs again (put what must run
        once in ``ctx.step``). A sleep of 0 returns at once.

        Args:
            duration: Seconds, a ``timedelta`` or a duration such as ``"2h"``.

        Raises:
            Waiting: the wake time is ahead; the task is parked (the attempt is settled).
            InvalidArgument: a bad duration, or a batch handler's call; nothing is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the waits' tables (``cairnq migrate``).

        Example::

            await ctx.step("send-welcome", send_welcome, payload["user"])
            await ctx.sleep("3d")
            await ctx.step("send-tips", send_tips, payload["user"])
        """
        await _sleep(self, None, delay_ms_of(duration, "sleep duration"))

    async def sleep_until(self: ContextHost, when: datetime.datetime) -> None:
        """Sleep durably until ``when`` (an aware ``datetime``): as ``sleep``, to a fixed
        time; one in the past returns at once.

        Raises:
            Waiting: ``when`` is ahead; the task is parked (the attempt is settled).
            InvalidArgument: not an aware ``datetime``, or a batch handler's call; nothing
                is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the waits' tables (``cairnq migrate``).

        Example::

            await ctx.sleep_until(datetime(2030, 1, 1, tzinfo=timezone.utc))
        """
        await _sleep(self, point_ms(when, "sleep_until"), 0)


async def _sleep(ctx: ContextHost, wake_at_ms: int | None, delay_ms: int) -> None:
    from . import _ops

    _refuse_in_batch(ctx, "ctx.sleep")
    ctx._guard()
    name = ctx._state(RunWaits).name("sleep")
    if wake_at_ms is None and delay_ms == 0:
        return
    op = _ops.sleep(ctx.lease, ctx.worker_id, name, wake_at_ms, delay_ms, _ending(ctx))
    outcome = await ctx._owned(op)
    if outcome.state == "parked":
        _parked(ctx, outcome, f"sleeping until {_when(outcome.wake_at_ms)}")


def _refuse_in_batch(ctx: ContextHost, what: str) -> None:
    """Refuse a wait in a batch handler's call, before anything is written: parking one
    task would leave the call's others unsettled until their leases expire."""
    if ctx.batched:
        raise InvalidArgument(
            f"{what} cannot park a task of a batch handler (@worker.task(batch=...)): the "
            f"call's other tasks would be left unsettled; register a handler without "
            f"batch= for tasks that wait"
        )


def _ending(ctx: ContextHost) -> Ending:
    from ._ops import Ending

    return Ending(tuple(ctx._runtime.points.ending().attempt), ctx.claimed_at_ms)


def _parked(ctx: ContextHost, outcome: Outcome, words: str) -> NoReturn:
    """Note the park that settled the attempt, and end the run (``Waiting``)."""
    assert outcome.row is not None, outcome  # a park returns the task's row
    ctx._settled_as(outcome.row, event="snoozed", ending=("waiting", f"parked, {words}"))
    raise Waiting(ctx.task.id, words)


def _when(ms: int | None) -> str:
    if ms is None:
        return "an event"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


async def settle_waiting(
    raised: BaseException, contexts: Sequence[ContextHost], settle: Settle
) -> None:
    """The ``Waiting`` signal: the wait parked the task, its attempt settled already.
    A batch handler's call never parks (its waits are refused), so the call's one task
    is the one the park settled."""
    return
