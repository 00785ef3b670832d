"""Closing, when its event loop shuts down, what would keep that shutdown from ending.

``asyncio.run`` ends by cancelling every task still pending and waiting for all of
them. A task that outlives its cancellation keeps that wait, and the program, going
forever. psycopg_pool's maintenance workers do: cancelled while they run a job (adding
a connection), they log it and wait for the next job; only closing their pool ends
them. ``close_at_loop_end`` guards such a resource with a task of its own that waits
until released; cancelled with the others at shutdown, it closes the resource, which
ends those workers. Nothing of it runs per operation: a guard is made when the
resource opens and released when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("cairnq")

# Every guard not yet released or run: a pending task is only weakly referenced by
# its loop, and the resource may outlive the last reference of the program's own.
_PENDING: set[asyncio.Task[None]] = set()


def close_at_loop_end(close: Callable[[], Awaitable[object]], name: str) -> Callable[[], None]:
    """Run ``await close()`` if the running loop's tasks are cancelled before release.

    That cancellation is how ``asyncio.run`` (and ``asyncio.Runner``) end: the
    guard then closes the resource while the loop still runs, and the tasks it
    owns can end. A program cancelling every task of its loop by hand (as test
    runners do when they end a loop) closes it the same way. Call it on the loop
    the resource belongs to.

    Args:
        close: Closes the resource; an exception it raises is logged, not raised.
        name: The guard task's name.

    Returns:
        ``release()``: the resource was closed the ordinary way, nothing is left
        to do. Call it on the same loop; once that loop is closed it only forgets
        the guard.
    """
    loop = asyncio.get_running_loop()
    released: asyncio.Future[None] = loop.create_future()

    async def guard() -> None:
        try:
            await released
        except asyncio.CancelledError:
            try:
                await close()
            except Exception:
                log.warning("closing %s as its event loop ended failed", name, exc_info=True)
            raise

    task = loop.create_task(guard(), name=name)
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)

    def release() -> None:
        _PENDING.discard(task)
        if not released.done() and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                released.set_result(None)

    return release
