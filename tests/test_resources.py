"""Worker resources: ceilings on handler calls shared by several task names in one worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, TaskContext, Worker

from ._db import Database


async def settled(cq: CairnQ, task_id: str, timeout_ms: int = 10_000) -> Any:
    return await cq.wait(task_id, timeout_ms=timeout_ms, poll_ms=20, max_poll_ms=50)


async def test_names_sharing_a_resource_never_run_at_once(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, resources={"gpu": 1})
    active = peak = 0

    async def hold_gpu(ctx: TaskContext, payload: Any) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.03)
        active -= 1

    worker.task("train", resource="gpu")(hold_gpu)
    worker.register("render", hold_gpu, resource="gpu")

    async with db.client() as cq:
        tasks = [await cq.submit(name, {}) for name in ["train", "render"] * 4]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert peak == 1


async def test_a_name_without_the_resource_is_not_held_back(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, resources={"gpu": 1})
    gpu_started = asyncio.Event()
    release = asyncio.Event()

    @worker.task("train", resource="gpu")
    async def train(ctx: TaskContext, payload: Any) -> None:
        gpu_started.set()
        await release.wait()

    @worker.task
    async def cheap(ctx: TaskContext, payload: Any) -> str:
        return "done"

    async with db.client() as cq:
        held = [await cq.submit("train", {}) for _ in range(2)]
        async with worker.background():
            await asyncio.wait_for(gpu_started.wait(), 5)
            quick = await cq.submit("cheap", {})
            finished = await settled(cq, quick.id, timeout_ms=5000)
            waiting = [await cq.get(t.id) for t in held]
            release.set()
            for t in held:
                await settled(cq, t.id)
    await worker.close()
    assert finished.result == "done"
    assert sorted(t.status for t in waiting if t is not None) == ["queued", "running"]


async def test_a_resource_counts_batch_calls_against_its_capacity(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, resources={"gpu": 1})
    active = peak = 0
    sizes: list[int] = []

    @worker.task("embed", batch=3, resource="gpu")
    async def embed(contexts: list[TaskContext]) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        sizes.append(len(contexts))
        await asyncio.sleep(0.03)
        active -= 1

    async with db.client() as cq:
        tasks = [await cq.submit("embed", {}) for _ in range(6)]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert peak == 1 and sum(sizes) == 6 and max(sizes) <= 3


def test_a_resource_not_declared_is_refused_at_registration(tmp_path: Any) -> None:
    worker = Worker(tmp_path / "tasks.db", resources={"gpu": 1})

    async def train(ctx: TaskContext, payload: Any) -> None:
        return None

    with pytest.raises(InvalidArgument, match=r"resource 'tpu'.*not declared") as caught:
        worker.register("train", train, resource="tpu")
    assert isinstance(caught.value, ValueError)


def test_a_resource_with_no_resources_declared_is_refused_by_the_decorator(tmp_path: Any) -> None:
    worker = Worker(tmp_path / "tasks.db")

    with pytest.raises(ValueError, match=r"resource 'gpu'.*not declared"):

        @worker.task(resource="gpu")
        async def train(ctx: TaskContext, payload: Any) -> None:
            return None


@pytest.mark.parametrize("capacity", [0, -1])
def test_a_resource_capacity_below_one_is_refused(tmp_path: Any, capacity: int) -> None:
    with pytest.raises(InvalidArgument, match="resource 'gpu' capacity must be >= 1"):
        Worker(tmp_path / "tasks.db", resources={"gpu": capacity})


@pytest.mark.parametrize("due", ["train", "render"])
async def test_a_batch_run_claims_the_due_task_of_any_name_sharing_a_resource(
    db: Database, due: str
) -> None:
    worker = db.worker(poll_interval_ms=20, resources={"gpu": 1})

    async def hold_gpu(ctx: TaskContext, payload: Any) -> str:
        return ctx.name

    worker.task("train", resource="gpu")(hold_gpu)
    worker.task("render", resource="gpu")(hold_gpu)
    async with db.client() as cq:
        task = await cq.submit(due, {})
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and (done.status, done.result) == ("succeeded", due)
