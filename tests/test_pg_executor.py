"""PostgreSQL through a ``PgExecutor``: asyncpg's pool (``create_pool_executor``) or the
application's own executor, next to cairnq's psycopg path on the same database."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cairnq import (
    CairnQ,
    PgExecutor,
    PgSession,
    PostgresStore,
    SchemaMismatch,
    StoreClosed,
    SyncCairnQ,
    TaskContext,
    UnsupportedBackend,
    Worker,
    create_pool_executor,
    kernel,
)
from cairnq._clock import Clock
from cairnq.backends import Backend, PgExecutorBackend
from cairnq.drivertest import *  # noqa: F403
from cairnq.extensions.workflows._component import LEASE_NAME as WORKFLOW_SWEEP_LEASE
from cairnq.workflows import PARKED_RUN_AT_MS as PARKED

from ._db import Database, admin_connect, drop_schema
from ._waits import eventually, results_of
from .test_driver_suite import DatabaseDriver

pytestmark = pytest.mark.postgres
T = TypeVar("T")


def asyncpg_url(dsn: str) -> str:
    """The test database as the URL asyncpg takes (the fixture gives libpq key=value text)."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host", "127.0.0.1")
    port = parts.get("port", "5432")
    return f"postgresql://{user}{host}:{port}/{parts['dbname']}"


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema name for one test, dropped afterwards."""
    schema = f"t_{secrets.token_hex(5)}"
    yield schema
    drop_schema(pg_dsn, schema)


@pytest.fixture
async def executor(pg_dsn: str, pg_schema: str) -> AsyncIterator[PgExecutor]:
    """asyncpg's pool executor on the test schema."""
    executor = create_pool_executor(asyncpg_url(pg_dsn), max_size=4, schema=pg_schema)
    yield executor
    await executor.close()


# --- the driver suite on the executor backend -------------------------------------


