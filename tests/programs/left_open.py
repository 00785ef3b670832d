# A program that uses a client, backend or worker and ends without closing it.
#
# Usage: python left_open.py KIND BACKEND URL SCHEMA
#   KIND: client, backend, worker-background, worker-task, sync-client
#   BACKEND: sqlite (URL is sqlite:///path), psycopg (URL a DSN), asyncpg (URL an asyncpg URL)
#   SCHEMA: the PostgreSQL schema, or "" for none
# It prints "used" once it has run its calls, then returns from main (or the
# module) with everything still open; the process should exit at once.
import asyncio
import contextlib
import sys

from cairnq import CairnQ, SyncCairnQ, Worker
from cairnq.backends import Backend, SQLiteBackend

kind, backend_kind, url, schema = sys.argv[1:5]
STACK = contextlib.AsyncExitStack()
RUNNING: list[asyncio.Future[None]] = []


def backend() -> Backend:
    if backend_kind == "sqlite":
        return SQLiteBackend(url[len("sqlite:///") :])
    if backend_kind == "psycopg":
        from cairnq.backends.postgres import PostgresBackend

        return PostgresBackend(url, schema=schema)
    from cairnq import create_pool_executor
    from cairnq.backends.pg_executor import PgExecutorBackend

    executor = create_pool_executor(url, schema=schema)
    return PgExecutorBackend(executor, schema=schema, owns_executor=True)


async def concurrent_gets(cq: CairnQ) -> None:
    task = await cq.submit("job", {"n": 1})
    await asyncio.gather(*(cq.get(task.id) for _ in range(6)))


def worker() -> Worker:
    worker = Worker(CairnQ(backend()), poll_interval_ms=50)

    @worker.task
    async def job(ctx: object, payload: object) -> object:
        return payload

    return worker


async def main() -> None:
    if kind == "client":
        # Opened with retention: its sweeper runs on the loop too.
        await concurrent_gets(await CairnQ(backend(), retention=86_400_000).open())
    elif kind == "backend":
        # The backend alone, without a client around it.
        opened = backend()
        await opened.aopen()
    elif kind == "worker-background":
        running = worker()
        # Entered and never left (kept referenced): the program ends with the worker running.
        await STACK.enter_async_context(running.background())
        async with CairnQ(backend()) as cq:
            task = await cq.submit("job", {"n": 1})
            await cq.wait(task.id, timeout_ms=30_000)
    elif kind == "worker-task":
        running = worker()
        RUNNING.append(asyncio.ensure_future(running.run()))
        cq = CairnQ(backend())
        task = await cq.submit("job", {"n": 1})
        await cq.wait(task.id, timeout_ms=30_000)
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    print("used", flush=True)


if kind == "sync-client":
    sync = SyncCairnQ(backend(), retention=86_400_000).open()
    task = sync.submit("job", {"n": 1})
    for _ in range(6):
        sync.get(task.id)
    print("used", flush=True)
else:
    asyncio.run(main())
