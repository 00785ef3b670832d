"""What a worker tells the outside: task events, and logs that never carry payloads."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from cairnq import TaskContext, TaskError, TaskEvent, kernel
from cairnq.testing import FakeClock

from ._db import Database

SECRET = "s3cr3t-value-7f0c"


async def test_events_follow_a_task_through_start_retry_and_success(db: Database) -> None:
    events: list[TaskEvent] = []
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, on_event=events.append)

    @worker.task
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        if ctx.attempt == 1:
            raise ConnectionError("once")
        return "ok"

    async with db.client() as cq, worker.background():
        task = await cq.submit("flaky", {})
        await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    kinds = [(e.kind, e.attempt) for e in events if e.task_id == task.id]
    assert kinds == [("started", 1), ("retried", 1), ("started", 2), ("succeeded", 2)]
    retried = next(e for e in events if e.kind == "retried")
    assert retried.error is not None and retried.error["type"] == "ConnectionError"
    assert all(e.duration_ms is not None for e in events if e.kind != "started")


async def _seen(events: list[TaskEvent], task_id: str, kind: str) -> None:
    while not any(e.task_id == task_id and e.kind == kind for e in events):
        await asyncio.sleep(0.01)


async def test_events_report_failed_and_canceled(db: Database) -> None:
    events: list[TaskEvent] = []
    worker = db.worker(poll_interval_ms=20)
    unsubscribe = worker.subscribe(events.append)
    started = asyncio.Event()

    @worker.task
    async def bad(ctx: TaskContext, payload: Any) -> None:
        raise TaskError("no", code="nope")

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> None:
        started.set()
        while not await ctx.canceled():
            await asyncio.sleep(0.01)

    async with db.client() as cq, worker.background():
        failed = await cq.submit("bad", {})
        await cq.wait(failed.id, timeout_ms=10_000)
        canceled = await cq.submit("slow", {})
        await asyncio.wait_for(started.wait(), 10)
        await cq.cancel(canceled.id)
        await cq.wait(canceled.id, timeout_ms=10_000)
        # The database says canceled before the worker's write returns to it and emits.
        await asyncio.wait_for(_seen(events, canceled.id, "canceled"), 10)
        unsubscribe()
        quiet = await cq.submit("bad", {})
        await cq.wait(quiet.id, timeout_ms=10_000)
    await worker.close()
    outcome = {e.task_id: e.kind for e in events if e.kind != "started"}
    assert outcome == {failed.id: "failed", canceled.id: "canceled"}


async def test_a_listener_that_raises_does_not_disturb_the_worker(db: Database) -> None:
    def broken(event: TaskEvent) -> None:
        raise RuntimeError("listener bug")

    worker = db.worker(poll_interval_ms=20, on_event=broken)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "fine"

    async with db.client() as cq, worker.background():
        assert await cq.call("job", {}, timeout_ms=10_000) == "fine"
    await worker.close()


async def test_logs_name_the_task_but_never_its_payload_or_result(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task
    async def leaky(ctx: TaskContext, payload: Any) -> dict[str, str]:
        if ctx.attempt == 1:
            raise ValueError("try again")
        return {"token": SECRET}

    with caplog.at_level(logging.DEBUG, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("leaky", {"password": SECRET})
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    records = [r for r in caplog.records if r.name.startswith("cairnq")]
    assert any(getattr(r, "task_id", None) == task.id for r in records)
    for record in records:
        text = record.getMessage() + " " + " ".join(str(v) for v in vars(record).values())
        assert SECRET not in text
    assert {r.name for r in records} <= {
        "cairnq.worker",
        "cairnq.postgres",
        "cairnq.retention",
    }


async def test_a_lease_recovered_by_a_workers_claim_is_reported_as_recovered(
    db: Database,
) -> None:
    clock = FakeClock()
    events: list[TaskEvent] = []
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        claim = kernel.claim(["default"], "crashed", 1000, [kernel.Draw(None, 1)], 100)
        await cq.backend.arun(claim, write=True)
        clock.advance(1001)
        # The maintenance timer never fires in this test: only the claim path recovers.
        worker = db.worker(
            clock=clock, poll_interval_ms=20, recovery_interval="1h", on_event=events.append
        )

        @worker.task
        async def job(ctx: TaskContext) -> None: ...

        async with worker.background():
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    kinds = [(e.kind, e.attempt) for e in events if e.task_id == task.id]
    assert kinds[0] == ("recovered", 1)
    assert ("succeeded", 2) in kinds
