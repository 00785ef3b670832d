"""What only PostgreSQL gives: the application's transaction, push wake-ups, schemas."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    DatabaseError,
    InvalidArgument,
    LostLease,
    PostgresStore,
    SchemaMismatch,
    SyncCairnQ,
    TaskContext,
    UnsupportedBackend,
    Worker,
    create_pool_executor,
    kernel,
    migrate,
)
from cairnq.extensions import Component, Extension, Part, WorkerView
from cairnq.extensions.workflows._component import LEASE_NAME as WORKFLOW_SWEEP_LEASE
from cairnq.kernel.periodic import PeriodicJob
from cairnq.models import Lease, holder, new_nonce
from cairnq.testing import FakeClock
from cairnq.workflows import PARKED_RUN_AT_MS as PARKED

from ._db import Database, admin_connect, drop_schema
from ._waits import ClaimTurns, eventually

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
async def app_conn(pg_db: Database) -> AsyncIterator[Any]:
    """The application's own psycopg connection, pointed at the test schema."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_db.url)
    await conn.execute(f'create schema if not exists "{pg_db.schema}"')
    await conn.execute(f'set search_path to "{pg_db.schema}"')
    await conn.commit()
    yield conn
    await conn.close()


async def _effects_table(conn: Any) -> None:
    await conn.execute("create table if not exists effects (task_id text, attempt int)")
    await conn.commit()


