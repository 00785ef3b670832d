"""How a worker reaches its database at start: opening its client, and each start-up
read or write, tried again while waiting may cure the error."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from .._aio import wait_set
from ..backends import Backend, FileBound
from ..client import CairnQ
from ..errors import DatabaseError, DatabaseUnavailable
from ._claimer import CLAIM_ERROR_BACKOFF_S

log = logging.getLogger("cairnq.worker")

# How long a worker waits before opening again a database it could not reach.
OPEN_RETRY_S = 5.0


def transient(exc: DatabaseError, backend: Backend) -> bool:
    """Whether waiting may cure ``exc``: a retryable error, unless the SQLite file is gone."""
    if isinstance(exc, DatabaseUnavailable) and isinstance(backend, FileBound):
        return False
    return exc.retryable


async def open_client(
    client: CairnQ, stopping: asyncio.Event, *, abandon_ms: int, worker_id: str
) -> bool:
    """Open ``client``; ``False`` when ``stopping`` came first.

    A database that cannot be reached (``DatabaseUnavailable``) or is busy
    (``DatabaseBusy``) is tried again every ``OPEN_RETRY_S``, one warning each
    time, unless it is a file (SQLite) that is gone or refused this database,
    role or credentials: no wait brings those back. A stop abandons the attempt
    in progress, waiting up to ``abandon_ms`` for the backend to close what it had
    opened; a cancel of the caller abandons it so too, then is raised.
    """
    while True:
        began = time.monotonic()
        opening = asyncio.ensure_future(client.open())
        stopped = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({opening, stopped}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            # The run itself is cancelled: the open ends before the run does, so that
            # nothing it opens outlives the worker's close.
            await _abandon(opening, abandon_ms)
            raise
        finally:
            stopped.cancel()
        if not opening.done():
            await _abandon(opening, abandon_ms)
            return False
        try:
            opening.result()
            return True
        except DatabaseError as exc:
            if not transient(exc, client.backend):
                raise
            log.warning(
                "%s; retrying in %.0fs",
                exc,
                OPEN_RETRY_S,
                extra={"worker_id": worker_id, "phase": "open"},
            )
        # An open that waited for the database already spent (part of) the interval.
        pause = max(0.0, OPEN_RETRY_S - (time.monotonic() - began))
        if await wait_set(stopping, pause):
            return False


async def _abandon(opening: asyncio.Future[CairnQ], abandon_ms: int) -> None:
    """Cancel ``opening`` and wait up to ``abandon_ms`` for the backend to close what it
    had opened; an open that failed as it was abandoned is not raised."""
    opening.cancel()
    await asyncio.wait({opening}, timeout=max(0.1, abandon_ms / 1000))
    if opening.done() and not opening.cancelled():
        opening.exception()


async def start_step(
    step: Callable[[], Awaitable[object]],
    phase: str,
    *,
    backend: Backend,
    stopping: asyncio.Event,
    worker_id: str,
) -> bool:
    """Run one start-up read or write, trying it again while the database is busy or
    away (one warning each, backing off as a failed claim does); ``False`` when
    ``stopping`` came first. An error no wait cures is raised.
    """
    low, high = CLAIM_ERROR_BACKOFF_S
    failures = 0
    while True:
        if stopping.is_set():
            return False
        try:
            await step()
            return True
        except DatabaseError as exc:
            if not transient(exc, backend):
                raise
            pause = min(high, low * 2 ** min(failures, 5))
            failures += 1
            log.warning(
                "worker start-up (%s): %s; retrying in %.2fs",
                phase,
                exc,
                pause,
                extra={"worker_id": worker_id, "phase": "start"},
            )
        await wait_set(stopping, pause)
