"""A thread that blocks on a coroutine it runs on an event loop, and the calls that
coroutine hands back to the thread.

A plain ``def`` handler's context runs each of its methods on the worker's loop while
the handler's thread waits (``run_from_thread``). What such a method calls of the
handler's own code (a step's function) belongs in the handler's thread, not on the
loop: ``in_waiting_thread`` runs it there, the thread having nothing else to do until
the method is done.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

Job = Callable[[], None]
"""A call handed to the waiting thread; ``None`` in its queue ends the wait."""

# The queue of the thread waiting on the coroutine that sees it (set in that coroutine's
# task, so the tasks it starts see it too).
_WAITING: ContextVar[queue.SimpleQueue[Job | None] | None] = ContextVar(
    "cairnq_waiting_thread", default=None
)


def run_from_thread(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> T:
    """Run ``coro`` on ``loop`` (running in another thread) and block until it is done,
    meanwhile running in this thread the calls it hands back (``in_waiting_thread``).

    Returns:
        ``coro``'s value.

    Raises:
        Exception: what ``coro`` raises; what a call handed back raises that is not an
            ``Exception`` (``KeyboardInterrupt``), at once, ``coro`` being cancelled.

    Example::

        task = run_from_thread(ctx.progress(0.5), loop)
    """
    jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
    future = asyncio.run_coroutine_threadsafe(_waited_on(coro, jobs), loop)
    future.add_done_callback(lambda _: jobs.put(None))
    while (job := jobs.get()) is not None:
        job()
    return future.result()


async def _waited_on(coro: Coroutine[Any, Any, T], jobs: queue.SimpleQueue[Job | None]) -> T:
    _WAITING.set(jobs)
    return await coro


async def in_waiting_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, called in the thread that waits on this coroutine in
    ``run_from_thread``, or here when no thread does.

    Raises:
        Exception: what ``fn`` raises.

    Example::

        value = await in_waiting_thread(fetch_invoice, invoice_id)
    """
    jobs = _WAITING.get()
    if jobs is None:
        return fn(*args, **kwargs)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def job() -> None:
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            loop.call_soon_threadsafe(_fail, done, exc)
        except BaseException:
            loop.call_soon_threadsafe(done.cancel)
            raise
        else:
            loop.call_soon_threadsafe(_succeed, done, value)

    jobs.put(job)
    return await done


def _succeed(done: asyncio.Future[T], value: T) -> None:
    if not done.done():
        done.set_result(value)


def _fail(done: asyncio.Future[Any], error: Exception) -> None:
    if not done.done():
        done.set_exception(error)