async def _until_waiting_on_a_lock(db: Database, or_done: asyncio.Future[Any]) -> None:
    """Return once a session of this database waits on a lock, or ``or_done`` is done."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:

        async def waiting() -> bool:
            cur = await conn.execute(
                "select count(*) from pg_stat_activity "
                "where datname = current_database() and wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            return or_done.done() or bool(row and row[0])

        await eventually(waiting, "a session waiting on a lock")


async def _effect_rows(conn: Any) -> list[tuple[str, int]]:
    cur = await conn.execute("select task_id, attempt from effects order by attempt")
    rows = await cur.fetchall()
    await conn.commit()
    return [tuple(r) for r in rows]  # type: ignore[misc]


# --- enqueue inside the application's transaction -------------------------------------


async def test_submit_in_the_application_transaction_appears_at_commit(
    pg_db: Database, app_conn: Any
) -> None:
    async with pg_db.client() as cq:
        async with app_conn.transaction():
            task = await cq.submit("job", {"n": 1}, conn=app_conn)
            assert await cq.get(task.id) is None
        visible = await cq.get(task.id)
    assert visible is not None and visible.status == "queued"


async def test_submit_in_a_rolled_back_transaction_leaves_nothing(
    pg_db: Database, app_conn: Any
) -> None:
    async with pg_db.client() as cq:
        submitted: list[str] = []

        async def request() -> None:
            async with app_conn.transaction():
                submitted.append((await cq.submit("job", {}, key="k1", conn=app_conn)).id)
                raise RuntimeError("the request failed")

        with pytest.raises(RuntimeError):
            await request()
        assert await cq.get(submitted[0]) is None
        assert await cq.get_by_key("k1") is None
        assert await cq.stats() == {}


def test_sync_submit_in_the_application_transaction(pg_db: Database) -> None:
    import psycopg

    with psycopg.connect(pg_db.url, autocommit=True) as conn, pg_db.sync_client() as cq:
        conn.execute(f'set search_path to "{pg_db.schema}"')
        with conn.transaction():
            task = cq.submit("job", {}, conn=conn)
            assert cq.get(task.id) is None
        assert cq.get(task.id) is not None


async def test_submit_with_a_connection_on_sqlite_is_unsupported(sqlite_db: Database) -> None:
    async with sqlite_db.client() as cq:
        with pytest.raises(UnsupportedBackend):
            await cq.submit("job", {}, conn=object())
        assert await cq.stats() == {}


# --- completion inside the application's transaction ----------------------------------


async def test_succeed_in_commits_the_write_and_the_completion_together(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    worker = pg_db.worker(poll_interval_ms=20)

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> dict[str, int]:
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, ctx.attempt))
            return {"rows": 1}

        await ctx.succeed_in(write)

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {})
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", {"rows": 1})
    assert await _effect_rows(app_conn) == [(task.id, 1)]


async def test_an_attempt_settled_by_succeed_in_is_recorded_in_the_attempt_history(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    worker = pg_db.worker(poll_interval_ms=20, worker_id="w-in-tx")

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> None:
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, ctx.attempt))

        await ctx.succeed_in(write)

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {})
        await cq.wait(task.id, timeout_ms=10_000)
        attempts = await cq.attempts.list(task.id)
    await worker.close()
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [(1, "succeeded", "w-in-tx")]


async def test_succeed_in_rolls_the_write_back_when_it_raises(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    worker = pg_db.worker(poll_interval_ms=20)

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> None:
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, 1))
            raise ValueError("constraint the application enforces")

        await ctx.succeed_in(write)

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {}, max_attempts=1)
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert done.status == "failed"
    assert done.error["type"] == "ValueError"
    assert await _effect_rows(app_conn) == []


async def test_succeed_in_after_a_cancel_skips_the_write_and_ends_canceled(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    worker = pg_db.worker(poll_interval_ms=20, heartbeat_interval="50ms", lease_ms=600)
    started = asyncio.Event()
    writes: list[str] = []
    settled_as: list[str] = []

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> None:
            writes.append(ctx.task_id)
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, 1))

        started.set()
        while not await ctx.canceled():  # a handler that settles whatever it is told
            await asyncio.sleep(0.01)
        task = await ctx.succeed_in(write)
        settled_as.append(task.status if task is not None else "none")

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {})
        await asyncio.wait_for(started.wait(), 10)
        await cq.cancel(task.id)
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert done.status == "canceled"
    assert (writes, settled_as) == ([], ["canceled"])
    assert await _effect_rows(app_conn) == []


async def test_a_cancel_during_succeed_in_waits_and_the_task_ends_succeeded(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    worker = pg_db.worker(poll_interval_ms=20)
    cancel_now = asyncio.Event()
    cancels: list[asyncio.Future[Any]] = []

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> dict[str, int]:
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, 1))
            cancel_now.set()
            await eventually(lambda: cancels, "the cancel sent")
            await _until_waiting_on_a_lock(pg_db, or_done=cancels[0])  # on the row lock
            return {"rows": 1}

        await ctx.succeed_in(write)

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {})
        await asyncio.wait_for(cancel_now.wait(), 10)
        cancels.append(asyncio.ensure_future(cq.cancel(task.id)))
        canceled = await cancels[0]
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert canceled is None  # it landed after the success: nothing left to cancel
    assert (done.status, done.cancel_requested_at_ms) == ("succeeded", None)
    assert await _effect_rows(app_conn) == [(task.id, 1)]


async def test_succeed_in_with_a_write_longer_than_the_lease_still_succeeds_once(
    pg_db: Database, app_conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _effects_table(app_conn)
    turns = ClaimTurns(monkeypatch)
    lease_ms = 200
    worker = pg_db.worker(poll_interval_ms=20, lease_ms=lease_ms, heartbeat_interval="50ms")
    events: list[str] = []
    worker.subscribe(lambda event: events.append(event.kind))

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> None:
        async def write(conn: Any) -> dict[str, int]:
            await conn.execute("insert into effects values (%s, %s)", (ctx.task_id, ctx.attempt))
            # Past two leases (the row lock is the ownership), and the claims that recover
            # expired leases have run meanwhile.
            lease_until = (await cq.get(ctx.task_id)).lease_until_ms  # type: ignore[union-attr]
            await eventually(lambda: time.time() * 1000 > lease_until + lease_ms, "two leases")
            await turns.passed(3)
            return {"rows": 1}

        await ctx.succeed_in(write)

    async with pg_db.client() as cq, worker.background():
        task = await cq.submit("record", {}, max_attempts=1)
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.result, done.attempt) == ("succeeded", {"rows": 1}, 1)
    assert await _effect_rows(app_conn) == [(task.id, 1)]
    assert events == ["started", "succeeded"]


async def test_succeed_in_after_a_lost_lease_raises_and_leaves_exactly_one_effect(
    pg_db: Database, app_conn: Any
) -> None:
    await _effects_table(app_conn)
    clock = FakeClock()
    release = asyncio.Event()
    started = asyncio.Event()
    outcomes: list[str] = []

    def make_worker() -> Worker:
        worker = pg_db.worker(
            clock=clock, poll_interval_ms=20, lease_ms=60_000, heartbeat_interval="50s"
        )

        @worker.task
        async def record(ctx: TaskContext, payload: Any) -> None:
            if ctx.attempt == 1:
                started.set()
                await release.wait()

            async def write(conn: Any) -> int:
                await conn.execute(
                    "insert into effects values (%s, %s)", (ctx.task_id, ctx.attempt)
                )
                return ctx.attempt

            try:
                await ctx.succeed_in(write)
                outcomes.append(f"attempt {ctx.attempt} committed")
            except LostLease:
                outcomes.append(f"attempt {ctx.attempt} lost its lease")
                raise

        return worker

    first, second = make_worker(), make_worker()
    async with pg_db.client(clock=clock) as cq:
        task = await cq.submit("record", {})
        async with first.background():
            await asyncio.wait_for(started.wait(), 10)
            clock.advance(60_001)
            async with second.background():
                done = await cq.wait(task.id, timeout_ms=10_000)
            release.set()
            await eventually(lambda: len(outcomes) == 2, "both attempts' outcomes")
    await first.close()
    await second.close()
    assert (done.status, done.result, done.attempt) == ("succeeded", 2, 2)
    assert outcomes == ["attempt 2 committed", "attempt 1 lost its lease"]
    assert await _effect_rows(app_conn) == [(task.id, 2)]


async def test_succeed_in_on_sqlite_is_unsupported_as_it_cannot_share_a_transaction(
    sqlite_db: Database,
) -> None:
    worker = sqlite_db.worker(poll_interval_ms=20)
    raised: list[BaseException] = []

    @worker.task
    async def record(ctx: TaskContext, payload: Any) -> str:
        try:
            await ctx.succeed_in(lambda conn: asyncio.sleep(0))
        except UnsupportedBackend as exc:
            raised.append(exc)
        return "fell back"

    async with sqlite_db.client() as cq, worker.background():
        assert await cq.call("record", {}, timeout_ms=10_000) == "fell back"
    await worker.close()
    assert len(raised) == 1
    assert "cannot share a transaction" in str(raised[0])


# --- push wake-ups ----------------------------------------------------------------------


def _submit_from_another_process(db: Database, count: int = 1) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests._child", "submit", db.spec(), str(count), "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


async def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_an_idle_worker_wakes_on_notify_long_before_its_poll_interval(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = pg_db.worker(listen=True, poll_interval_ms=120_000)
    backend = worker.client.backend
    probes: list[tuple[bool, bool]] = []  # (listening when it began, found work)
    probe = kernel.probe

    def recorded(queues: Any, names: Any) -> Any:
        listening = backend.listening  # type: ignore[attr-defined]
        found = yield from probe(queues, names)
        probes.append((listening, found))
        return found

    monkeypatch.setattr(kernel, "probe", recorded)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return int(payload["n"])

    async with pg_db.client() as cq, worker.background():
        # Listening, then found nothing: idle for the poll interval.
        await _until(lambda: (True, False) in probes)
        [task_id] = _submit_from_another_process(pg_db)
        done = await cq.wait(task_id, timeout_ms=10_000)
    await worker.close()
    assert (done.status, done.worker_id) == ("succeeded", worker.worker_id)


async def test_a_client_that_only_submits_listens_on_no_channel(pg_db: Database) -> None:
    async with pg_db.client(listen=True) as cq:
        backend = cq.backend
        await cq.submit("job", {"n": 1})
        await _until(lambda: backend.listening)  # type: ignore[attr-defined]
        await cq.submit("job", {"n": 2})
        assert backend.listening_channels == frozenset()  # type: ignore[attr-defined]


async def test_a_wait_listens_on_done_until_it_returns(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq.backends import _postgres_core

    monkeypatch.setattr(_postgres_core, "LISTEN_LINGER_S", 0.0)
    async with pg_db.client(listen=True) as cq:
        backend = cq.backend
        task = await cq.submit("job", {"n": 1})
        waiter = asyncio.ensure_future(cq.wait(task.id, timeout_ms=30_000))
        await _until(lambda: backend.listening_channels == {"done"})  # type: ignore[attr-defined]
        await cq.cancel(task.id)
        assert (await waiter).status == "canceled"
        await _until(lambda: backend.listening_channels == frozenset())  # type: ignore[attr-defined]


async def test_a_running_worker_listens_on_queued_and_not_on_done(pg_db: Database) -> None:
    worker = pg_db.worker(listen=True, poll_interval_ms=50)
    backend = worker.client.backend

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return int(payload["n"])

    async with worker.background():
        await _until(lambda: backend.listening_channels == {"queued"})  # type: ignore[attr-defined]
        [task_id] = _submit_from_another_process(pg_db)
        await _until(lambda: pg_db.backend().run(kernel.get(task_id), write=False).is_terminal)
        channels = backend.listening_channels  # type: ignore[attr-defined]
    await worker.close()
    assert channels == {"queued"}


async def test_a_wait_returns_when_a_worker_in_another_process_finishes_the_task(
    pg_db: Database, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests._child",
            "worker",
            pg_db.spec(),
            str(tmp_path / "log"),
            str(stop),
            "1",
        ],
        cwd=ROOT,
    )
    try:
        async with pg_db.client(listen=True, listen_health=3600) as cq:
            # Due after the wait's first look, which then naps for ten minutes and
            # no health probe pokes it: only the completion's notification can end
            # the wait within the minute.
            task = await cq.submit("job", {"n": 5}, delay_ms=1_500)
            waiting = cq.wait(task.id, timeout_ms=600_000, poll_ms=600_000, max_poll_ms=600_000)
            done = await asyncio.wait_for(waiting, 60)
    finally:
        stop.touch()
        child.wait(timeout=30)
    assert (done.status, done.result["n"]) == ("succeeded", 5)


async def test_a_worker_keeps_polling_when_its_listen_connection_dies_then_listens_again(
    pg_db: Database,
) -> None:
    import psycopg

    worker = pg_db.worker(listen=True, poll_interval_ms=300)
    backend = worker.client.backend

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return int(payload["n"])

    async with pg_db.client() as cq, worker.background():
        await _until(lambda: backend.listening)  # type: ignore[attr-defined]
        with admin_connect(pg_db.url) as admin:
            killed = admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where application_name = 'cairnq-listen' and datname = current_database()"
            ).fetchall()
        assert killed
        await _until(lambda: not backend.listening)  # type: ignore[attr-defined]
        [task_id] = _submit_from_another_process(pg_db)
        done = await cq.wait(task_id, timeout_ms=10_000)
        assert done.status == "succeeded"
        await _until(lambda: backend.listening, timeout=15)  # type: ignore[attr-defined]
        with backend.hub.subscribe(lambda e: e.channel == "queued" and e.value == "probe-q") as sub:
            async with await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True) as raw:
                await raw.execute("select pg_notify('cairnq_queued', 'probe-q')")
            assert await sub.wait_async(5.0)
    await worker.close()


async def test_watch_yields_queued_done_and_timer_signals(db: Database) -> None:
    async with db.client() as cq:
        signals = cq.watch(["default"], poll_ms=50)
        first = await signals.__anext__()
        task = await cq.submit("job", {})
        second = await signals.__anext__()
        await cq.cancel(task.id)
        third = await signals.__anext__()
        await signals.aclose()
    assert first.kind == "poll"
    assert (second.kind, second.value) == ("queued", "default")
    assert (third.kind, third.value) == ("done", task.id)


# --- heartbeats --------------------------------------------------------------------------


async def test_heartbeats_skip_a_row_an_application_transaction_holds(
    pg_db: Database, app_conn: Any
) -> None:
    worker = pg_db.worker(
        poll_interval_ms=20, concurrency=2, lease_ms=3000, heartbeat_interval="100ms"
    )
    release = asyncio.Event()
    contexts: list[TaskContext] = []

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        contexts.append(ctx)
        await release.wait()

    async with pg_db.client() as cq, worker.background():
        locked = await cq.submit("hold", {})
        free = await cq.submit("hold", {})
        await _until(lambda: len(contexts) == 2)
        async with app_conn.transaction():
            await app_conn.execute(
                "select 1 from cairnq_tasks where id = %s for update", (locked.id,)
            )

            async def lease_until() -> int:
                return (await cq.get(free.id)).lease_until_ms or 0  # type: ignore[union-attr]

            # Two renewals: the worker has read the answer to the first by the second.
            before = await lease_until()
            once = await eventually(lambda: _later(lease_until, before), "a renewal")
            after = await eventually(lambda: _later(lease_until, once), "a second renewal")
        assert after > before
        assert not any(c.lost_lease for c in contexts)
        release.set()
        results = [await cq.wait(t.id, timeout_ms=10_000) for t in (locked, free)]
    await worker.close()
    assert [r.status for r in results] == ["succeeded", "succeeded"]


async def _later(read: Any, than: int) -> int:
    """What ``read()`` returns when it is later than ``than``, else 0."""
    value = await read()
    return value if value > than else 0


async def test_every_connection_names_cairnq_and_its_role(pg_db: Database) -> None:
    worker = Worker.postgres(
        pg_db.url, schema=pg_db.schema, poll_interval_ms=20, heartbeat_interval="50ms"
    )
    release = asyncio.Event()
    started = asyncio.Event()

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await release.wait()

    expected = {"cairnq-client", "cairnq-worker", "cairnq-heartbeat", "cairnq-listen"}

    def names() -> set[str]:
        with admin_connect(pg_db.url) as admin:
            return {
                r[0]
                for r in admin.execute(
                    "select application_name from pg_stat_activity "
                    "where datname = current_database() and application_name like 'cairnq%'"
                )
            }

    async with CairnQ.postgres(pg_db.url, schema=pg_db.schema) as cq, worker.background():
        await cq.submit("hold", {})
        await asyncio.wait_for(started.wait(), 10)
        await eventually(lambda: expected <= names(), "every role's connection")
        release.set()
    await worker.close()


# --- the connection pool -----------------------------------------------------------------


def test_the_blocking_pool_hands_out_the_connection_returned_last(pg_db: Database) -> None:
    """The connection used last runs the next statement (its plans ready), not the
    connection idle longest."""
    from cairnq.backends.postgres import PostgresBackend

    backend = PostgresBackend(pg_db.url, schema=pg_db.schema, listen=False, min_size=2)
    try:
        backend.open()
        pool = backend._sync_source
        with pool.connection() as first, pool.connection() as second:
            used_last = first.info.backend_pid
            assert second.info.backend_pid != used_last
        with pool.connection() as conn:
            assert conn.info.backend_pid == used_last
    finally:
        backend.close()


def test_the_pool_shrinks_by_the_connection_idle_longest(pg_db: Database) -> None:
    """The connections the pool hands out last stay; the one idle longest is closed."""
    from cairnq.backends.postgres import PostgresBackend

    backend = PostgresBackend(pg_db.url, schema=pg_db.schema, listen=False, max_size=3)
    try:
        backend.open()
        pool = backend._sync_source
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            idle_longest = c.info.backend_pid  # given back first
            kept = {a.info.backend_pid, b.info.backend_pid}
        pool._shrink_pool()  # psycopg_pool's own turn: counts the unused connections
        pool._shrink_pool()  # and closes one
        with pool.connection() as x, pool.connection() as y:
            assert {x.info.backend_pid, y.info.backend_pid} == kept
        assert idle_longest not in kept
    finally:
        backend.close()


async def test_the_async_pool_hands_out_the_connection_returned_last(pg_db: Database) -> None:
    from cairnq.backends.postgres import PostgresBackend

    backend = PostgresBackend(pg_db.url, schema=pg_db.schema, listen=False, min_size=2)
    try:
        await backend.aopen()
        pool = backend._async_source
        async with pool.connection() as first, pool.connection() as second:
            used_last = first.info.backend_pid
            assert second.info.backend_pid != used_last
        async with pool.connection() as conn:
            assert conn.info.backend_pid == used_last
    finally:
        await backend.aclose()


# --- schemas and migrations ------------------------------------------------------------------


@pytest.fixture
def empty_database(pg_dsn: str) -> Iterator[str]:
    """A whole database of its own (its public schema is touched)."""
    from psycopg.conninfo import make_conninfo

    name = f"cairnq_iso_{secrets.token_hex(4)}"
    with admin_connect(pg_dsn) as admin:
        admin.execute(f'create database "{name}"')
    yield make_conninfo(pg_dsn, dbname=name)
    with admin_connect(pg_dsn) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')


def test_two_schemas_in_one_database_stay_apart(pg_dsn: str) -> None:
    a, b = f"a_{secrets.token_hex(4)}", f"b_{secrets.token_hex(4)}"
    try:
        with (
            SyncCairnQ.postgres(pg_dsn, schema=a) as one,
            SyncCairnQ.postgres(pg_dsn, schema=b) as two,
        ):
            task = one.submit("job", {}, key="shared-key")
            other = two.submit("job", {}, key="shared-key")
            assert task.id != other.id
            assert one.get(other.id) is None and two.get(task.id) is None
            assert one.stats()["default"]["queued"] == 1
            assert two.stats()["default"]["queued"] == 1
    finally:
        drop_schema(pg_dsn, a)
        drop_schema(pg_dsn, b)


def test_tables_only_in_another_schema_raise_schema_mismatch_before_any_write(
    empty_database: str,
) -> None:
    with SyncCairnQ.postgres(empty_database, schema="jobs") as installed:
        installed.submit("job", {})
    with pytest.raises(SchemaMismatch, match="jobs"), SyncCairnQ.postgres(empty_database) as stray:
        stray.stats()
    with admin_connect(empty_database) as admin:
        public = admin.execute(
            "select count(*) from pg_tables "
            "where schemaname = 'public' and tablename like 'cairnq%'"
        ).fetchone()
    assert public == (0,)


def test_a_connection_whose_search_path_is_elsewhere_raises_schema_mismatch(
    empty_database: str,
) -> None:
    import psycopg

    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("create schema other")
        conn.execute("set search_path to other")
        with pytest.raises(SchemaMismatch), SyncCairnQ.postgres(conn, schema="jobs") as cq:
            cq.stats()


@pytest.mark.parametrize(
    "schema",
    ['we"ird', "semi;colon", "1starts_with_digit", "dot.ted", "x" * 64, "per%cent", "sp ace", ""],
)
def test_bad_schema_names_are_rejected(pg_dsn: str, schema: str) -> None:
    with pytest.raises(InvalidArgument):
        CairnQ.postgres(pg_dsn, schema=schema)


@pytest.mark.parametrize("entry", ["client", "store", "executor"])
def test_a_schema_that_is_not_a_plain_identifier_is_refused_in_the_reference_words(
    pg_dsn: str, entry: str
) -> None:
    make = {
        "client": lambda: CairnQ.postgres(pg_dsn, schema="my-jobs"),
        "store": lambda: PostgresStore(pg_dsn, schema="my-jobs"),
        "executor": lambda: create_pool_executor(pg_dsn, schema="my-jobs"),
    }[entry]
    with pytest.raises(ValueError, match="'my-jobs' is not a plain identifier"):
        make()


SYSTEM_SCHEMA = "belong to PostgreSQL itself"


@pytest.mark.parametrize(
    "schema",
    [
        "information_schema",
        "pg_catalog",
        "pg_toast",
        "pg_temp",
        "pg_temp_3",
        "pg_jobs",
        "PG_Catalog",
    ],
)
def test_a_system_schema_name_is_refused_saying_why(pg_dsn: str, schema: str) -> None:
    with pytest.raises(InvalidArgument, match=SYSTEM_SCHEMA):
        CairnQ.postgres(pg_dsn, schema=schema)


def _cli(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    from cairnq.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv, out=io.StringIO())
    return code, err.getvalue()


@pytest.mark.parametrize(
    "entry",
    ["client", "sync-client", "worker", "backend", "migrate", "cli-option", "cli-environment"],
)
def test_every_way_a_schema_name_enters_refuses_information_schema(
    pg_dsn: str, entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq.backends.postgres import PostgresBackend

    from .test_cli import cli_url

    url = cli_url(Database.postgres(pg_dsn, "unused"))
    schema = "information_schema"
    if entry.startswith("cli"):
        argv = ["migrate", "--db", url]
        if entry == "cli-option":
            argv += ["--schema", schema]
        else:
            monkeypatch.setenv("CAIRNQ_SCHEMA", schema)
        code, err = _cli(argv)
        assert code != 0 and SYSTEM_SCHEMA in err
    else:
        make = {
            "client": lambda: CairnQ.postgres(pg_dsn, schema=schema),
            "sync-client": lambda: SyncCairnQ.postgres(pg_dsn, schema=schema),
            "worker": lambda: Worker.postgres(pg_dsn, schema=schema),
            "backend": lambda: PostgresBackend(pg_dsn, schema=schema),
            "migrate": lambda: migrate(url, schema=schema, listen=False),
        }[entry]
        with pytest.raises(InvalidArgument, match=SYSTEM_SCHEMA):
            make()
    with admin_connect(pg_dsn) as conn:
        assert conn.execute(
            "select count(*) from pg_tables "
            "where schemaname = 'information_schema' and tablename like 'cairnq%'"
        ).fetchone() == (0,)


def test_a_dsn_whose_search_path_is_a_system_schema_is_refused_before_any_write(
    pg_dsn: str,
) -> None:
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(pg_dsn, options="-c search_path=information_schema")
    with pytest.raises(InvalidArgument, match=SYSTEM_SCHEMA), SyncCairnQ.postgres(dsn) as cq:
        cq.stats()
    with admin_connect(pg_dsn) as conn:
        assert conn.execute(
            "select count(*) from pg_tables "
            "where schemaname = 'information_schema' and tablename like 'cairnq%'"
        ).fetchone() == (0,)


def test_a_63_byte_schema_name_is_accepted(pg_dsn: str) -> None:
    schema = "s" * 63
    try:
        with SyncCairnQ.postgres(pg_dsn, schema=schema) as cq:
            assert cq.submit("job", {}).status == "queued"
    finally:
        drop_schema(pg_dsn, schema)


def test_migrations_can_be_run_explicitly_in_a_window(pg_dsn: str) -> None:
    schema = f"m_{secrets.token_hex(4)}"
    try:
        client = SyncCairnQ.postgres(pg_dsn, schema=schema, migrate=False)
        with pytest.raises(DatabaseError, match="run migrations"):
            client.open()
        client.close()
        from cairnq.backends.postgres import PostgresBackend

        url = "postgresql:///" + dict(p.split("=") for p in pg_dsn.split())["dbname"]
        url += "?host=127.0.0.1&port=5432"
        applied = migrate(url, schema=schema, listen=False)
        assert applied[0] == "0001_init.sql"
        assert applied[-30:] == [
            "0010_drop_status_index.sql",
            "x0001_locks.sql",
            "x0002_workers.sql",
            "x0003_leases.sql",
            "x0004_worker_names.sql",
            "x0005_schedules.sql",
            "x0006_limits.sql",
            "x0007_flow.sql",
            "x0008_workflows.sql",
            "x0009_steps.sql",
            "x0010_dependencies_satisfied.sql",
            "x0011_leases_forget.sql",
            "x0012_snoozes_forget.sql",
            "x0013_workflows_forget.sql",
            "x0014_steps_forget.sql",
            "x0015_limit_keys_unbound.sql",
            "x0016_workflows_keep_success.sql",
            "x0017_batches.sql",
            "x0018_uniqueness.sql",
            "x0019_waits.sql",
            "x0020_policies.sql",
            "x0021_pauses_until.sql",
            "x0022_fair_share.sql",
            "x0023_logs.sql",
            "x0024_search.sql",
            "x0025_waits_send_ids.sql",
            "x0026_search_errors.sql",
            "x0027_fair_index.sql",
            "x0028_attempt_rollups.sql",
            "x0029_fair_rekey.sql",
        ]
        backend = PostgresBackend(pg_dsn, schema=schema, listen=False)
        assert migrate(backend) == []
        backend.close()
        with SyncCairnQ.postgres(pg_dsn, schema=schema, migrate=False) as cq:
            assert cq.submit("job", {}).status == "queued"
    finally:
        drop_schema(pg_dsn, schema)


async def test_the_application_pool_serves_cairnq_without_a_second_pool(pg_db: Database) -> None:
    from psycopg_pool import AsyncConnectionPool

    async def configure(conn: Any) -> None:
        await conn.execute(f'create schema if not exists "{pg_db.schema}"')
        await conn.execute(f'set search_path to "{pg_db.schema}"')
        await conn.commit()

    pool = AsyncConnectionPool(pg_db.url, min_size=1, max_size=2, configure=configure, open=False)
    await pool.open()
    try:
        async with CairnQ.postgres(pool, schema=pg_db.schema) as cq:
            task = await cq.submit("job", {"n": 1})
            assert (await cq.get(task.id)) is not None
        assert not pool.closed
    finally:
        await pool.close()


async def test_listen_that_never_delivers_falls_back_to_polling_with_one_log_line(
    pg_db: Database, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from cairnq.backends import _postgres_core

    from ._pgproxy import dropping_notifications

    # The probe notification never arrives: its wait is all wall time, so it is kept short.
    monkeypatch.setattr(_postgres_core, "LISTEN_PROBE_TIMEOUT_S", 0.5)
    dbname = conninfo_to_dict(pg_db.url)["dbname"]
    with dropping_notifications() as proxy:
        dsn = make_conninfo(host="127.0.0.1", port=proxy.port, dbname=dbname, sslmode="disable")
        worker = Worker.postgres(dsn, schema=pg_db.schema, poll_interval_ms=100)

        @worker.task
        async def job(ctx: TaskContext, payload: Any) -> int:
            return int(payload["n"])

        with caplog.at_level("WARNING", logger="cairnq.postgres"):
            async with pg_db.client() as cq, worker.background():
                listener = worker.client.backend._listener  # type: ignore[attr-defined]
                await asyncio.wait_for(listener._task, 15)
                [task_id] = _submit_from_another_process(pg_db)
                done = await cq.wait(task_id, timeout_ms=10_000)
            await worker.close()
    assert done.status == "succeeded"
    assert not worker.client.backend.listening  # type: ignore[attr-defined]
    assert proxy.dropped >= 1
    fallbacks = [r for r in caplog.records if "falls back to polling" in r.getMessage()]
    assert len(fallbacks) == 1


async def test_submit_on_a_connection_outside_a_transaction_block_is_rolled_back_with_it(
    pg_db: Database,
) -> None:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_db.url)
    try:
        await conn.execute(f'create schema if not exists "{pg_db.schema}"')
        await conn.execute(f'set search_path to "{pg_db.schema}"')
        await conn.commit()
        async with pg_db.client() as cq:
            task = await cq.submit("job", {}, conn=conn)
            await conn.rollback()
            assert await cq.get(task.id) is None
            kept = await cq.submit("job", {}, conn=conn)
            await conn.commit()
            assert await cq.get(kept.id) is not None
    finally:
        await conn.close()


def test_sync_submit_outside_a_transaction_block_is_rolled_back_with_it(pg_db: Database) -> None:
    import psycopg

    with psycopg.connect(pg_db.url) as conn, pg_db.sync_client() as cq:
        cq.stats()
        conn.execute(f'set search_path to "{pg_db.schema}"')
        conn.commit()
        task = cq.submit("job", {}, conn=conn)
        conn.rollback()
        assert cq.get(task.id) is None


async def test_a_connection_given_as_the_backend_must_be_autocommit(pg_db: Database) -> None:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_db.url)
    try:
        with pytest.raises(InvalidArgument, match="autocommit=True"):
            CairnQ.postgres(conn)
    finally:
        await conn.close()


async def test_submit_on_a_connection_pointed_at_another_schema_is_refused(
    pg_db: Database,
) -> None:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True)
    try:
        async with pg_db.client() as cq:
            await cq.stats()
            with pytest.raises(SchemaMismatch):
                await cq.submit("job", {}, conn=conn)
            assert await cq.stats() == {}
    finally:
        await conn.close()


async def test_a_stale_write_waiting_on_a_new_claim_of_the_same_attempt_is_refused(
    pg_db: Database, app_conn: Any
) -> None:
    """A stale write that sees the old claim's row, then waits on the lock of a transaction
    that leaves the row as a new claim of the same attempt by the same worker id (what
    recovery, a reset retry and a claim leave, here in one transaction), is checked against
    the rows that transaction committed: not against the claim's worker_id value it read
    before."""
    clock = FakeClock()
    async with pg_db.client(clock=clock) as cq:
        task = await cq.submit("job", {}, max_attempts=1)
        claim = kernel.claim(["default"], "w", 60_000, [kernel.Draw(None, 1)], 100)
        stale = Lease.of((await cq.backend.arun(claim, write=True))[0])
        async with app_conn.transaction():
            await app_conn.execute(
                "update cairnq_tasks set lease_until_ms = lease_until_ms + 1, worker_id = %s"
                " where id = %s",
                (holder("w", new_nonce()), task.id),
            )
            write = asyncio.ensure_future(
                cq.backend.arun(kernel.complete(stale, "w", '"stale"'), write=True)
            )
            await _until_waiting_on_a_lock(pg_db, or_done=write)
            assert not write.done(), "the stale write should wait for the new claim's row lock"
        with pytest.raises(LostLease):
            await write
        current = await cq.get(task.id)
    assert current is not None and (current.status, current.result) == ("running", None)


async def test_a_keyed_submit_waits_for_a_retry_of_its_keys_task_and_reuses_it(
    pg_db: Database, app_conn: Any
) -> None:
    """A retry making the key's finished task live again, committing while a keyed submit
    decides: the submit sees the retried task and returns it, never a second live task."""
    async with pg_db.client() as cq:
        first = await cq.submit("job", {}, key="k")
        await cq.cancel(first.id)
        async with app_conn.transaction():  # a retry in progress (cairnq's retry statement)
            await app_conn.execute(
                "update cairnq_tasks set status = 'queued', completed_at_ms = null where id = %s",
                (first.id,),
            )
            submit = asyncio.ensure_future(cq.submit("job", {}, key="k", conflict="reuse"))
            await _until_waiting_on_a_lock(pg_db, or_done=submit)
            assert not submit.done(), "the keyed submit should wait for the retried row"
        again = await submit
        live = [t for t in await cq.list(limit=10) if t.status in ("queued", "running")]
    assert again.id == first.id
    assert [t.id for t in live] == [first.id]


# --- succeed_in and the task's dependents ----------------------------------------------


async def _no_workflow_sweep(cq: CairnQ) -> None:
    """Hold the workflow sweep's named lease for another process, so no worker of the
    test sweeps: a dependent is decided only by the transaction that ends its dependency."""
    held = await cq.backend.arun(
        kernel.lock_acquire(WORKFLOW_SWEEP_LEASE, "elsewhere", 3_600_000), write=True
    )
    assert held


async def test_succeed_in_releases_a_dependent_in_its_transaction(pg_db: Database) -> None:
    worker = pg_db.worker(poll_interval_ms=20)
    due_once_committed: list[bool] = []
    ran: list[str] = []

    async with pg_db.client() as cq:

        @worker.task
        async def first(ctx: TaskContext, payload: Any) -> None:
            await ctx.succeed_in(lambda conn: asyncio.sleep(0))
            dependent = await cq.get_by_key("dependent")
            due_once_committed.append(dependent is not None and dependent.run_at_ms < PARKED)

        @worker.task
        async def after(ctx: TaskContext, payload: Any) -> None:
            ran.append(ctx.task_id)

        await _no_workflow_sweep(cq)
        a = await cq.submit("first")
        b = await cq.submit("after", key="dependent", depends_on=[a])
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(b.id)
    assert due_once_committed == [True]
    assert done is not None and done.status == "succeeded" and ran == [b.id]


async def test_a_success_settled_by_succeed_in_and_purged_at_once_still_counts_for_its_dependent(
    pg_db: Database,
) -> None:
    clock = FakeClock()
    ran: list[str] = []
    settles_in = pg_db.worker(clock=clock, poll_interval_ms=20)
    returns = pg_db.worker(clock=clock, poll_interval_ms=20)

    @settles_in.task
    async def first(ctx: TaskContext, payload: Any) -> None:
        await ctx.succeed_in(lambda conn: asyncio.sleep(0))

    @returns.task
    async def second(ctx: TaskContext, payload: Any) -> None:
        ran.append("second")

    @returns.task
    async def after(ctx: TaskContext, payload: Any) -> None:
        ran.append("after")

    async with pg_db.client(clock=clock) as cq:
        await _no_workflow_sweep(cq)
        a = await cq.submit("first")
        b = await cq.submit("second")
        c = await cq.submit("after", depends_on=[a, b])
        await asyncio.wait_for(settles_in.run(until_idle=True), 60)
        clock.advance(1)
        assert await cq.purge(older_than_ms=0) == [a.id]
        await asyncio.wait_for(returns.run(until_idle=True), 60)
        done = await cq.get(c.id)
    assert done is not None and done.status == "succeeded"
    assert ran == ["second", "after"]


async def test_a_worker_whose_connection_pool_is_closed_under_it_stops_instead_of_retrying(
    pg_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = pg_db.worker(poll_interval_ms=20)

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        pass

    running = asyncio.ensure_future(worker.run())
    async with pg_db.client() as cq:
        task = await cq.submit("job")
        assert (await cq.wait(task.id, timeout_ms=10_000)).status == "succeeded"
    pool = worker.client.backend._async_source  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="cairnq"):
        # What the pool's guard does when the event loop it belongs to ends.
        await pool.close()
        await asyncio.wait_for(running, timeout=10)
    assert "the worker's backend was closed; stopping" in caplog.text
    await worker.close()


class _StuckOnClose(Extension):
    """An extension whose job's run waits, once the backend is closed, on what never
    comes (as a ``getconn`` queued just after the pool closed does until its timeout)."""

    name = "stuck"

    def __init__(self) -> None:
        self.closing = False
        self.waiting = asyncio.Event()

    def components(self, worker: WorkerView) -> list[Component]:
        async def run() -> None:
            if self.closing:
                self.waiting.set()
                await asyncio.Event().wait()

        class Stuck(Part):
            name = "stuck"
            job = PeriodicJob("stuck", run, interval_ms=5, phase="stuck")

        return [Stuck()]


async def test_a_worker_whose_backend_closed_stops_without_waiting_on_its_components_runs(
    pg_db: Database,
) -> None:
    stuck = _StuckOnClose()
    worker = pg_db.worker(poll_interval_ms=20, extensions=[stuck])

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        pass

    running = asyncio.ensure_future(worker.run())
    async with pg_db.client() as cq:
        task = await cq.submit("job")
        assert (await cq.wait(task.id, timeout_ms=10_000)).status == "succeeded"
    stuck.closing = True
    await asyncio.wait_for(stuck.waiting.wait(), 10)
    await worker.client.backend._async_source.close()  # type: ignore[attr-defined]
    await asyncio.wait_for(running, timeout=10)
    await worker.close()
