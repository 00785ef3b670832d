"""Every kind of park, defined once (``docs/backpressure.md``): a task parked on a
dependency, an event or a sleep is queued and not due, and ``max_queue_depth``
backpressure leaves it out of the queue's depth until it is due again; the
protocol's own ``queue_depth`` still counts every queued row. An expiry never
cancels a task a wait parked (it started before it)."""

from __future__ import annotations

from typing import Any

import pytest

from cairnq import CairnQ, QueueFull, TaskContext
from cairnq.extensions import builtins, waiting_counts, waiting_extensions
from cairnq.extensions.policies import _ops as policies
from cairnq.kernel.points import NO_POINTS
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import eventually
from .test_task_policies import in_use

START = 1_800_000_000_000


async def _all_parked(cq: CairnQ, ids: list[str]) -> bool:
    for task_id in ids:
        waits = await cq.events.waits(task_id)
        task = await cq.get(task_id)
        if not (waits and waits[-1].state == "waiting" and task is not None and task.is_queued):
            return False
    return True


async def _park_waiters(db: Database, clock: FakeClock, count: int, sleep: bool) -> list[str]:
    """``count`` tasks of queue ``q`` parked by an event wait (or a one-hour sleep)."""
    worker = db.worker(clock=clock, poll_interval_ms=20, queues=["q"])

    @worker.task
    async def wait(ctx: TaskContext) -> Any:
        if sleep:
            await ctx.sleep("1h")
            return "slept"
        return await ctx.wait_for(f"approval-{ctx.task.id}")

    async with db.client(clock=clock) as cq, worker.background():
        ids = [(await cq.submit("wait", queue="q")).id for _ in range(count)]
        await eventually(lambda: _all_parked(cq, ids), "every waiter parked")
    await worker.close()
    return ids


async def test_tasks_parked_by_event_waits_leave_room_under_max_queue_depth(
    db: Database,
) -> None:
    clock = FakeClock(START)
    await _park_waiters(db, clock, 3, sleep=False)
    async with db.client(clock=clock, max_queue_depth={"q": 2}, max_queue_wait_ms=50) as cq:
        await cq.submit("job", queue="q")
        await cq.submit("job", queue="q")
        with pytest.raises(QueueFull):
            await cq.submit("job", queue="q")
        stats = await cq.stats("q")
    assert stats["q"]["queued"] == 5


async def test_the_protocol_queue_depth_still_counts_parked_tasks(db: Database) -> None:
    clock = FakeClock(START)
    await _park_waiters(db, clock, 3, sleep=False)
    async with db.client(clock=clock) as cq:
        headroom = await cq.queue_depth("q", 5)
    assert headroom == 2


async def test_a_sleeping_task_counts_again_once_its_wake_time_has_come(db: Database) -> None:
    clock = FakeClock(START)
    await _park_waiters(db, clock, 2, sleep=True)
    async with db.client(clock=clock, max_queue_depth={"q": 2}, max_queue_wait_ms=50) as cq:
        await cq.submit("job", queue="q")
    clock.advance(3_600_000)
    async with db.client(clock=clock, max_queue_depth={"q": 2}, max_queue_wait_ms=50) as cq:
        with pytest.raises(QueueFull):
            await cq.submit("job", queue="q")


async def test_dependents_parked_on_their_dependencies_leave_room(db: Database) -> None:
    async with db.client(max_queue_depth={"q": 2}, max_queue_wait_ms=50) as cq:
        first = await cq.submit("job", queue="q")
        for _ in range(3):
            await cq.submit("job", queue="q", depends_on=[first.id])
        await cq.submit("job", queue="q")
    async with db.client(max_queue_depth={"q": 2}, max_queue_wait_ms=50) as cq:
        with pytest.raises(QueueFull):
            await cq.submit("job", queue="q")
        stats = await cq.stats("q")
    assert stats["q"]["queued"] == 5


async def test_a_delayed_task_is_not_parked_and_counts(db: Database) -> None:
    async with db.client(max_queue_depth={"q": 1}, max_queue_wait_ms=50) as cq:
        await cq.submit("job", queue="q", delay="1h")
        with pytest.raises(QueueFull):
            await cq.submit("job", queue="q")


async def test_the_parked_count_names_each_queue_and_each_kind(db: Database) -> None:
    clock = FakeClock(START)
    await _park_waiters(db, clock, 2, sleep=False)
    await _park_waiters(db, clock, 1, sleep=True)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("job", queue="other")
        await cq.submit("job", queue="other", depends_on=[first.id])
        everywhere = await cq.backend.arun(
            waiting_counts(waiting_extensions(()), None), write=False
        )
        of_q = await cq.backend.arun(waiting_counts(waiting_extensions(()), "q"), write=False)
    assert everywhere == {"q": 3, "other": 1}
    assert of_q == {"q": 3}
    assert {e.name for e in waiting_extensions(())} == {"waits", "workflows"}
    assert len(waiting_extensions(())) < len(builtins())


# --- expiry -----------------------------------------------------------------------------------


async def test_an_expiry_never_cancels_a_task_an_event_wait_parked(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)

    @worker.task
    async def approve(ctx: TaskContext) -> Any:
        return await ctx.wait_for("approval")

    async with db.client(clock=clock) as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("approve", expires_in="1s")
            await eventually(lambda: _all_parked(cq, [task.id]), "the wait parked")
        clock.advance(3_600_000)
        await cq.backend.arun(policies.sweep(NO_POINTS), write=True)
        still = await cq.get(task.id)
        assert still is not None and still.is_queued
        await cq.events.send("approval", "yes")
        async with worker.background():
            done = await cq.wait(task.id, timeout_ms=20_000, poll_ms=20, max_poll_ms=50)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", "yes")
