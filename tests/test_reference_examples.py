"""Code written for the reference Python SDK runs on cairnq unchanged, on both backends.

Each test is one usage of the reference API as ``shared/spec/protocol.md`` section 5
states it (constructors, ``connect()`` on the instance, ``submit`` / ``call`` /
``wait`` with their keywords, ``Worker(store, queues)``, registration forms,
``resources``, ``TaskContext`` methods, backpressure, retention, the store layer
and the errors), written with the reference's spellings only. The one thing that
differs per backend is the constructor, as in the reference: ``CairnQ.sqlite(path)``
or ``CairnQ.postgres(executor)`` with asyncpg's ``create_pool_executor``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cairnq import (
    AlreadyExists,
    CairnQ,
    CairnQError,
    QueueFull,
    Retention,
    RetentionRule,
    TaskCanceled,
    TaskContext,
    TaskDef,
    TaskError,
    TaskFailed,
    TaskRef,
    TaskTimeout,
    Worker,
    create_pool_executor,
    is_terminal_status,
)

from ._db import Database


@dataclass
class Reference:
    """The reference's constructors for one database: ``client()`` and ``worker(queues)``."""

    client: Callable[..., CairnQ]
    worker: Callable[..., Worker]


@pytest.fixture
async def ref(db: Database) -> AsyncIterator[Reference]:
    if db.kind == "sqlite":
        path = str(db.path)
        yield Reference(
            client=lambda **kw: CairnQ.sqlite(path, busy_timeout_ms=5000, **kw),
            worker=lambda **kw: Worker.sqlite(path, **kw),
        )
        return
    pytest.importorskip("asyncpg")
    from .test_pg_executor import asyncpg_url

    schema = db.schema
    executor = create_pool_executor(asyncpg_url(db.url), min_size=1, max_size=4, schema=schema)
    try:
        yield Reference(
            client=lambda **kw: CairnQ.postgres(executor, schema=schema, **kw),
            worker=lambda **kw: Worker.postgres(executor, schema=schema, **kw),
        )
    finally:
        await executor.close()


