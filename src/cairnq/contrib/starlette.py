"""cairnq in a Starlette (or FastAPI) application: lifespan, client accessor, progress stream.

- ``lifespan(url, worker=...)``: the application's ``lifespan``. It opens a client
  at start-up (``request.app.state.cairnq``), optionally runs a ``Worker`` in the
  same event loop, and stops the worker and closes the client at shutdown.
- ``get_client(request)``: the open client, for endpoints (FastAPI:
  ``cairnq.contrib.fastapi.Client``).
- ``follow(cq, task_id)``: the task each time its status, progress or message
  changes, ending with the finished task.
- ``task_events(cq, task_id)``: the same as a server-sent-events response.

Example::

    worker = Worker.sqlite("tasks.db")

    @worker.task
    async def resize(ctx, payload):
        await ctx.progress(0.5, "halfway")
        return {"ok": True}

    async def submit(request):
        task = await get_client(request).submit("resize", {"w": 64})
        return JSONResponse({"id": task.id})

    async def events(request):
        return await task_events(get_client(request), request.path_params["task_id"])

    app = Starlette(
        routes=[Route("/resize", submit, methods=["POST"]), Route("/tasks/{task_id}", events)],
        lifespan=lifespan(worker=worker),
    )
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._checks import check_int
from .._deprecated import renamed
from .._wakeups import LIVE_WAIT_S, wants_done
from ..client import CairnQ
from ..durations import Duration, duration_or_ms
from ..errors import InvalidArgument, StoreClosed
from ..models import Task
from ..worker import Worker

__all__ = ["STATE_KEY", "follow", "get_client", "get_worker", "lifespan", "task_events"]

#: The attribute of ``app.state`` holding the open client (the worker: ``cairnq_worker``).
STATE_KEY = "cairnq"

DEFAULT_FOLLOW_POLL_MS = 250

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


def lifespan(
    url: str | os.PathLike[str] | None = None,
    *,
    client: CairnQ | None = None,
    worker: Worker | None = None,
    concurrency: int | None = None,
    **client_options: Any,
) -> Lifespan:
    """A ``lifespan`` for ``Starlette(...)`` or ``FastAPI(...)`` that opens cairnq.

    At start-up it opens the client and stores it as ``app.state.cairnq``; with a
    ``worker`` it also runs that worker in the application's event loop
    (``app.state.cairnq_worker``). At shutdown the worker stops claiming and
    drains its in-flight calls (up to its ``drain_timeout_ms``), then a client made
    here from ``url`` is closed. A ``client`` passed in is opened but left open:
    it belongs to the caller. To combine with the application's own lifespan,
    enter it there: ``async with cairnq_lifespan(app): yield``.

    Args:
        url: A database URL or SQLite path to make the client from.
        client: An existing ``CairnQ`` client instead of ``url``.
        worker: A ``Worker`` with its handlers registered, run in-process. Without
            ``url`` or ``client``, endpoints get the worker's client.
        concurrency: Override the worker's handler calls at once.
        **client_options: Options for the client made from ``url`` (``CairnQ``'s).

    Returns:
        A function of the application giving an async context manager.

    Raises:
        InvalidArgument: neither ``url``, ``client`` nor ``worker``; both ``url``
            and ``client``; ``client_options`` without ``url``; a bad
            ``concurrency``. At start-up: a worker with no handlers registered.

    Example::

        app = FastAPI(lifespan=lifespan("sqlite:///tasks.db", worker=worker))
    """
    if url is not None and client is not None:
        raise InvalidArgument("lifespan takes a database URL or a client, not both")
    if url is None and client is None and worker is None:
        raise InvalidArgument(
            "lifespan needs a database URL (lifespan('sqlite:///tasks.db')), "
            "a client (client=CairnQ(...)) or a worker (worker=Worker(...))"
        )
    if client_options and url is None:
        raise InvalidArgument(
            f"client options {sorted(client_options)} apply to a client made from a URL; "
            "configure the client you pass instead"
        )
    if client is not None and not isinstance(client, CairnQ):
        raise InvalidArgument(
            f"client must be a cairnq.CairnQ (the async client), not {type(client).__name__}"
        )
    if worker is not None and not isinstance(worker, Worker):
        raise InvalidArgument(f"worker must be a cairnq.Worker, not {type(worker).__name__}")
    if concurrency is not None:
        if worker is None:
            raise InvalidArgument("concurrency applies to a worker; pass worker=")
        check_int(concurrency, "concurrency", low=1, high=100_000)

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[None]:
        if worker is not None and not worker.registry.names():
            raise InvalidArgument(
                f"the worker {worker.worker_id} has no task handlers registered: import "
                "the module that declares them (@worker.task) before the application starts"
            )
        owned = CairnQ(url, **client_options) if url is not None else None
        cq = owned or client or (worker.client if worker is not None else None)
        assert cq is not None
        try:
            await cq.open()
            async with contextlib.AsyncExitStack() as stack:
                if worker is not None:
                    stack.push_async_callback(worker.close)
                    await stack.enter_async_context(worker.background(concurrency=concurrency))
                setattr(app.state, STATE_KEY, cq)
                setattr(app.state, f"{STATE_KEY}_worker", worker)
                try:
                    yield
                finally:
                    setattr(app.state, STATE_KEY, None)
                    setattr(app.state, f"{STATE_KEY}_worker", None)
        finally:
            if owned is not None:
                await owned.close()

    return run


def get_client(request: Request) -> CairnQ:
    """The client ``lifespan`` opened for this request's application.

    Args:
        request: The Starlette (or FastAPI) request.

    Returns:
        The open ``CairnQ`` client.

    Raises:
        StoreClosed: the application has no open client (its ``lifespan`` is not
            cairnq's, or it has shut down).

    Example::

        async def submit(request):
            task = await get_client(request).submit("email.send", {"to": "ada@example.com"})
            return JSONResponse({"id": task.id})
    """
    cq = getattr(request.app.state, STATE_KEY, None)
    if not isinstance(cq, CairnQ):
        raise StoreClosed(
            "no cairnq client is open for this application: give it "
            "lifespan=cairnq.contrib.starlette.lifespan(...) (or enter that lifespan in its own)"
        )
    return cq


def get_worker(request: Request) -> Worker | None:
    """The worker ``lifespan`` runs in this application, or ``None`` when it runs none."""
    worker = getattr(request.app.state, f"{STATE_KEY}_worker", None)
    return worker if isinstance(worker, Worker) else None


def _snapshot(task: Task) -> tuple[Any, ...]:
    return (task.status, task.progress, task.message, task.attempt)


async def follow(
    cq: CairnQ, task_id: str, *, poll: Duration | None = None, poll_ms: int | None = None
) -> AsyncIterator[Task]:
    """The task now, then each time its status, progress, message or attempt changes.

    The task is read every ``poll``, and at once when it finishes in this process
    (or, on PostgreSQL, anywhere: NOTIFY). Each read shows the latest values, so
    several ``ctx.progress`` calls between two reads appear as the last of them.
    The iteration ends after yielding the finished task (succeeded, failed or
    canceled).

    Args:
        cq: An open client.
        task_id: The task to follow.
        poll: Longest time between two reads, a duration (``"250ms"``, seconds
            as a number, a ``timedelta``; 250 ms).
        poll_ms: The old spelling (int ms), kept for one release; it warns once.

    Yields:
        ``Task`` snapshots, the last one finished.

    Raises:
        InvalidArgument: a bad ``poll``, or no task ``task_id``.

    Example::

        async for task in follow(cq, task.id):
            print(task.status, task.progress, task.message)
    """
    interval = _poll_ms(poll, poll_ms, "follow") / 1000
    last: tuple[Any, ...] | None = None
    with cq.backend.hub.subscribe(wants_done(task_id), channels=("done",)) as sub:
        await sub.until_live_async(LIVE_WAIT_S)
        while True:
            sub.clear()
            task = await cq.get(task_id)
            if task is None:
                raise InvalidArgument(f"no task {task_id!r}")
            if _snapshot(task) != last:
                last = _snapshot(task)
                yield task
            if task.is_terminal:
                return
            await sub.wait_async(interval)


def _event(kind: str, data: dict[str, Any]) -> bytes:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {kind}\ndata: {body}\n\n".encode()


def _poll_ms(poll: Duration | None, poll_ms: int | None, where: str) -> int:
    """The poll interval in milliseconds: ``poll``, or the old ``poll_ms`` (warns once)."""
    if poll_ms is not None:
        renamed(f"{where}(poll_ms=...)", f"{where}(poll=...) (a duration)")
    ms = duration_or_ms(poll, poll_ms, "poll", low_ms=1)
    return DEFAULT_FOLLOW_POLL_MS if ms is None else ms


async def task_events(
    cq: CairnQ, task_id: str, *, poll: Duration | None = None, poll_ms: int | None = None
) -> Response:
    """A server-sent-events response following a task until it finishes.

    Each change (see ``follow``) is an ``event: progress`` whose data is
    ``{"id", "status", "progress", "message", "attempt"}``; the finished task is
    one ``event: done`` with ``{"id", "status", "result", "error", "progress",
    "message"}``, and the stream ends. An unknown task id gets a 404 JSON response instead.

    Args:
        cq: An open client.
        task_id: The task to follow.
        poll: Longest time between two reads, a duration (250 ms).
        poll_ms: The old spelling (int ms), kept for one release; it warns once.

    Returns:
        A ``text/event-stream`` response (404 when there is no such task).

    Raises:
        InvalidArgument: a bad ``poll``.

    Example::

        @app.get("/tasks/{task_id}/events")
        async def events(task_id: str, cq: Client):
            return await task_events(cq, task_id)
    """
    interval_ms = _poll_ms(poll, poll_ms, "task_events")
    if await cq.get(task_id) is None:
        return JSONResponse({"error": f"no task {task_id!r}"}, status_code=404)

    async def stream() -> AsyncIterator[bytes]:
        async for task in follow(cq, task_id, poll=datetime.timedelta(milliseconds=interval_ms)):
            if task.is_terminal:
                yield _event(
                    "done",
                    {
                        "id": task.id,
                        "status": task.status,
                        "result": task.result,
                        "error": task.error,
                        "progress": task.progress,
                        "message": task.message,
                    },
                )
            else:
                yield _event(
                    "progress",
                    {
                        "id": task.id,
                        "status": task.status,
                        "progress": task.progress,
                        "message": task.message,
                        "attempt": task.attempt,
                    },
                )

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
