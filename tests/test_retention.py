"""Retention: finished tasks past their cutoff are deleted in batches, by one process at a time."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

from cairnq import InvalidArgument, Retention, RetentionRule, TaskContext, kernel
from cairnq.kernel.retention import LOCK_NAME, RetentionSweeper
from cairnq.testing import FakeClock

from ._db import Database, admin_connect

HOUR = 3_600_000
DAY = 24 * HOUR


def _finish(db: Database, rows: list[tuple[str, str, int]]) -> None:
    """Test set-up: mark tasks finished with a given status and completion time."""
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path)  # type: ignore[arg-type]
        conn.executemany(
            "update cairnq_tasks set status = ?, completed_at_ms = ? where id = ?",
            [(status, at, task_id) for task_id, status, at in rows],
        )
        conn.commit()
        conn.close()
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        with conn.cursor() as cur:
            cur.executemany(
                "update cairnq_tasks set status = %s, completed_at_ms = %s where id = %s",
                [(status, at, task_id) for task_id, status, at in rows],
            )


async def test_a_sweep_removes_exactly_the_rows_past_each_cutoff_in_batches_while_a_worker_runs(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    now = clock.now_ms()
    policy = Retention({"succeeded": HOUR, "failed": DAY}, limit=1000)
    batches: list[int] = []
    original = kernel.purge

    def counted(**kwargs: Any) -> Any:
        batches.append(kwargs["limit"])
        return original(**kwargs)

    monkeypatch.setattr(kernel, "purge", counted)
    async with db.client(clock=clock) as cq:
        finished = await cq.submit_many([("old", {"i": i}) for i in range(10_000)])
        plan: list[tuple[str, str, int]] = []
        expected_gone: set[str] = set()
        for i, task in enumerate(finished):
            status = ("succeeded", "failed", "canceled")[i % 3]
            age = (i % 5) * 12 * HOUR
            plan.append((task.id, status, now - age - 1))
            if (status == "succeeded" and age >= HOUR) or (status == "failed" and age >= DAY):
                expected_gone.add(task.id)
        _finish(db, plan)
        worker = db.worker(clock=clock, poll_interval_ms=20, concurrency=4)

        @worker.task
        async def live(ctx: TaskContext, payload: Any) -> int:
            await asyncio.sleep(0.001)
            return int(payload["i"])

        sweeper = RetentionSweeper(cq.backend, policy)
        async with worker.background():
            live_tasks = await cq.submit_many([("live", {"i": i}) for i in range(200)])
            deleted = await sweeper.sweep()
            done = [await cq.wait(t.id, timeout_ms=30_000) for t in live_tasks]
        await worker.close()
        remaining = {t.id for t in await cq.list(name="old", limit=10_000)}
    assert deleted == len(expected_gone)
    assert remaining == {t.id for t in finished} - expected_gone
    assert {t.status for t in done} == {"succeeded"}
    assert len(batches) >= len(expected_gone) // 1000
    assert set(batches) == {1000}


async def test_another_holder_of_the_sweep_lease_makes_this_sweep_skip(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        await cq.cancel(task.id)
        clock.advance(HOUR + 1)
        sweeper = RetentionSweeper(cq.backend, Retention(HOUR))
        assert await cq.backend.arun(
            kernel.lock_acquire(LOCK_NAME, "elsewhere", 60_000), write=True
        )
        assert await sweeper.sweep() == 0
        assert await cq.get(task.id) is not None
        await cq.backend.arun(kernel.lock_release(LOCK_NAME, "elsewhere"), write=True)
        assert await sweeper.sweep() == 1
        assert await cq.get(task.id) is None


async def test_an_expired_sweep_lease_is_taken_over(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        await cq.cancel(task.id)
        await cq.backend.arun(kernel.lock_acquire(LOCK_NAME, "crashed", 60_000), write=True)
        clock.advance(60_001)
        assert await RetentionSweeper(cq.backend, Retention(0)).sweep() == 1


async def test_stop_is_prompt_while_an_on_demand_sweep_is_between_batches(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        tasks = await cq.submit_many([("job", {}) for _ in range(300)])
        for task in tasks:
            await cq.cancel(task.id)
        clock.advance(1)
        sweeper = RetentionSweeper(cq.backend, Retention(0, limit=1, interval_ms=DAY))
        sweeper.start()
        sweeping = asyncio.ensure_future(sweeper.sweep())
        while not sweeping.done() and len(await cq.list(limit=300)) > 290:
            await asyncio.sleep(0)
        await sweeper.stop()
        deleted = await asyncio.wait_for(sweeping, 5)
        left = len(await cq.list(limit=300))
    assert 0 < deleted < 300
    assert left == 300 - deleted
    assert not sweeper.running


async def test_a_stopped_sweeper_can_be_started_again(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        sweeper = RetentionSweeper(cq.backend, Retention(0, interval_ms=30))
        sweeper.start()
        await sweeper.stop()
        assert not sweeper.running
        task = await cq.submit("job", {})
        await cq.cancel(task.id)
        clock.advance(1)
        sweeper.start()
        for _ in range(500):
            if await cq.get(task.id) is None:
                break
            await asyncio.sleep(0.01)
        await sweeper.stop()
        assert await cq.get(task.id) is None


async def test_a_client_with_retention_sweeps_in_the_background(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as setup:
        old = await setup.submit("job", {})
        await setup.cancel(old.id)
        clock.advance(10)
        fresh = await setup.submit("job", {})
        await setup.cancel(fresh.id)
    from cairnq import CairnQ

    cq = CairnQ(db.backend(clock=clock), retention=Retention(5, interval_ms=20))
    async with cq:
        for _ in range(500):
            if await cq.get(old.id) is None:
                break
            await asyncio.sleep(0.01)
        gone = await cq.get(old.id)
        kept = await cq.get(fresh.id)
    assert gone is None
    assert kept is not None and kept.status == "canceled"
    await cq.backend.aclose()


async def test_a_worker_with_retention_sweeps_while_it_serves(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        await cq.cancel(task.id)
        clock.advance(DAY)
        worker = db.worker(
            clock=clock, poll_interval_ms=20, retention=Retention(HOUR, interval_ms=20)
        )

        @worker.task
        async def job(ctx: TaskContext, payload: Any) -> None: ...

        async with worker.background():
            for _ in range(500):
                if await cq.get(task.id) is None:
                    break
                await asyncio.sleep(0.01)
        await worker.close()
        assert await cq.get(task.id) is None


async def test_sweep_without_a_policy_is_an_error(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="no retention policy"):
            await cq.sweep()


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Retention({}),
        lambda: Retention([]),
        lambda: Retention({"queued": 1000}),
        lambda: Retention(-1),
        lambda: Retention(1000, interval_ms=0),
        lambda: Retention(1000, limit=0),
        lambda: Retention(["not a rule"]),  # type: ignore[list-item]
        lambda: RetentionRule(1000, status="running"),
    ],
)
def test_bad_retention_settings_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidArgument):
        bad()


def test_an_int_is_shorthand_for_one_cutoff() -> None:
    policy = Retention.of(5000)
    assert policy is not None
    assert policy.rules == (RetentionRule(5000),)


def test_cairnq_retention_still_imports_the_retention_names() -> None:
    from cairnq import retention

    assert (retention.Retention, retention.RetentionRule, retention.RetentionSweeper) == (
        Retention,
        RetentionRule,
        RetentionSweeper,
    )
