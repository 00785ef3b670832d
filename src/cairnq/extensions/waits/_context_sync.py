# generated from src/cairnq/extensions/waits/_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""What durable waits add to a plain ``def`` handler's context, blocking."""

from __future__ import annotations

import datetime
from typing import Any

from .._context import SyncHost
from ._context_async import WaitsContext


class SyncWaitsContext:
    """``ctx.wait_for``, ``ctx.sleep`` and ``ctx.sleep_until``, mixed into ``SyncTaskContext``."""

    def wait_for(self: SyncHost, key: str, *, timeout: Any = None) -> Any:
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
            def refund(ctx, payload):
                try:
                    answer = ctx.wait_for(f"refund-{payload['id']}", timeout="3d")
                except WaitTimeout:
                    return "expired"
                return "refunded" if answer["approved"] else "rejected"
        """
        return self._call(WaitsContext.wait_for(self._inner, key, timeout=timeout))

    def sleep(self: SyncHost, duration: Any) -> None:
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

            ctx.step("send-welcome", send_welcome, payload["user"])
            ctx.sleep("3d")
            ctx.step("send-tips", send_tips, payload["user"])
        """
        return self._call(WaitsContext.sleep(self._inner, duration))

    def sleep_until(self: SyncHost, when: datetime.datetime) -> None:
        """Sleep durably until ``when`` (an aware ``datetime``): as ``sleep``, to a fixed
        time; one in the past returns at once.

        Raises:
            Waiting: ``when`` is ahead; the task is parked (the attempt is settled).
            InvalidArgument: not an aware ``datetime``, or a batch handler's call; nothing
                is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the waits' tables (``cairnq migrate``).

        Example::

            ctx.sleep_until(datetime(2030, 1, 1, tzinfo=timezone.utc))
        """
        return self._call(WaitsContext.sleep_until(self._inner, when))
