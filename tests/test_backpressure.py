"""Backpressure: a full queue makes submit wait, then raise QueueFull with nothing enqueued."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cairnq import InvalidArgument, QueueFull, TaskContext, TaskStore
from cairnq.backpressure import QueueDepthGate

from ._db import Database
from ._waits import eventually, results_of


async def test_the_eleventh_submit_waits_then_raises_queue_full(db: Database) -> None:
    async with db.client(max_queue_depth=10, max_queue_wait_ms=300) as cq:
        for i in range(10):
            await cq.submit("job", {"i": i})
        with pytest.raises(QueueFull) as full:
            await cq.submit("job", {"i": 10})
        stats = await cq.stats()
    assert (full.value.queue, full.value.max_depth) == ("default", 10)
    assert full.value.waited_ms >= 300
    assert stats["default"]["queued"] == 10


async def test_a_waiting_submit_goes_through_once_the_queue_drains(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    headrooms = results_of(monkeypatch, "queue_depth")
    async with db.client(max_queue_depth=3, max_queue_wait_ms=20_000) as cq:
        tasks = [await cq.submit("job", {}) for _ in range(3)]
        pending = asyncio.ensure_future(cq.submit("job", {"late": True}))
        await eventually(lambda: 0 in headrooms, "a look that found the queue full")
        assert not pending.done()
        await cq.cancel(tasks[0].id)
        late = await asyncio.wait_for(pending, 15)
        stats = await cq.stats()
    assert late.payload == {"late": True}
    assert stats["default"]["queued"] == 3


async def test_a_per_queue_limit_gates_only_the_queues_it_names(db: Database) -> None:
    async with db.client(max_queue_depth={"small": 1}, max_queue_wait_ms=100) as cq:
        await cq.submit("job", {}, queue="small")
        with pytest.raises(QueueFull):
            await cq.submit("job", {}, queue="small")
        for _ in range(5):
            await cq.submit("job", {}, queue="big")
        stats = await cq.stats()
    assert stats["small"]["queued"] == 1
    assert stats["big"]["queued"] == 5


def test_the_sync_client_waits_and_raises_the_same_way(db: Database) -> None:
    with db.sync_client(max_queue_depth=2, max_queue_wait_ms=200) as cq:
        cq.submit("job", {})
        cq.submit("job", {})
        with pytest.raises(QueueFull):
            cq.submit("job", {})
        assert cq.stats()["default"]["queued"] == 2


async def test_submit_many_is_gated_per_task(db: Database) -> None:
    async with db.client(max_queue_depth=2, max_queue_wait_ms=100) as cq:
        with pytest.raises(QueueFull):
            await cq.submit_many([("job", {}) for _ in range(3)])
        assert await cq.stats() == {}


async def test_child_tasks_from_a_handler_respect_the_workers_limit(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, max_queue_depth={"children": 2}, max_queue_wait_ms=100)
    outcome: list[str] = []

    @worker.task
    async def parent(ctx: TaskContext, payload: Any) -> None:
        for i in range(3):
            try:
                await ctx.submit("child", {"i": i}, queue="children")
                outcome.append("ok")
            except QueueFull:
                outcome.append("full")

    async with db.client() as cq, worker.background():
        task = await cq.submit("parent", {})
        await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert outcome == ["ok", "ok", "full"]


@pytest.mark.parametrize(
    "limit", [0, -1, True, 1.5, "10", {"q": 0}, {"": 3}], ids=lambda v: repr(v)
)
def test_bad_depth_limits_are_rejected(db: Database, limit: Any) -> None:
    with pytest.raises(InvalidArgument):
        db.client(max_queue_depth=limit)


async def test_queue_depth_gate_takes_the_reference_arguments_and_gates_a_store(
    db: Database,
) -> None:
    gate = QueueDepthGate({"small": 2}, max_queue_wait_ms=100)
    async with TaskStore(db.backend(), owns_backend=True, gate=gate) as store:
        await store.submit(name="job", queue="small")
        await store.submit(name="job", queue="small")
        with pytest.raises(QueueFull) as full:
            await store.submit(name="job", queue="small")
        await store.submit(name="job", queue="other")
        stats = await store.stats()
    assert (full.value.queue, full.value.max_depth) == ("small", 2)
    assert (stats["small"]["queued"], stats["other"]["queued"]) == (2, 1)