class _LoopThread:
    """An event loop on a thread of its own: the executor's home while the suite runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class ExecutorDriver(DatabaseDriver):
    """The driver suite's ``Driver``: backends on asyncpg's pool executor, run from the
    suite's thread while the executor's loop runs on another."""

    def __init__(self, database: Database, loop: _LoopThread, dsn: str) -> None:
        super().__init__(database, "postgres-executor", "postgres")
        self._loop = loop
        self._dsn = dsn
        self._opened: list[tuple[PgExecutorBackend, PgExecutor]] = []

    def open(self, *, clock: Clock | None = None) -> Backend:
        schema = self.database.schema

        async def opened() -> tuple[PgExecutorBackend, PgExecutor]:
            executor = create_pool_executor(self._dsn, max_size=2, schema=schema)
            backend = PgExecutorBackend(executor, schema=schema, clock=clock, listen=False)
            await backend.aopen()
            return backend, executor

        backend, executor = self._loop.call(opened())
        self._opened.append((backend, executor))
        return backend

    def close(self) -> None:
        for backend, executor in self._opened:
            self._loop.call(backend.aclose())
            self._loop.call(executor.close())


@pytest.fixture
def driver(pg_db: Database, pg_dsn: str) -> Iterator[ExecutorDriver]:
    """An empty, migrated schema (``pg_db``'s), reached through asyncpg's pool executor."""
    loop = _LoopThread()
    suite_driver = ExecutorDriver(pg_db, loop, asyncpg_url(pg_dsn))
    try:
        yield suite_driver
    finally:
        suite_driver.close()
        loop.stop()


# --- the client and the worker on an executor ---------------------------------------


async def test_a_task_submitted_through_an_executor_is_run_by_a_worker_on_it(
    executor: PgExecutor, pg_schema: str
) -> None:
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=50)

    @worker.task
    async def add(ctx: TaskContext, payload: Any) -> int:
        return int(payload["a"]) + int(payload["b"])

    async with CairnQ.postgres(executor, schema=pg_schema) as cq, worker.background():
        task = await cq.submit("add", {"a": 2, "b": 3})
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.result, done.worker_id) == ("succeeded", 5, worker.worker_id)


async def test_an_executor_whose_asyncpg_pool_was_closed_raises_store_closed(
    executor: PgExecutor, pg_schema: str
) -> None:
    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        await cq.submit("job")
        await (await executor.pool()).close()  # type: ignore[attr-defined]
        with pytest.raises(StoreClosed, match="pool was closed"):
            await cq.stats()


async def test_an_executor_client_gets_cancels_retries_and_counts_tasks(
    executor: PgExecutor, pg_schema: str
) -> None:
    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        task = await cq.submit("report", {"month": 11}, key="report:11")
        again = await cq.submit("report", {"month": 11}, key="report:11")
        canceled = await cq.cancel(task.id)
        retried = await cq.retry(task.id)
        stats = await cq.stats()
        fetched = await cq.get(task.id)
    assert again.id == task.id
    assert canceled is not None and canceled.status == "canceled"
    assert retried is not None and retried.status == "queued"
    assert fetched is not None and fetched.payload == {"month": 11}
    assert stats["default"]["queued"] == 1


async def test_the_executor_applies_cairnqs_migrations_in_its_schema(
    executor: PgExecutor, pg_schema: str, pg_dsn: str
) -> None:
    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        await cq.submit("noop")
        applied = cq.backend.migrations_applied  # type: ignore[attr-defined]
    with admin_connect(pg_dsn) as conn:
        where = {
            schema
            for (schema,) in conn.execute(
                "select table_schema from information_schema.tables"
                " where table_name = 'cairnq_tasks'"
            )
        }
    # Other schemas of the test database may hold cairnq tables too (the pooled one).
    assert pg_schema in where and "public" not in where
    assert "0001_init.sql" in applied and "x0001_locks.sql" in applied


async def test_an_executor_in_another_schema_than_the_one_named_is_refused(
    pg_dsn: str, pg_schema: str
) -> None:
    other = create_pool_executor(asyncpg_url(pg_dsn), schema=pg_schema)
    try:
        with pytest.raises(SchemaMismatch):
            await CairnQ.postgres(other, schema="somewhere_else").submit("noop")
    finally:
        await other.close()


async def test_an_awaited_create_pool_executor_is_the_open_executor(
    pg_dsn: str, pg_schema: str
) -> None:
    executor = await create_pool_executor(asyncpg_url(pg_dsn), schema=pg_schema)
    try:
        rows = await executor.query("select current_schema() as s, $1::int as n", [7])
    finally:
        await executor.close()
    assert (rows[0]["s"], rows[0]["n"]) == (pg_schema, 7)


async def test_succeed_in_commits_the_handlers_write_and_the_completion_together(
    executor: PgExecutor, pg_schema: str
) -> None:
    await executor.execute("create table effects (task_id text, attempt int)")
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=50)

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(session: PgSession) -> dict[str, int]:
            await session.query("insert into effects values ($1, $2)", [ctx.task_id, ctx.attempt])
            return {"rows": 1}

        await ctx.succeed_in(write)

    async with CairnQ.postgres(executor, schema=pg_schema) as cq, worker.background():
        task = await cq.submit("record")
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    rows = await executor.query("select task_id, attempt from effects", [])
    assert (done.status, done.result) == ("succeeded", {"rows": 1})
    assert [(r["task_id"], r["attempt"]) for r in rows] == [(task.id, 1)]


async def test_succeed_in_releases_a_dependent_in_its_transaction(
    executor: PgExecutor, pg_schema: str
) -> None:
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=50)
    due_once_committed: list[bool] = []

    async with CairnQ.postgres(executor, schema=pg_schema) as cq:

        @worker.task
        async def first(ctx: TaskContext, payload: Any) -> None:
            await ctx.succeed_in(lambda session: asyncio.sleep(0))
            dependent = await cq.get_by_key("dependent")
            due_once_committed.append(dependent is not None and dependent.run_at_ms < PARKED)

        @worker.task
        async def after(ctx: TaskContext, payload: Any) -> None:
            return None

        # No workflow sweep: its named lease is held for another process.
        lease = kernel.lock_acquire(WORKFLOW_SWEEP_LEASE, "elsewhere", 3_600_000)
        assert await cq.backend.arun(lease, write=True)
        a = await cq.submit("first")
        b = await cq.submit("after", key="dependent", depends_on=[a])
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(b.id)
    await worker.close()
    assert due_once_committed == [True]
    assert done is not None and done.status == "succeeded"


async def test_succeed_in_rolls_the_handlers_write_back_when_it_raises(
    executor: PgExecutor, pg_schema: str
) -> None:
    await executor.execute("create table effects (task_id text)")
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=50)

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(session: PgSession) -> None:
            await session.query("insert into effects values ($1)", [ctx.task_id])
            raise RuntimeError("after the insert")

        await ctx.succeed_in(write)

    async with CairnQ.postgres(executor, schema=pg_schema) as cq, worker.background():
        task = await cq.submit("record", max_attempts=1)
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert done.status == "failed"
    assert await executor.query("select task_id from effects", []) == []


async def test_an_idle_executor_worker_wakes_on_notify_long_before_its_poll_interval(
    executor: PgExecutor, pg_schema: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=120_000)
    backend = worker.client.backend
    probes = results_of(monkeypatch, "probe")

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return int(payload["n"])

    def idle_and_listening() -> bool:
        # Listening on "queued", and its claim found nothing: idle for the poll interval.
        channels = backend.listening_channels  # type: ignore[attr-defined]
        return channels == {"queued"} and bool(probes) and not any(probes)

    async with worker.background():
        await eventually(idle_and_listening, "an idle, listening worker")
        async with CairnQ.postgres(pg_dsn, schema=pg_schema, listen=False) as cq:
            task = await cq.submit("job", {"n": 4})
            done = await cq.wait(task.id, timeout_ms=5_000)
    await worker.close()
    assert (done.status, done.result, done.worker_id) == ("succeeded", 4, worker.worker_id)


async def test_an_executor_client_listens_only_while_it_waits(
    executor: PgExecutor, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq.backends import pg_executor

    monkeypatch.setattr(pg_executor, "LISTEN_LINGER_S", 0.0)

    async def channels_become(wanted: frozenset[str]) -> None:
        for _ in range(500):
            if backend.listening_channels == wanted:  # type: ignore[attr-defined]
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"never listened on exactly {set(wanted)}")

    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        backend = cq.backend
        task = await cq.submit("job", {"n": 1})
        before = backend.listening_channels  # type: ignore[attr-defined]
        waiter = asyncio.ensure_future(cq.wait(task.id, timeout_ms=30_000))
        await channels_become(frozenset({"done"}))
        await cq.cancel(task.id)
        assert (await waiter).status == "canceled"
        await channels_become(frozenset())
    assert before == frozenset()


class _NoListen:
    """An executor of the application's own, without ``listen``."""

    def __init__(self, inner: PgExecutor) -> None:
        self._inner = inner

    async def query(self, text: str, values: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        return await self._inner.query(text, values)

    async def execute(self, sql: str) -> Any:
        return await self._inner.execute(sql)

    def transaction(self) -> AbstractAsyncContextManager[PgSession]:
        return self._inner.transaction()

    async def close(self) -> None:
        await self._inner.close()


async def test_a_worker_on_an_executor_without_listen_polls_and_runs_tasks(
    executor: PgExecutor, pg_schema: str
) -> None:
    plain = _NoListen(executor)
    worker = Worker.postgres(plain, schema=pg_schema, poll_interval_ms=50)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "done"

    async with CairnQ.postgres(plain, schema=pg_schema) as cq, worker.background():
        task = await cq.submit("job")
        done = await cq.wait(task.id, timeout_ms=10_000)
        listening = worker.client.backend.listening  # type: ignore[attr-defined]
    await worker.close()
    assert (done.status, done.result, listening) == ("succeeded", "done", False)


def test_the_sync_client_refuses_an_executor_and_says_to_use_the_async_client(
    pg_dsn: str,
) -> None:
    executor = create_pool_executor(asyncpg_url(pg_dsn))
    with pytest.raises(UnsupportedBackend, match=r"async.*CairnQ\.postgres\(executor\)"):
        SyncCairnQ.postgres(executor)


def test_create_pool_executor_without_asyncpg_names_the_extra_to_install() -> None:
    program = (
        "import sys; sys.modules['asyncpg'] = None\n"
        "import cairnq\n"
        "try:\n    cairnq.create_pool_executor('postgresql://localhost/db')\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert 'pip install ".[asyncpg]"' in out


# --- interop with cairnq's psycopg path on the same database -------------------------


async def test_a_task_submitted_through_an_executor_is_run_by_a_psycopg_worker(
    executor: PgExecutor, pg_schema: str, pg_dsn: str
) -> None:
    worker = Worker.postgres(pg_dsn, schema=pg_schema, poll_interval_ms=50, listen=False)

    @worker.task
    async def greet(ctx: TaskContext, payload: Any) -> str:
        return f"hello {payload['who']}"

    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        task = await cq.submit("greet", {"who": "psycopg"})
        async with worker.background():
            done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.result, done.worker_id) == (
        "succeeded",
        "hello psycopg",
        worker.worker_id,
    )


async def test_a_task_submitted_through_psycopg_is_run_by_an_executor_worker(
    executor: PgExecutor, pg_schema: str, pg_dsn: str
) -> None:
    worker = Worker.postgres(executor, schema=pg_schema, poll_interval_ms=50)

    @worker.task
    async def greet(ctx: TaskContext, payload: Any) -> str:
        return f"hello {payload['who']}"

    async with CairnQ.postgres(pg_dsn, schema=pg_schema, listen=False) as cq:
        task = await cq.submit("greet", {"who": "asyncpg"})
        async with worker.background():
            done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.result, done.worker_id) == (
        "succeeded",
        "hello asyncpg",
        worker.worker_id,
    )


async def test_a_task_submitted_in_the_applications_executor_transaction_appears_at_commit(
    executor: PgExecutor, pg_schema: str
) -> None:
    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        async with executor.transaction() as session:
            task = await cq.submit("orders.confirm", {"order": 42}, conn=session)
            seen_before_commit = await cq.get(task.id)
        seen_after_commit = await cq.get(task.id)
    assert seen_before_commit is None
    assert seen_after_commit is not None and seen_after_commit.status == "queued"


async def test_a_task_submitted_in_a_rolled_back_executor_transaction_leaves_nothing(
    executor: PgExecutor, pg_schema: str
) -> None:
    submitted: list[str] = []

    async def submit_then_fail(cq: CairnQ) -> None:
        async with executor.transaction() as session:
            task = await cq.submit("orders.confirm", {"order": 42}, conn=session)
            submitted.append(task.id)
            raise RuntimeError("roll back")

    async with CairnQ.postgres(executor, schema=pg_schema) as cq:
        with pytest.raises(RuntimeError, match="roll back"):
            await submit_then_fail(cq)
        assert submitted and await cq.get(submitted[0]) is None


class _DecodingExecutor:
    """An application's asyncpg executor whose connections decode jsonb (a type codec)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    async def query(self, text: str, values: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        rows: Sequence[Mapping[str, Any]] = await self._pool.fetch(text, *values)
        return rows

    async def execute(self, sql: str) -> Any:
        return await self._pool.execute(sql)

    def transaction(self) -> AbstractAsyncContextManager[PgSession]:
        raise AssertionError("not reached: the executor is refused on open")

    async def close(self) -> None:
        await self._pool.close()


async def test_an_executor_that_decodes_jsonb_is_refused_with_what_to_change(
    pg_dsn: str, pg_schema: str
) -> None:
    import json

    import asyncpg

    async def decode_jsonb(conn: Any) -> None:
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )

    decoding = _DecodingExecutor(
        await asyncpg.create_pool(asyncpg_url(pg_dsn), min_size=1, max_size=1, init=decode_jsonb)
    )
    try:
        with pytest.raises(UnsupportedBackend, match="json/jsonb"):
            await CairnQ.postgres(decoding).submit("noop")
    finally:
        await decoding.close()


# --- the PostgreSQL page (docs/postgres.md) ----------------------------------------


def _postgres_page_executor_block() -> str:
    text = (Path(__file__).resolve().parents[1] / "docs" / "postgres.md").read_text(
        encoding="utf-8"
    )
    section = text.split("**Through asyncpg, or an executor of your own.**", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_postgres_pages_executor_example_runs_as_written(
    pg_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import textwrap

    import cairnq

    code = _postgres_page_executor_block()
    code = code.replace('"postgresql://app@db/app"', repr(asyncpg_url(pg_dsn)))
    code = code.replace('"jobs"', repr(pg_schema))
    scope: dict[str, Any] = {name: getattr(cairnq, name) for name in cairnq.__all__}
    exec("async def example():\n" + textwrap.indent(code, "    "), scope)
    await scope["example"]()
    assert capsys.readouterr().out == "{'width': 320}\n"


def test_an_executor_client_and_worker_run_without_psycopg_installed(
    pg_dsn: str, pg_schema: str
) -> None:
    program = f"""
import asyncio, sys
sys.modules["psycopg"] = sys.modules["psycopg_pool"] = None
from cairnq import CairnQ, Worker, create_pool_executor

async def main():
    executor = create_pool_executor({asyncpg_url(pg_dsn)!r}, schema={pg_schema!r})
    worker = Worker.postgres(executor, schema={pg_schema!r}, poll_interval_ms=50)

    @worker.task
    async def double(ctx, payload):
        return payload * 2

    async with CairnQ.postgres(executor, schema={pg_schema!r}) as cq, worker.background():
        task = await cq.submit("double", 21)
        print((await cq.wait(task.id, timeout_ms=10_000)).result)
    await worker.close()
    await executor.close()

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out == "42\n"


async def test_a_postgres_store_over_an_executor_claims_heartbeats_and_completes(
    executor: PgExecutor, pg_schema: str
) -> None:
    store = PostgresStore(executor, schema=pg_schema)
    await store.connect()
    try:
        await store.submit(name="job", payload={"n": 1})
        [task] = await store.claim(queues=["default"], worker_id="w1", names=["job"])
        beat = await store.heartbeat(task_id=task.id, worker_id="w1", lease_ms=60_000)
        done = await store.complete(task_id=task.id, worker_id="w1", result={"n": 2})
    finally:
        await store.close()
    assert (beat.status, done.status, done.result) == ("running", "succeeded", {"n": 2})
