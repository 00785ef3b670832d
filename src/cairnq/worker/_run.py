"""One run of a worker: its claim loop and what it needs (``Run``), and the drain that
ends it (``drain``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import extensions as _ext
from .._wakeups import Subscription
from ..durations import exact_duration
from ._claimer import Claimer
from ._executor import Executor
from ._reporting import listing, listing_extra
from ._settling import Settler

log = logging.getLogger("cairnq.worker")

SHUTDOWN_WRITE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Run:
    """One run's claim loop and what it needs."""

    threads: concurrent.futures.ThreadPoolExecutor
    executor: Executor
    wake: Subscription
    settler: Settler
    view: _ext.WorkerView
    ready: _ext.Ready
    claimer: Claimer

    def close(self) -> None:
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.executor.processes.close()
        self.wake.close()


async def drain(
    run: Run,
    *,
    timeout_ms: int,
    deadline: Callable[[], float | None],
    cut_by: Callable[[], str | None],
    fatal: Callable[[], bool],
    worker_id: str,
) -> None:
    """Let ``run``'s in-flight calls finish within ``timeout_ms`` (or by ``deadline()``,
    a ``time.monotonic()`` instant, when it gives one; ``cut_by()`` says why, when it
    cut the drain short), then release the rest, unless ``fatal()`` (nothing can be
    written any more); rejections still being written are awaited, with or without
    calls in flight."""
    claimer, executor, settler = run.claimer, run.executor, run.settler
    calls = claimer.calls
    ends = time.monotonic() + timeout_ms / 1000
    while calls:
        cut = deadline()
        limit = ends if cut is None else cut
        remaining = limit - time.monotonic()
        if remaining <= 0:
            break
        await asyncio.wait(set(calls), timeout=min(remaining, 0.1))
    leftovers = [c for c in claimer.contexts.values() if not c.settled]
    for call in list(calls):
        call.cancel()
    if calls:
        await asyncio.wait(set(calls))
    # A handler thread that is still running cannot be stopped: its task is not handed
    # back at once (a run started now would overlap it); its lease runs out instead,
    # and the task is lost to this worker (announced: another attempt will run).
    running = [c for c in leftovers if c in executor.in_threads]
    for ctx in running:
        ctx.mark_lost()
    if running:
        log.warning(
            "%d handler threads still running at shutdown; their leases will expire "
            "and the tasks run again: %s",
            len(running),
            listing(running),
            extra=listing_extra(worker_id, running),
        )
    leftovers = [c for c in leftovers if c not in executor.in_threads]
    for ctx in leftovers:
        ctx.mark_lost(announce=False)
    if leftovers:
        why = cut_by()
        ended = (
            f"drain cut short ({why})"
            if why is not None
            else f"drain ended (drain_timeout={exact_duration(timeout_ms)})"
        )
        one = len(leftovers) == 1
        fate = _stranded(one) if fatal() else _handed_back(one)
        log.warning(
            "%s with %d %s unfinished; %s: %s",
            ended,
            len(leftovers),
            "task" if one else "tasks",
            fate,
            listing(leftovers),
            extra=listing_extra(worker_id, leftovers),
        )
    if leftovers and not fatal():
        await asyncio.wait(
            [
                asyncio.ensure_future(settler.release(ctx.lease, ctx.claimed_at_ms))
                for ctx in leftovers
            ],
            timeout=SHUTDOWN_WRITE_TIMEOUT_S,
        )
    await settler.wait_rejects(SHUTDOWN_WRITE_TIMEOUT_S)


def _handed_back(one: bool) -> str:
    if one:
        return "handing it back to the queue, its attempt uncounted"
    return "handing them back to the queue, their attempts uncounted"


def _stranded(one: bool) -> str:
    if one:
        return "nothing can be written any more, so it stays claimed until its lease expires"
    return "nothing can be written any more, so they stay claimed until their leases expire"
