"""Durable steps on a real database: replay on retry, step retries, the lease fence,
the sync handler's API, and transactional steps whose effect commits with the record.

Effects are counted outside cairnq (a dict in the test, or an application table), so a
step that ran again shows.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import Counter
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, LostLease, SerializationError, kernel
from cairnq.extensions.steps._ops import record_step
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database, admin_connect

START = 1_800_000_000_000


def _worker(db: Database, **options: Any) -> Any:
    return db.worker(poll_interval_ms=20, retry_backoff_ms=0, **options)


async def _claim(cq: CairnQ, worker_id: str, lease_ms: int = 1_000) -> Lease:
    rows = await cq.backend.arun(
        kernel.claim(["default"], worker_id, lease_ms, [kernel.Draw(None, 1)], 10), write=True
    )
    return Lease.of(rows[0])


async def test_a_retried_attempt_gets_recorded_results_and_does_not_run_the_steps_again(
    db: Database,
) -> None:
    effects: Counter[str] = Counter()
    worker = _worker(db)

    def charge(amount: int) -> dict[str, int]:
        effects["charge"] += 1
        return {"charged": amount}

    async def fetch(invoice: str) -> str:
        effects["fetch"] += 1
        return f"invoice {invoice}"

    @worker.task
    async def bill(ctx: Any) -> Any:
        invoice = await ctx.step("fetch-invoice", fetch, "A-1")
        charged = await ctx.step("charge", charge, amount=5)
        if ctx.attempt == 1:
            raise RuntimeError("crash after two steps")
        return [invoice, charged]

    async with db.client() as cq:
        task = await cq.submit("bill", max_attempts=2)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.status == "succeeded"
    assert done.result == ["invoice A-1", {"charged": 5}]
    assert effects == {"fetch": 1, "charge": 1}
    assert [(s.name, s.seq, s.attempt, s.result) for s in steps] == [
        ("fetch-invoice", 1, 1, "invoice A-1"),
        ("charge", 2, 1, {"charged": 5}),
    ]


async def test_a_step_is_retried_by_its_own_retries_option_within_one_attempt(
    db: Database,
) -> None:
    calls: list[int] = []
    worker = _worker(db)

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return "ok"

    @worker.task
    async def job(ctx: Any) -> Any:
        return await ctx.step("flaky", flaky, retries=2, backoff=0)

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None and (done.status, done.result, done.attempt) == ("succeeded", "ok", 1)
    assert len(calls) == 3


async def test_a_step_still_raising_after_its_retries_fails_the_attempt_and_records_nothing(
    db: Database,
) -> None:
    calls: list[int] = []
    worker = _worker(db)

    def broken() -> str:
        calls.append(1)
        raise ValueError("always")

    @worker.task
    async def job(ctx: Any) -> Any:
        return await ctx.step("broken", broken, retries=1, backoff="0s")

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.status == "failed"
    assert done.error is not None and done.error["type"] == "ValueError"
    assert len(calls) == 2
    assert steps == []


async def test_a_stale_attempts_step_write_is_refused(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        stale = await _claim(cq, "w-old", lease_ms=1_000)
        clock.advance(2_000)
        current = await _claim(cq, "w-new", lease_ms=60_000)
        assert current.id == stale.id == task.id
        with pytest.raises(LostLease):
            await cq.backend.arun(record_step(stale, "w-old", "one", 1, '"stale"'), write=True)
        await cq.backend.arun(record_step(current, "w-new", "one", 1, '"current"'), write=True)
        steps = await cq.steps.list(task.id)
    assert [(s.name, s.result, s.attempt) for s in steps] == [("one", "current", 2)]


async def test_a_step_name_used_twice_in_one_run_fails_the_attempt_with_a_clear_error(
    db: Database,
) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        await ctx.step("same", lambda: 1)
        await ctx.step("same", lambda: 2)

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.error is not None
    assert done.error["type"] == InvalidArgument.__name__
    assert "used twice" in done.error["message"]
    assert [s.name for s in steps] == ["same"]


async def test_a_step_result_that_is_not_json_fails_the_attempt_and_writes_nothing(
    db: Database,
) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        await ctx.step("opaque", lambda: object())

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.error is not None
    assert done.error["type"] == SerializationError.__name__
    assert steps == []


async def test_a_sync_handler_has_the_same_step_api(db: Database) -> None:
    effects: Counter[str] = Counter()
    worker = _worker(db)

    def fetch(invoice: str) -> str:
        effects["fetch"] += 1
        return invoice.upper()

    @worker.task
    def bill(ctx: Any) -> Any:
        first = ctx.step("fetch", fetch, "a-1")
        if ctx.attempt == 1:
            raise RuntimeError("crash after the step")
        return first

    async with db.client() as cq:
        task = await cq.submit("bill", max_attempts=2)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", "A-1")
    assert effects == {"fetch": 1}


async def test_a_sync_handler_s_step_runs_its_function_and_retries_in_the_handler_s_thread(
    db: Database,
) -> None:
    handler_threads: list[int] = []
    step_threads: list[int] = []
    worker = _worker(db)

    def flaky() -> str:
        step_threads.append(threading.get_ident())
        if len(step_threads) == 1:
            raise RuntimeError("first try fails")
        return "ok"

    @worker.task
    def job(ctx: Any) -> Any:
        handler_threads.append(threading.get_ident())
        return ctx.step("flaky", flaky, retries=1, backoff=0)

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", "ok")
    assert step_threads == handler_threads * 2


async def test_a_sync_handler_s_step_of_a_coroutine_function_records_its_awaited_value(
    db: Database,
) -> None:
    worker = _worker(db)

    async def fetch(invoice: str) -> str:
        return invoice.upper()

    @worker.task
    def job(ctx: Any) -> Any:
        return ctx.step("fetch", fetch, "a-1")

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", "A-1")
    assert [(s.name, s.result) for s in steps] == [("fetch", "A-1")]


# --- transactional steps --------------------------------------------------------------------


def _create_app_table(db: Database) -> None:
    ddl = "create table app_effects (step text primary key)"
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.execute(ddl)
            conn.commit()
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute(ddl)


def _app_rows(db: Database) -> list[str]:
    query = "select step from app_effects order by step"
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            return [r[0] for r in conn.execute(query)]
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        return [r[0] for r in conn.execute(query)]


def _insert_effect(db: Database, step: str) -> Any:
    """``fn(conn)`` for a transactional step: one application row, on either backend."""
    if db.kind == "sqlite":

        def write(conn: Any) -> str:
            conn.execute("insert into app_effects (step) values (?)", (step,))
            return step

        return write

    async def awrite(conn: Any) -> str:
        await conn.execute("insert into app_effects (step) values (%s)", (step,))
        return step

    return awrite


async def test_a_transactional_step_keeps_its_effect_when_recorded_and_runs_once(
    db: Database,
) -> None:
    await _run_migrated(db)
    _create_app_table(db)
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        recorded = await ctx.step("insert", _insert_effect(db, "insert"), transactional=True)
        if ctx.attempt == 1:
            raise RuntimeError("crash after the step")
        return recorded

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=2)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", "insert")
    assert [s.name for s in steps] == ["insert"]
    assert _app_rows(db) == ["insert"]


async def test_a_transactional_steps_effect_is_rolled_back_when_its_record_is_refused(
    db: Database,
) -> None:
    clock = FakeClock(START)
    await _run_migrated(db)
    _create_app_table(db)
    async with db.client(clock=clock) as cq:
        await cq.submit("job")
        stale = await _claim(cq, "w-old", lease_ms=1_000)
        clock.advance(2_000)
        current = await _claim(cq, "w-new", lease_ms=60_000)

        def record(lease: Lease, worker_id: str) -> Any:
            def after(value: Any) -> Any:
                yield from record_step(lease, worker_id, value, 1, '"done"')
                return value

            return after

        with pytest.raises(LostLease):
            await cq.backend.arun_around(  # type: ignore[attr-defined]
                _insert_effect(db, "stale"), record(stale, "w-old")
            )
        await cq.backend.arun_around(  # type: ignore[attr-defined]
            _insert_effect(db, "current"), record(current, "w-new")
        )
        steps = await cq.steps.list(current.id)
    assert _app_rows(db) == ["current"]
    assert [s.name for s in steps] == ["current"]


async def test_a_transactional_steps_effect_is_rolled_back_when_the_step_raises(
    db: Database,
) -> None:
    await _run_migrated(db)
    _create_app_table(db)
    worker = _worker(db)
    inner = _insert_effect(db, "half")

    if db.kind == "sqlite":

        def half(conn: Any) -> None:
            inner(conn)
            raise RuntimeError("after writing")

    else:

        async def half(conn: Any) -> None:  # type: ignore[misc]
            await inner(conn)
            raise RuntimeError("after writing")

    @worker.task
    async def job(ctx: Any) -> Any:
        await ctx.transaction_step("half", half)

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.status == "failed"
    assert steps == []
    assert _app_rows(db) == []


async def _run_migrated(db: Database) -> None:
    """Create cairnq's tables first, so the application's table joins a cairnq database."""
    async with db.client() as cq:
        await cq.backend.aopen()
