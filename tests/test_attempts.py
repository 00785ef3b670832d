"""Attempt history on a real database: every cairnq attempt recorded with its outcome,
worker, times and error, written with the attempt's end; removed with its task.

Time is a ``FakeClock`` the backends read.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

import pytest

from cairnq import CairnQ, Retention, Worker, kernel
from cairnq.extensions import History
from cairnq.kernel.retention import RetentionSweeper
from cairnq.testing import FakeClock

from ._db import Database, admin_connect
from .test_without_extensions import migrate_only

START = 1_800_000_000_000
HOUR = 3_600_000


def _worker(db: Database, clock: FakeClock, **options: Any) -> Any:
    return db.worker(clock=clock, poll_interval_ms=20, retry_backoff_ms=0, **options)


async def test_a_failed_attempt_then_a_successful_one_are_both_recorded(db: Database) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock, worker_id="w-history")

    @worker.task
    async def job(ctx: Any) -> str:
        if ctx.attempt == 1:
            raise ValueError("first try breaks")
        return "ok"

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [
        (1, "retry", "w-history"),
        (2, "succeeded", "w-history"),
    ]
    assert attempts[0].error is not None and attempts[0].error["type"] == "ValueError"
    assert attempts[1].error is None
    assert all(a.started_at_ms == a.ended_at_ms == START for a in attempts)


async def test_a_final_failure_is_recorded_with_its_error(db: Database) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock)

    @worker.task
    async def job(ctx: Any) -> None:
        raise RuntimeError("no luck")

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "failed")]
    assert attempts[0].error is not None and attempts[0].error["message"] == "no luck"


async def test_a_snoozed_attempt_is_recorded_and_the_next_claim_repeats_its_number(
    db: Database,
) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock)

    @worker.task
    async def job(ctx: Any) -> str:
        if clock.now_ms() == START:
            await ctx.snooze(10)
            return "ignored"
        return "done"

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        clock.advance(10_000)
        await worker.run(until_idle=True)
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "snoozed"), (1, "succeeded")]
    assert attempts[1].started_at_ms == START + 10_000


async def test_an_attempt_whose_lease_expired_is_recorded_lost_by_the_recoverer(
    db: Database,
) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        await cq.backend.arun(
            kernel.claim(["default"], "w-dead", 1_000, [kernel.Draw(None, 1)], 10), write=True
        )
        clock.advance(5_000)
        worker = _worker(db, clock)
        assert await worker.recover_expired() == 1
        await worker.close()
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome, a.worker_id) for a in attempts] == [(1, "lost", "w-dead")]
    lost = attempts[0]
    assert lost.ended_at_ms == START + 5_000 and lost.started_at_ms is None
    assert lost.error is not None and lost.error["code"] == "lease_expired"


async def test_a_claim_that_recovers_an_expired_lease_records_it_lost(db: Database) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock)

    @worker.task
    async def job(ctx: Any) -> str:
        return "ok"

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        await cq.backend.arun(
            kernel.claim(["default"], "w-dead", 1_000, [kernel.Draw(None, 1)], 10), write=True
        )
        clock.advance(5_000)
        await worker.run(until_idle=True)
        attempts = await cq.attempts.list(task.id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "lost"), (2, "succeeded")]


async def test_a_worker_that_records_no_attempts_leaves_the_history_empty(db: Database) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock, extensions=[History(record=False)])

    @worker.task
    async def job(ctx: Any) -> str:
        if ctx.attempt == 1:
            raise ValueError("first try breaks")
        return "ok"

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", max_attempts=3)
        lost = await cq.submit("job")
        await cq.backend.arun(
            kernel.claim(["default"], "w-dead", 1_000, [kernel.Draw([lost.name], 1)], 10),
            write=True,
        )
        clock.advance(5_000)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        assert done is not None and (done.status, done.attempt) == ("succeeded", 2)
        assert await cq.attempts.list(task.id) == []
        assert await cq.attempts.list(lost.id) == []


async def test_retention_removes_a_tasks_attempts_and_steps_with_it(db: Database) -> None:
    clock = FakeClock(START)
    worker = _worker(db, clock)

    @worker.task
    async def job(ctx: Any) -> Any:
        return await ctx.step("only", lambda: 1)

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        assert len(await cq.attempts.list(task.id)) == 1
        assert len(await cq.steps.list(task.id)) == 1
        clock.advance(2 * HOUR)
        assert await RetentionSweeper(cq.backend, Retention(HOUR)).sweep() == 1
        assert await cq.attempts.list(task.id) == []
        assert await cq.steps.list(task.id) == []
    assert _count(db, "cairnq_task_attempts") == _count(db, "cairnq_task_steps") == 0


def _count(db: Database, table: str) -> int:
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            return int(conn.execute(f"select count(*) from {table}").fetchone()[0])
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        row = conn.execute(f"select count(*) from {table}").fetchone()
        assert row is not None
        return int(row[0])


def _all_but_steps(db: Database) -> None:
    """Migrate everything but ``x0009_steps.sql`` and those building on its tables (a
    database opened with ``migrate=False``)."""
    building_on = ("x0009_steps.sql", "x0014_steps_forget.sql", "x0028_attempt_rollups.sql")
    migrate_only(db, lambda name: name not in building_on)


async def test_without_the_history_table_a_worker_runs_tasks_and_says_so_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _all_but_steps(db)
    caplog.set_level(logging.INFO, logger="cairnq.worker")
    clock = FakeClock(START)
    worker = Worker(
        CairnQ(db.backend(clock=clock, migrate=False)), poll_interval_ms=20, retry_backoff_ms=0
    )

    @worker.task
    async def job(ctx: Any) -> None:
        raise ValueError("retried without history")

    async with CairnQ(db.backend(clock=clock, migrate=False)) as cq:
        task = await cq.submit("job", max_attempts=2)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and (done.status, done.attempt) == ("failed", 2)
    lines = [r.getMessage() for r in caplog.records if "x0009_steps.sql" in r.getMessage()]
    assert len(lines) == 1 and "cairnq migrate" in lines[0]
