"""Waiting on an ``asyncio.Event`` with a timeout, alike on every supported Python."""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes; whether it is set.

    Unlike ``asyncio.wait_for`` before Python 3.12 (CPython gh-86296), a cancel
    that lands as the event is set is never lost: it raises ``CancelledError``
    here, so a loop waiting for work between rounds stops when it is cancelled.

    Example::

        if await wait_set(stopping, 5.0):
            return
    """
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout_s)
    finally:
        waiter.cancel()
    return event.is_set()


def cancel_requested() -> bool:
    """Whether the running task was cancelled and has not taken the cancel back.

    A loop that runs until stopped checks it each turn, so a cancel that a wait below
    it swallowed still ends it: ``asyncio.wait_for`` before Python 3.12 returns a
    result that arrives as the cancel lands and drops the ``CancelledError``
    (CPython gh-86296), and the PostgreSQL pool waits for a connection with it.
    The task still counts the cancel (``Task.cancelling()``, Python 3.11 and later;
    always ``False`` before).

    Example::

        while not stopping.is_set():
            if cancel_requested():
                raise asyncio.CancelledError
            ...
    """
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is not None and int(cancelling()) > 0