async def test_the_quick_start_connects_submits_calls_and_waits(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    worker = ref.worker(queues=("default",), concurrency=2, lease_ms=30_000)

    @worker.task
    async def resize(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        task = await ctx.progress(0.5, "resizing")
        return {"width": payload["width"] // 2, "progress": task.progress}

    @worker.task("reports.monthly")
    def monthly(ctx: Any, payload: dict[str, Any]) -> dict[str, int]:
        return {"rows": 42}

    async with worker.background(concurrency=2):
        result = await cq.call("resize", {"width": 640}, timeout_ms=30_000)
        task = await cq.submit(
            name="reports.monthly",
            payload={"month": "2026-11"},
            key="report:2026-11",
            queue="default",
            conflict="reuse",
            max_attempts=3,
            priority=0,
            metadata={"by": "cron"},
            delay_ms=0,
        )
        done = await cq.wait(task.id, timeout_ms=30_000, poll_ms=100, max_poll_ms=500)
        by_key = await cq.wait_by_key("report:2026-11", timeout_ms=30_000)
    await cq.close()
    assert result == {"width": 320, "progress": 0.5}
    assert done.succeeded and done.result == {"rows": 42} and by_key.id == task.id
    assert done.is_terminal and is_terminal_status(done.status)


async def test_reads_and_actions_have_the_reference_shapes(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    try:
        first = await cq.submit("email.send", {"to": "ada"}, key="welcome:ada", queue="emails")
        again = await cq.submit("email.send", {"to": "ada"}, key="welcome:ada", queue="emails")
        with pytest.raises(AlreadyExists):
            await cq.submit("email.send", {}, key="welcome:ada", conflict="reject")
        ref_ = await cq.get_status(first.id)
        by_key = await cq.get_status_by_key("welcome:ada")
        listed = await cq.list(status="queued", queue="emails", limit=10, offset=0)
        stats = await cq.stats("emails")
        headroom = await cq.queue_depth("emails", 10)
        canceled = await cq.cancel(first.id)
        retried = await cq.retry_by_key("welcome:ada", reset_attempt=True)
        canceled_again = await cq.cancel_by_key("welcome:ada")
        await asyncio.sleep(0.005)  # purge takes tasks that ended before now
        purged = await cq.purge(older_than_ms=0, queue="emails", status="canceled", limit=1000)
        gone = await cq.get(first.id)
    finally:
        await cq.close()
    assert again.id == first.id
    assert isinstance(ref_, TaskRef) and (ref_.id, ref_.status) == (first.id, "queued")
    assert by_key is not None and not by_key.is_terminal
    assert [t.id for t in listed] == [first.id]
    assert stats["emails"]["queued"] == 1 and headroom == 9
    assert canceled is not None and canceled.canceled
    assert retried is not None and retried.queued and retried.attempt == 0
    assert canceled_again is not None and canceled_again.canceled
    assert purged == [first.id] and gone is None


async def test_call_raises_task_failed_task_canceled_and_task_timeout(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    worker = ref.worker(queues=("default",), poll_interval_ms=50)

    @worker.task("boom")
    async def boom(ctx: TaskContext) -> None:
        raise TaskError("no such user", retryable=False)

    try:
        async with worker.background():
            with pytest.raises(TaskFailed) as failed:
                await cq.call("boom", {}, max_attempts=1, timeout_ms=30_000)
        task = await cq.submit("nobody.handles.this", {}, key="later", delay_ms=60_000)
        with pytest.raises(TaskTimeout) as timed_out:
            await cq.wait(task.id, timeout_ms=200)
        calling = asyncio.ensure_future(
            cq.call("nobody.handles.this", {}, key="soon", timeout_ms=30_000)
        )
        while (waited_on := await cq.get_by_key("soon")) is None:
            await asyncio.sleep(0.01)
        await cq.cancel_by_key("soon")
        with pytest.raises(TaskCanceled) as canceled:
            await calling
    finally:
        await cq.close()
    assert "no such user" in str(failed.value)
    assert isinstance(failed.value, CairnQError)
    assert (timed_out.value.task_id, timed_out.value.timeout_ms) == (task.id, 200)
    assert "next run in ~" in str(timed_out.value)
    assert canceled.value.task_id == waited_on.id


async def test_registration_forms_batches_and_resources(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    worker = ref.worker(
        queues=("default",), concurrency=4, resources={"gpu": 1}, poll_interval_ms=50
    )
    thumbnail = TaskDef("media.thumbnail")
    seen_batches: list[int] = []

    @worker.task(thumbnail)
    async def thumb(ctx: TaskContext, payload: Any) -> str:
        return "thumb"

    @worker.task("embed", batch=8)
    async def embed(contexts: list[TaskContext]) -> dict[str, int]:
        seen_batches.append(len(contexts))
        return {c.task_id: len(c.payload["text"]) for c in contexts}

    @worker.task("gpu.render", resource="gpu")
    async def render(ctx: TaskContext, payload: Any) -> str:
        return "rendered"

    async def plain(ctx: TaskContext) -> str:
        return ctx.name

    worker.register("plain.job", plain, batch=None, resource=None)
    try:
        tasks = [await cq.submit("embed", {"text": "x" * n}) for n in range(3)]
        others = [
            await cq.submit(name, {})
            for name in ("media.thumbnail", "gpu.render", "gpu.render", "plain.job")
        ]
        async with worker.background():
            done = [await cq.wait(t.id, timeout_ms=30_000) for t in [*tasks, *others]]
    finally:
        await cq.close()
    assert [t.result for t in done] == [0, 1, 2, "thumb", "rendered", "rendered", "plain.job"]
    assert sum(seen_batches) == 3


async def test_the_task_context_methods(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    worker = ref.worker(queues=("default",), poll_interval_ms=50)
    seen: dict[str, Any] = {}

    @worker.task("parent")
    async def parent(ctx: TaskContext, payload: Any) -> None:
        beat = await ctx.heartbeat()
        seen["heartbeat"] = beat.status
        seen["canceled"] = await ctx.canceled()
        child = await ctx.submit("child", {"n": 1})
        seen["child"] = child
        seen["child_done"] = (await ctx.wait(child.id, timeout_ms=30_000)).result
        await ctx.succeed({"parent": True})
        seen["again"] = await ctx.succeed({"twice": True})

    @worker.task("child")
    async def child(ctx: TaskContext, payload: Any) -> None:
        await ctx.fail("bad input", retryable=False)

    try:
        async with worker.background(concurrency=2):
            task = await cq.submit("parent", {}, metadata={"request": "r1"})
            done = await cq.wait(task.id, timeout_ms=30_000)
            child_task = await cq.get(seen["child"].id)
    finally:
        await cq.close()
    assert (seen["heartbeat"], seen["canceled"], seen["again"]) == ("running", False, None)
    assert done.succeeded and done.result == {"parent": True}
    assert child_task is not None and child_task.failed
    assert (child_task.parent_id, child_task.root_id) == (task.id, task.id)
    assert seen["child_done"] is None


async def test_backpressure_raises_queue_full_and_enqueues_nothing(ref: Reference) -> None:
    cq = ref.client(max_queue_depth={"emails": 1}, max_queue_wait_ms=300)
    await cq.connect()
    try:
        await cq.submit("email.send", {}, queue="emails")
        with pytest.raises(QueueFull) as full:
            await cq.submit("email.send", {}, queue="emails")
        stats = await cq.stats("emails")
    finally:
        await cq.close()
    assert (full.value.queue, full.value.max_depth) == ("emails", 1)
    assert stats["emails"]["queued"] == 1


async def test_retention_policies_are_written_as_in_the_reference(ref: Reference) -> None:
    by_status = Retention(older_than_ms={"succeeded": 86_400_000, "failed": 604_800_000})
    rules = Retention(
        [RetentionRule(older_than_ms=0, queue="emails", status="canceled")],
        interval_ms=50,
        limit=100,
    )
    cq = ref.client(retention=rules)
    await cq.connect()
    try:
        task = await cq.submit("email.send", {}, queue="emails")
        await cq.cancel(task.id)
        for _ in range(200):
            if await cq.get(task.id) is None:
                break
            await asyncio.sleep(0.02)
        gone = await cq.get(task.id)
    finally:
        await cq.close()
    assert len(by_status.rules()) == 2
    assert gone is None


async def test_the_store_layer_claims_heartbeats_and_settles(ref: Reference) -> None:
    cq = ref.client()
    await cq.connect()
    store = cq.store
    try:
        submitted = await store.submit(name="job", payload={"n": 1}, queue="default")
        [claimed] = await store.claim(
            queues=["default"], worker_id="w1", lease_ms=30_000, limit=1, names=["job"]
        )
        beat = await store.heartbeat(task_id=claimed.id, worker_id="w1", lease_ms=30_000)
        flags = await store.heartbeat_batch(task_ids=[claimed.id], worker_id="w1")
        progressed = await store.progress(
            task_id=claimed.id, worker_id="w1", progress=0.5, message="half"
        )
        failed = await store.fail(
            task_id=claimed.id, worker_id="w1", error={"message": "x"}, retryable=True
        )
        version = await store.protocol_version()
    finally:
        await cq.close()
    assert claimed.id == submitted.id and claimed.running
    assert beat.running and flags == {claimed.id: False}
    assert progressed.progress == 0.5
    assert failed.queued and failed.attempt == 1
    assert version == 1
