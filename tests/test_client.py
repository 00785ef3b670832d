"""The async client end to end on every backend, and the same happy path through SyncCairnQ.

Tasks are moved through ``running`` with the low-level operations a worker uses
(``cairnq.kernel.claim`` / ``fail`` / ``complete``), so no worker is involved.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    InvalidArgument,
    TaskCanceled,
    TaskDef,
    TaskFailed,
    TaskRef,
    TaskTimeout,
    _ids,
    error_envelope,
    kernel,
)
from cairnq.models import Lease, Task
from cairnq.testing import FakeClock

from ._db import Database, PluginDatabase, statement_work

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
TASK_ID = re.compile(r"^task_[0-9A-HJKMNP-TV-Z]{26}$")
WORKER = "w1"
START_MS = 1_700_000_000_000
ZERO = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}


def counts(**nonzero: int) -> dict[str, int]:
    return {**ZERO, **nonzero}


# --- low-level settling (what a worker would do) -------------------------------------------


async def claim(cq: CairnQ, task: Task) -> Lease:
    """Claim exactly ``task`` (drawn by its queue and name) for ``WORKER``."""
    op = kernel.claim([task.queue], WORKER, 30_000, [kernel.Draw([task.name], 1)], 100)
    rows = await cq.backend.arun(op, write=True)
    assert [r["id"] for r in rows] == [task.id]
    return Lease.of(rows[0])


async def fail(cq: CairnQ, lease: Lease, error: dict[str, Any], *, retryable: bool = False) -> Task:
    op = kernel.fail(lease, WORKER, json.dumps(error), retryable=retryable, delay_ms=0)
    await cq.backend.arun(op, write=True)
    return await reread(cq, lease.id)


async def complete(cq: CairnQ, lease: Lease, result: Any) -> Task:
    await cq.backend.arun(kernel.complete(lease, WORKER, json.dumps(result)), write=True)
    return await reread(cq, lease.id)


async def reread(cq: CairnQ, task_id: str) -> Task:
    task = await cq.get(task_id)
    assert task is not None
    return task


async def make_running(cq: CairnQ, name: str, **submit: Any) -> Task:
    task = await cq.submit(name, **submit)
    await claim(cq, task)
    got = await cq.get(task.id)
    assert got is not None
    assert got.status == "running"
    return got


async def make_failed(cq: CairnQ, name: str, **submit: Any) -> Task:
    task = await cq.submit(name, **submit)
    lease = await claim(cq, task)
    failed = await fail(cq, lease, error_envelope("ValueError", "bad", "it broke"))
    assert failed.status == "failed"
    return failed


async def make_succeeded(cq: CairnQ, name: str, result: Any = None, **submit: Any) -> Task:
    task = await cq.submit(name, **submit)
    lease = await claim(cq, task)
    done = await complete(cq, lease, result)
    assert done.status == "succeeded"
    return done


async def make_canceled(cq: CairnQ, name: str, **submit: Any) -> Task:
    task = await cq.submit(name, **submit)
    canceled = await cq.cancel(task.id)
    assert canceled is not None
    assert canceled.status == "canceled"
    return canceled


async def settle_when_submitted(
    cq: CairnQ, name: str, settle: Callable[[Lease], Awaitable[Any]]
) -> None:
    """Act as a one-shot worker: claim the task called ``name`` once it exists, then settle it."""
    op_draws = [kernel.Draw([name], 1)]
    for _ in range(10_000):
        rows = await cq.backend.arun(
            kernel.claim(["default"], WORKER, 30_000, op_draws, 100), write=True
        )
        if rows:
            await settle(Lease.of(rows[0]))
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {name!r} was never submitted")


async def cancel_when_submitted(cq: CairnQ, name: str) -> None:
    for _ in range(10_000):
        found = await cq.list(name=name)
        if found:
            assert await cq.cancel(found[0].id) is not None
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {name!r} was never submitted")


# --- submit --------------------------------------------------------------------------------


async def test_submit_defaults_queue_attempts_priority_and_status(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
    assert task.name == "job"
    assert task.queue == "default"
    assert task.max_attempts == 3
    assert task.priority == 0
    assert task.status == "queued"
    assert task.attempt == 0


async def test_submit_without_payload_or_metadata_stores_empty_objects(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        stored = await cq.get(task.id)
    assert stored is not None
    assert (task.payload, task.metadata) == ({}, {})
    assert (stored.payload, stored.metadata) == ({}, {})


@pytest.mark.parametrize("payload", [0, False, "", [], "s3://x", 42.5], ids=repr)
async def test_falsy_and_scalar_payloads_are_stored_as_given(db: Database, payload: Any) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", payload)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload
    assert type(stored.payload) is type(payload)


async def test_submit_stores_payload_and_metadata(db: Database) -> None:
    payload = {"to": "a@example.com", "n": [1, 2.5, None, True], "nested": {"k": "é"}}
    metadata = {"trace": "abc", "tags": ["x"]}
    async with db.client() as cq:
        task = await cq.submit("email.send", payload, metadata=metadata)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.payload == payload
    assert stored.metadata == metadata


async def test_submit_gives_a_task_prefixed_crockford_ulid_id(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("job")
        second = await cq.submit("job")
    assert TASK_ID.match(first.id)
    assert TASK_ID.match(second.id)
    assert first.id != second.id


def ulid_ms(task_id: str) -> int:
    """The millisecond timestamp in the first ten Crockford characters of a task id's ULID."""
    value = 0
    for char in task_id.removeprefix("task_")[:10]:
        value = value * 32 + CROCKFORD.index(char)
    return value


async def test_task_id_encodes_the_wall_clock_time_it_was_made(db: Database) -> None:
    async with db.client() as cq:
        before = time.time_ns() // 1_000_000
        task = await cq.submit("job")
        after = time.time_ns() // 1_000_000
    assert before <= ulid_ms(task.id) <= after


@pytest.mark.parametrize("ms", [0, 1, 1_764_000_000_000, 2**48 - 1])
def test_ulid_puts_the_milliseconds_in_its_first_ten_characters(ms: int) -> None:
    made = _ids.task_id(ms)
    assert TASK_ID.match(made)
    assert ulid_ms(made) == ms


async def test_top_level_task_is_its_own_root_with_no_parent_or_correlation(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
    assert task.root_id == task.id
    assert task.parent_id is None
    assert task.correlation_id is None


async def test_new_task_has_no_run_state(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
    assert task.result is None
    assert task.error is None
    assert task.progress is None
    assert task.message is None
    assert task.worker_id is None
    assert task.lease_until_ms is None
    assert task.cancel_requested_at_ms is None
    assert task.completed_at_ms is None


async def test_submit_returns_the_row_get_reads_back(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", {"a": 1}, metadata={"m": 2}, priority=4)
        stored = await cq.get(task.id)
    assert stored is not None
    assert stored.to_dict() == task.to_dict()


async def test_submit_stamps_created_updated_and_run_at_from_the_clock(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
    assert (task.created_at_ms, task.updated_at_ms, task.run_at_ms) == (START_MS,) * 3


async def test_submit_with_delay_runs_at_now_plus_delay(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", delay_ms=60_000)
    assert task.created_at_ms == START_MS
    assert task.run_at_ms == START_MS + 60_000


async def test_delayed_task_is_not_claimable_until_the_delay_has_passed(db: Database) -> None:
    clock = FakeClock(START_MS)

    def claim_any() -> Any:
        return kernel.claim(["default"], WORKER, 30_000, [kernel.Draw(None, 1)], 100)

    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", delay_ms=60_000)
        clock.advance(59_999)
        early = await cq.backend.arun(claim_any(), write=True)
        clock.advance(1)
        due = await cq.backend.arun(claim_any(), write=True)
    assert early == []
    assert [r["id"] for r in due] == [task.id]


@pytest.mark.parametrize("tiers", [3, 40])
async def test_the_idle_probe_finds_a_due_task_below_every_tier_of_delayed_ones(
    db: Database, tiers: int
) -> None:
    # 40 tiers is past the probe's skip-scan depth, so its fallback range is checked too.
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        await cq.submit_many(
            [{"task": "job", "priority": p, "delay_ms": 60_000} for p in range(tiers)]
        )
        await cq.submit("other", priority=-1)
        await cq.submit("job", queue="elsewhere", priority=-1)
        quiet = await cq.backend.arun(kernel.probe(["default"], ["job"]), write=False)
        await cq.submit("job", priority=-1, delay_ms=1_000)
        early = await cq.backend.arun(kernel.probe(["default"], ["job"]), write=False)
        clock.advance(1_000)
        due = await cq.backend.arun(kernel.probe(["default"], ["job"]), write=False)
    assert (quiet, early, due) == (False, False, True)


def probe_work(db: Database) -> int:
    """What one idle probe reads: SQLite VM steps, or PostgreSQL buffers touched."""
    queues, names = (["default"], ["job"])
    if db.kind == "sqlite":
        params = {"queues": json.dumps(queues), "names": json.dumps(names), "now_ms": START_MS}
    else:
        params = {"queues": queues, "names": names, "now_ms": START_MS}
    work, rows = statement_work(db, "claimable_probe", params)
    assert rows == 1
    return work


async def test_the_idle_probe_reads_no_more_with_a_deep_backlog_of_delayed_tasks(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    work = []
    async with db.client(clock=clock) as cq:
        for size in (200, 10_000):
            await cq.submit_many(
                [{"task": "job", "priority": i % 3, "delay_ms": 60_000} for i in range(size)]
            )
            work.append(probe_work(db))
            assert not await cq.backend.arun(kernel.probe(["default"], ["job"]), write=False)
    assert work[1] < 2 * work[0], f"probe work with 200 and 10,200 delayed tasks: {work}"


async def test_submit_overrides_queue_attempts_and_priority(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", queue="media", max_attempts=7, priority=-3)
    assert (task.queue, task.max_attempts, task.priority) == ("media", 7, -3)


# --- TaskDef -------------------------------------------------------------------------------


async def test_taskdef_supplies_its_name_queue_attempts_and_priority(db: Database) -> None:
    resize = TaskDef[dict, dict]("images.resize", queue="media", max_attempts=5, priority=9)
    async with db.client() as cq:
        task = await cq.submit(resize, {"w": 640})
    assert (task.name, task.queue, task.max_attempts, task.priority) == (
        "images.resize",
        "media",
        5,
        9,
    )
    assert task.payload == {"w": 640}


async def test_taskdef_without_defaults_falls_back_to_the_client_defaults(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit(TaskDef("plain"))
    assert (task.name, task.queue, task.max_attempts, task.priority) == ("plain", "default", 3, 0)


async def test_submit_arguments_override_taskdef_defaults(db: Database) -> None:
    resize = TaskDef("images.resize", queue="media", max_attempts=5, priority=9)
    async with db.client() as cq:
        task = await cq.submit(resize, queue="bulk", max_attempts=1, priority=0)
    assert (task.queue, task.max_attempts, task.priority) == ("bulk", 1, 0)


# --- lineage -------------------------------------------------------------------------------


async def test_submit_stores_parent_root_and_correlation_ids(db: Database) -> None:
    async with db.client() as cq:
        parent = await cq.submit("parent", correlation_id="order-42")
        child = await cq.submit(
            "child", parent_id=parent.id, root_id=parent.root_id, correlation_id="order-42"
        )
        stored = await cq.get(child.id)
    assert stored is not None
    assert (stored.parent_id, stored.root_id, stored.correlation_id) == (
        parent.id,
        parent.id,
        "order-42",
    )


async def test_list_by_root_id_returns_the_whole_chain_newest_first(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        root = await cq.submit("root")
        clock.advance(1)
        child = await cq.submit("child", parent_id=root.id, root_id=root.id)
        clock.advance(1)
        grandchild = await cq.submit("grandchild", parent_id=child.id, root_id=root.id)
        clock.advance(1)
        await cq.submit("unrelated")
        chain = await cq.list(root_id=root.id)
    assert [t.id for t in chain] == [grandchild.id, child.id, root.id]


async def test_list_by_correlation_id_returns_only_that_correlation(db: Database) -> None:
    async with db.client() as cq:
        a1 = await cq.submit("a", correlation_id="c-1")
        a2 = await cq.submit("b", correlation_id="c-1")
        await cq.submit("c", correlation_id="c-2")
        await cq.submit("d")
        found = await cq.list(correlation_id="c-1")
    assert {t.id for t in found} == {a1.id, a2.id}


# --- reads ---------------------------------------------------------------------------------


async def test_get_of_an_unknown_id_is_none(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        await cq.submit("job")
        assert await cq.get("task_00000000000000000000000000") is None


async def test_get_by_key_returns_the_keyed_task(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        task = await cq.submit("job", key="welcome:42")
        found = await cq.get_by_key("welcome:42")
    assert found is not None
    assert found.to_dict() == task.to_dict()


async def test_get_by_key_of_an_unknown_key_is_none(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        await cq.submit("job", key="k1")
        assert await cq.get_by_key("k2") is None


async def test_get_status_returns_id_and_status(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        task = await cq.submit("job")
        await cq.cancel(task.id)
        ref = await cq.get_status(task.id)
    assert ref == TaskRef(task.id, "canceled")


async def test_get_status_of_an_unknown_id_is_none(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        assert await cq.get_status("task_00000000000000000000000000") is None


async def test_get_status_by_key_returns_the_keyed_task_ref(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        task = await cq.submit("job", key="k1")
        assert await cq.get_status_by_key("k1") == TaskRef(task.id, "queued")


async def test_get_status_by_key_of_an_unknown_key_is_none(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        await cq.submit("job", key="k1")
        assert await cq.get_status_by_key("nope") is None


# --- list ----------------------------------------------------------------------------------


async def test_list_filters_by_status(db: Database) -> None:
    async with db.client() as cq:
        queued = await cq.submit("a")
        canceled = await make_canceled(cq, "b")
        failed = await make_failed(cq, "c")
        by_status = {s: [t.id for t in await cq.list(status=s)] for s in ("queued", "canceled")}
        by_failed = [t.id for t in await cq.list(status="failed")]
        by_running = await cq.list(status="running")
    assert by_status == {"queued": [queued.id], "canceled": [canceled.id]}
    assert by_failed == [failed.id]
    assert by_running == []


async def test_list_filters_by_queue(db: Database) -> None:
    async with db.client() as cq:
        media = await cq.submit("a", queue="media")
        await cq.submit("a", queue="email")
        found = await cq.list(queue="media")
    assert [t.id for t in found] == [media.id]


async def test_list_filters_by_name(db: Database) -> None:
    async with db.client() as cq:
        resize = await cq.submit("images.resize")
        await cq.submit("images.crop")
        found = await cq.list(name="images.resize")
    assert [t.id for t in found] == [resize.id]


async def test_list_combines_filters_with_and(db: Database) -> None:
    async with db.client() as cq:
        match = await cq.submit("a", queue="q1")
        await cq.submit("a", queue="q2")
        await cq.submit("b", queue="q1")
        await make_canceled(cq, "a", queue="q1")
        found = await cq.list(queue="q1", name="a", status="queued")
    assert [t.id for t in found] == [match.id]


async def test_list_returns_newest_first(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        ids = []
        for _ in range(4):
            ids.append((await cq.submit("job")).id)
            clock.advance(10)
        found = await cq.list()
    assert [t.id for t in found] == ids[::-1]


async def test_list_orders_tasks_created_in_the_same_ms_by_id_descending(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        ids = [(await cq.submit("job")).id for _ in range(6)]
        found = await cq.list()
    assert [t.id for t in found] == sorted(ids, reverse=True)


async def test_list_limit_and_offset_page_through_results(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        ids = []
        for _ in range(5):
            ids.append((await cq.submit("job")).id)
            clock.advance(1)
        newest_first = ids[::-1]
        pages = [[t.id for t in await cq.list(limit=2, offset=o)] for o in (0, 2, 4, 6)]
    assert pages == [newest_first[0:2], newest_first[2:4], newest_first[4:5], []]


async def test_list_with_limit_zero_is_empty(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("job")
        assert await cq.list(limit=0) == []


async def test_list_defaults_to_at_most_100_tasks(db: Database) -> None:
    async with db.client() as cq:
        for _ in range(101):
            await cq.submit("job")
        found = await cq.list()
    assert len(found) == 100


# --- cancel --------------------------------------------------------------------------------


async def test_cancel_of_a_queued_task_cancels_it_now(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        clock.advance(500)
        canceled = await cq.cancel(task.id)
        stored = await cq.get(task.id)
    assert canceled is not None
    assert canceled.status == "canceled"
    assert canceled.completed_at_ms == START_MS + 500
    assert canceled.updated_at_ms == START_MS + 500
    assert canceled.cancel_requested_at_ms is None
    assert stored is not None
    assert stored.to_dict() == canceled.to_dict()


async def test_cancel_of_a_running_task_requests_cancel_and_leaves_it_running(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await make_running(cq, "job")
        clock.advance(250)
        requested = await cq.cancel(task.id)
    assert requested is not None
    assert requested.status == "running"
    assert requested.cancel_requested_at_ms == START_MS + 250
    assert requested.completed_at_ms is None
    assert requested.cancel_requested


async def test_repeated_cancel_of_a_running_task_moves_the_request_time(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await make_running(cq, "job")
        await cq.cancel(task.id)
        clock.advance(100)
        again = await cq.cancel(task.id)
    assert again is not None
    assert again.cancel_requested_at_ms == START_MS + 100


@pytest.mark.parametrize("status", ["succeeded", "failed", "canceled"])
async def test_cancel_of_a_terminal_task_returns_none_and_changes_nothing(
    db: Database, status: str
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        make = {"succeeded": make_succeeded, "failed": make_failed, "canceled": make_canceled}
        task = await make[status](cq, "job")
        clock.advance(1_000)
        outcome = await cq.cancel(task.id)
        stored = await cq.get(task.id)
    assert outcome is None
    assert stored is not None
    assert stored.to_dict() == task.to_dict()


async def test_cancel_of_an_unknown_id_returns_none(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.cancel("task_00000000000000000000000000") is None
        assert await cq.stats() == {}


# --- retry ---------------------------------------------------------------------------------


async def test_retry_of_a_failed_task_queues_it_again_keeping_its_attempts(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        failed = await make_failed(cq, "job")
        clock.advance(5_000)
        retried = await cq.retry(failed.id)
    assert failed.attempt == 1
    assert failed.error is not None
    assert retried is not None
    assert retried.status == "queued"
    assert retried.attempt == 1
    assert retried.run_at_ms == START_MS + 5_000
    assert retried.error is None
    assert retried.worker_id is None
    assert retried.completed_at_ms is None
    assert retried.lease_until_ms is None


async def test_retry_of_a_canceled_task_queues_it_again(db: Database) -> None:
    async with db.client() as cq:
        canceled = await make_canceled(cq, "job")
        retried = await cq.retry(canceled.id)
        stored = await cq.get(canceled.id)
    assert retried is not None
    assert retried.status == "queued"
    assert retried.completed_at_ms is None
    assert stored is not None
    assert stored.status == "queued"


async def test_retry_with_reset_attempt_zeroes_the_attempt_count(db: Database) -> None:
    async with db.client() as cq:
        failed = await make_failed(cq, "job")
        retried = await cq.retry(failed.id, reset_attempt=True)
    assert failed.attempt == 1
    assert retried is not None
    assert retried.attempt == 0


async def test_retry_of_a_canceled_running_task_clears_the_cancel_request(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        lease = await claim(cq, task)
        await cq.cancel(task.id)
        canceled = await complete(cq, lease, {"ignored": True})
        retried = await cq.retry(task.id)
    assert canceled.status == "canceled"
    assert canceled.cancel_requested
    assert retried is not None
    assert retried.status == "queued"
    assert retried.cancel_requested_at_ms is None


async def test_retry_of_a_succeeded_task_returns_none_and_changes_nothing(db: Database) -> None:
    async with db.client() as cq:
        done = await make_succeeded(cq, "job", {"ok": 1})
        outcome = await cq.retry(done.id, reset_attempt=True)
        stored = await cq.get(done.id)
    assert outcome is None
    assert stored is not None
    assert stored.to_dict() == done.to_dict()


@pytest.mark.parametrize("status", ["queued", "running"])
async def test_retry_of_a_live_task_returns_none_and_changes_nothing(
    db: Database, status: str
) -> None:
    async with db.client() as cq:
        task = await (make_running(cq, "job") if status == "running" else cq.submit("job"))
        outcome = await cq.retry(task.id)
        stored = await cq.get(task.id)
    assert outcome is None
    assert stored is not None
    assert stored.to_dict() == task.to_dict()


async def test_retry_of_an_unknown_id_returns_none(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.retry("task_00000000000000000000000000") is None


# --- purge ---------------------------------------------------------------------------------


async def test_purge_deletes_only_tasks_completed_before_the_cutoff(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        old = await make_canceled(cq, "old")
        clock.advance(1_000)
        recent = await make_canceled(cq, "recent")
        clock.advance(500)
        purged = await cq.purge(older_than_ms=1_000)
        old_after = await cq.get(old.id)
        recent_after = await cq.get(recent.id)
    assert purged == [old.id]
    assert old_after is None
    assert recent_after is not None


async def test_purge_cutoff_is_strict(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await make_canceled(cq, "job")
        clock.advance(1_000)
        at_cutoff = await cq.purge(older_than_ms=1_000)
        clock.advance(1)
        past_cutoff = await cq.purge(older_than_ms=1_000)
    assert at_cutoff == []
    assert past_cutoff == [task.id]


async def test_purge_never_deletes_queued_or_running_tasks(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        queued = await cq.submit("queued")
        running = await make_running(cq, "running")
        clock.advance(10_000)
        purged = await cq.purge()
        left = {t.id for t in await cq.list()}
    assert purged == []
    assert left == {queued.id, running.id}


async def test_purge_deletes_every_terminal_status(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        done = await make_succeeded(cq, "a", 1)
        failed = await make_failed(cq, "b")
        canceled = await make_canceled(cq, "c")
        clock.advance(1)
        purged = await cq.purge()
        left = await cq.list()
    assert sorted(purged) == sorted([done.id, failed.id, canceled.id])
    assert left == []


async def test_purge_by_status_deletes_only_that_status(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        failed = await make_failed(cq, "a")
        canceled = await make_canceled(cq, "b")
        clock.advance(1)
        purged = await cq.purge(status="failed")
        left = [t.id for t in await cq.list()]
    assert purged == [failed.id]
    assert left == [canceled.id]


async def test_purge_by_queue_and_name_deletes_only_matching_tasks(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        target = await make_canceled(cq, "a", queue="q1")
        other_queue = await make_canceled(cq, "a", queue="q2")
        other_name = await make_canceled(cq, "b", queue="q1")
        clock.advance(1)
        purged = await cq.purge(queue="q1", name="a")
        left = {t.id for t in await cq.list()}
    assert purged == [target.id]
    assert left == {other_queue.id, other_name.id}


async def test_purge_limit_deletes_the_oldest_completed_first(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await make_canceled(cq, "job")
        clock.advance(10)
        second = await make_canceled(cq, "job")
        clock.advance(10)
        third = await make_canceled(cq, "job")
        clock.advance(10)
        purged = await cq.purge(limit=2)
        left = [t.id for t in await cq.list()]
    assert sorted(purged) == sorted([first.id, second.id])
    assert left == [third.id]


async def test_purge_takes_the_key_with_the_task(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", key="k1")
        await cq.cancel(task.id)
        clock.advance(1)
        purged = await cq.purge()
        by_key = await cq.get_by_key("k1")
        status_by_key = await cq.get_status_by_key("k1")
    assert purged == [task.id]
    assert by_key is None
    assert status_by_key is None


async def test_purge_of_nothing_returns_an_empty_list(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.purge() == []


# --- stats and queue depth -----------------------------------------------------------------


async def test_stats_of_an_empty_database_is_empty(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.stats() == {}


async def test_stats_counts_every_status_per_queue_zero_filled(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("a", queue="q1")
        await cq.submit("a", queue="q1")
        await make_running(cq, "r", queue="q1")
        await make_failed(cq, "f", queue="q2")
        await make_succeeded(cq, "s", queue="q2")
        await make_canceled(cq, "c", queue="q2")
        stats = await cq.stats()
    assert stats == {
        "q1": counts(queued=2, running=1),
        "q2": counts(succeeded=1, failed=1, canceled=1),
    }


async def test_stats_for_one_queue_leaves_out_the_others(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("a", queue="q1")
        await cq.submit("a", queue="q2")
        assert await cq.stats("q1") == {"q1": counts(queued=1)}


async def test_stats_for_an_unknown_queue_is_all_zeros(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("a", queue="q1")
        assert await cq.stats("nobody") == {"nobody": counts()}


async def test_queue_depth_is_headroom_under_max_depth(db: Database) -> None:
    async with db.client() as cq:
        for _ in range(3):
            await cq.submit("job", queue="q")
        assert await cq.queue_depth("q", 10) == 7


async def test_queue_depth_counts_delayed_but_not_running_or_finished_tasks(
    db: Database,
) -> None:
    async with db.client() as cq:
        await cq.submit("job", queue="q", delay_ms=3_600_000)
        await make_running(cq, "r", queue="q")
        await make_canceled(cq, "c", queue="q")
        await make_failed(cq, "f", queue="q")
        await cq.submit("job", queue="other")
        assert await cq.queue_depth("q", 10) == 9


async def test_queue_depth_is_zero_at_or_over_max_depth(db: Database) -> None:
    async with db.client() as cq:
        for _ in range(3):
            await cq.submit("job", queue="q")
        assert await cq.queue_depth("q", 3) == 0
        assert await cq.queue_depth("q", 2) == 0
        assert await cq.queue_depth("q", 0) == 0


async def test_queue_depth_of_an_empty_queue_is_max_depth(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.queue_depth("q", 5) == 5


# --- wait ----------------------------------------------------------------------------------


async def test_wait_on_a_finished_task_returns_it(db: Database) -> None:
    async with db.client() as cq:
        task = await make_canceled(cq, "job")
        done = await cq.wait(task.id, timeout_ms=5_000)
    assert done.to_dict() == task.to_dict()


async def test_wait_returns_a_task_canceled_by_another_call(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        waiter = asyncio.create_task(cq.wait(task.id, timeout_ms=60_000))
        await asyncio.sleep(0)
        await cq.cancel(task.id)
        done = await waiter
    assert done.id == task.id
    assert done.status == "canceled"


async def test_wait_returns_a_task_failed_through_another_client(db: Database) -> None:
    async with db.client() as cq, db.client() as other:
        task = await cq.submit("job")
        waiter = asyncio.create_task(cq.wait(task.id, timeout_ms=60_000))
        lease = await claim(other, task)
        await fail(other, lease, error_envelope("KeyError", "missing", "no such user"))
        done = await waiter
    assert done.status == "failed"
    assert done.error == error_envelope("KeyError", "missing", "no such user")


async def test_wait_returns_a_succeeded_task_with_its_result(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        waiter = asyncio.create_task(cq.wait(task.id, timeout_ms=60_000))
        lease = await claim(cq, task)
        await complete(cq, lease, {"rows": 3})
        done = await waiter
    assert done.status == "succeeded"
    assert done.result == {"rows": 3}


async def test_wait_timeout_raises_task_timeout_with_a_snapshot(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("report.build", queue="reports")
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout_ms=50, poll_ms=10)
    timeout = excinfo.value
    assert not isinstance(timeout, OSError)
    assert timeout.task_id == task.id
    assert timeout.timeout_ms == 50
    assert timeout.task is not None
    assert timeout.task.to_dict() == task.to_dict()


async def test_wait_timeout_message_says_the_task_was_never_claimed(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("report.build", queue="reports")
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)
    message = str(excinfo.value)
    assert message.startswith(f"task {task.id} did not finish within 20ms")
    assert "never claimed" in message
    assert "'reports'" in message
    assert "'report.build'" in message


async def test_wait_timeout_leaves_the_task_queued(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        with pytest.raises(TaskTimeout):
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)
        after = await cq.get(task.id)
    assert after is not None
    assert after.to_dict() == task.to_dict()


async def test_wait_timeout_on_a_running_task_names_its_worker(db: Database) -> None:
    async with db.client() as cq:
        task = await make_running(cq, "job")
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)
    assert f"still running on {WORKER} (attempt 1/3)" in str(excinfo.value)
    assert excinfo.value.task is not None
    assert excinfo.value.task.status == "running"


async def test_wait_timeout_on_a_cancel_requested_task_says_so(db: Database) -> None:
    async with db.client() as cq:
        task = await make_running(cq, "job")
        await cq.cancel(task.id)
        with pytest.raises(TaskTimeout, match="cancel requested"):
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)


async def test_wait_timeout_on_a_task_queued_for_another_attempt_says_so(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        lease = await claim(cq, task)
        await fail(cq, lease, error_envelope("OSError", "io", "flaky"), retryable=True)
        with pytest.raises(
            TaskTimeout, match=r"still queued \(attempt 1/3\), next run in ~(\d+ms|\d+s|\d+m\d\ds):"
        ):
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)


async def test_wait_timeout_estimates_the_next_run_on_the_backend_clock(db: Database) -> None:
    clock = FakeClock(START_MS)  # years before the host's wall clock
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        lease = await claim(cq, task)
        op = kernel.fail(lease, WORKER, '{"code":"x"}', retryable=True, delay_ms=5_000)
        await cq.backend.arun(op, write=True)
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout_ms=20, poll_ms=10)
    assert "next run in ~5s: it waits for another attempt" in str(excinfo.value)


async def test_wait_on_an_unknown_id_times_out_saying_there_is_no_such_task(
    db: Database,
) -> None:
    async with db.client() as cq:
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait("task_00000000000000000000000000", timeout_ms=20, poll_ms=10)
    assert excinfo.value.task is None
    assert "no task with that id exists" in str(excinfo.value)


# --- call ----------------------------------------------------------------------------------


async def test_call_returns_the_result_of_the_task(db: Database) -> None:
    async with db.client() as cq:

        async def succeed(lease: Lease) -> None:
            await complete(cq, lease, {"sum": 3})

        helper = asyncio.create_task(settle_when_submitted(cq, "add", succeed))
        result = await cq.call("add", {"a": 1, "b": 2}, timeout_ms=60_000)
        await helper
        stored = await cq.list(name="add")
    assert result == {"sum": 3}
    assert [t.status for t in stored] == ["succeeded"]
    assert stored[0].payload == {"a": 1, "b": 2}


async def test_call_returns_none_when_the_task_has_no_result(db: Database) -> None:
    async with db.client() as cq:

        async def succeed(lease: Lease) -> None:
            await cq.backend.arun(kernel.complete(lease, WORKER, None), write=True)

        helper = asyncio.create_task(settle_when_submitted(cq, "noop", succeed))
        result = await cq.call("noop", timeout_ms=60_000)
        await helper
    assert result is None


async def test_call_passes_submit_options_through(db: Database) -> None:
    async with db.client() as cq:

        async def succeed(lease: Lease) -> None:
            await complete(cq, lease, "ok")

        helper = asyncio.create_task(settle_when_submitted(cq, "opt", succeed))
        result = await cq.call("opt", key="once", priority=5, timeout_ms=60_000)
        await helper
        stored = await cq.get_by_key("once")
    assert result == "ok"
    assert stored is not None
    assert stored.priority == 5


async def test_call_raises_task_failed_carrying_the_error_envelope(db: Database) -> None:
    envelope = error_envelope(
        "ValueError", "bad_input", "amount must be positive", details={"field": "amount"}
    )
    async with db.client() as cq:

        async def reject(lease: Lease) -> None:
            await fail(cq, lease, envelope)

        helper = asyncio.create_task(settle_when_submitted(cq, "charge", reject))
        with pytest.raises(TaskFailed) as excinfo:
            await cq.call("charge", {"amount": -1}, timeout_ms=60_000)
        await helper
        stored = await cq.list(name="charge")
    failed = excinfo.value
    assert failed.code == "bad_input"
    assert failed.message == "amount must be positive"
    assert failed.type == "ValueError"
    assert failed.retryable is False
    assert failed.details == {"field": "amount"}
    assert failed.error == envelope
    assert failed.task_id == stored[0].id
    assert str(failed) == "ValueError [bad_input]: amount must be positive"


async def test_call_raises_task_canceled_when_the_task_is_canceled(db: Database) -> None:
    async with db.client() as cq:
        helper = asyncio.create_task(cancel_when_submitted(cq, "slow"))
        with pytest.raises(TaskCanceled) as excinfo:
            await cq.call("slow", timeout_ms=60_000)
        await helper
        stored = await cq.list(name="slow")
    assert [t.status for t in stored] == ["canceled"]
    assert excinfo.value.task_id == stored[0].id


async def test_call_raises_task_timeout_when_nothing_runs_the_task(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(TaskTimeout, match="never claimed"):
            await cq.call("nobody.serves.this", timeout_ms=20, poll_ms=10)
        stored = await cq.list(name="nobody.serves.this")
    assert [t.status for t in stored] == ["queued"]


async def test_call_with_a_taskdef_uses_its_queue(db: Database) -> None:
    media = TaskDef("media.job", queue="media")
    async with db.client() as cq:

        async def succeed(lease: Lease) -> None:
            await complete(cq, lease, 1)

        async def claim_from_media() -> None:
            for _ in range(10_000):
                op = kernel.claim(["media"], WORKER, 30_000, [kernel.Draw(None, 1)], 100)
                rows = await cq.backend.arun(op, write=True)
                if rows:
                    await succeed(Lease.of(rows[0]))
                    return
                await asyncio.sleep(0.005)

        helper = asyncio.create_task(claim_from_media())
        result = await cq.call(media, timeout_ms=60_000)
        await helper
    assert result == 1


# --- the blocking client -------------------------------------------------------------------


def test_sync_submit_then_get_returns_the_same_task(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit("job", {"x": 1}, key="k", metadata={"m": True})
        stored = cq.get(task.id)
        by_key = cq.get_by_key("k")
    assert task.status == "queued"
    assert TASK_ID.match(task.id)
    assert stored is not None
    assert stored.to_dict() == task.to_dict()
    assert by_key is not None
    assert by_key.id == task.id


def test_sync_cancel_cancels_a_queued_task_once(db: Database) -> None:
    clock = FakeClock(START_MS)
    with db.sync_client(clock=clock) as cq:
        task = cq.submit("job")
        clock.advance(7)
        canceled = cq.cancel(task.id)
        again = cq.cancel(task.id)
        status = cq.get_status(task.id)
    assert canceled is not None
    assert canceled.status == "canceled"
    assert canceled.completed_at_ms == START_MS + 7
    assert again is None
    assert status == TaskRef(task.id, "canceled")


def test_sync_wait_timeout_raises_task_timeout(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit("job")
        with pytest.raises(TaskTimeout) as excinfo:
            cq.wait(task.id, timeout_ms=30, poll_ms=10)
        after = cq.get_status(task.id)
    assert excinfo.value.task is not None
    assert excinfo.value.task.id == task.id
    assert "never claimed" in str(excinfo.value)
    assert after == TaskRef(task.id, "queued")


def test_sync_wait_returns_a_finished_task(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit("job")
        cq.cancel(task.id)
        done = cq.wait(task.id, timeout_ms=5_000)
    assert done.status == "canceled"


def test_sync_list_stats_and_purge(db: Database) -> None:
    clock = FakeClock(START_MS)
    with db.sync_client(clock=clock) as cq:
        keep = cq.submit("keep")
        drop = cq.submit("drop")
        cq.cancel(drop.id)
        clock.advance(1)
        stats_before = cq.stats()
        purged = cq.purge()
        left = [t.id for t in cq.list()]
    assert stats_before == {"default": counts(queued=1, canceled=1)}
    assert purged == [drop.id]
    assert left == [keep.id]


def test_sync_retry_requeues_a_canceled_task(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit("job", key="k")
        cq.cancel_by_key("k")
        retried = cq.retry_by_key("k", reset_attempt=True)
    assert retried is not None
    assert retried.id == task.id
    assert retried.status == "queued"


async def test_submitting_a_registered_handler_submits_its_task(db: Database) -> None:
    worker = db.worker()

    @worker.task("images.resize")
    async def resize(ctx: Any, payload: Any) -> None: ...

    async with db.client() as cq:
        task = await cq.submit(resize, {"w": 100})
        (listed,) = await cq.submit_many([(resize, {"w": 200})])
    assert (task.name, listed.name) == ("images.resize", "images.resize")
    await worker.close()


async def test_submitting_a_function_no_worker_registered_says_how_and_writes_nothing(
    db: Database,
) -> None:
    async def resize(ctx: Any, payload: Any) -> None: ...

    async with db.client() as cq:
        with pytest.raises(InvalidArgument) as excinfo:
            await cq.submit(resize, {"w": 100})
        assert await cq.list() == []
    message = str(excinfo.value)
    assert message.startswith("task name must be a string or a TaskDef, not the function ")
    assert "cq.submit('resize', ...)" in message


async def test_submitting_a_handler_registered_under_two_names_asks_for_one(
    db: Database,
) -> None:
    first, second = db.worker(), db.worker()

    async def resize(ctx: Any, payload: Any) -> None: ...

    first.register("images.resize", resize)
    second.register("thumbs.resize", resize)
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="handles several tasks"):
            await cq.submit(resize)
    await first.close()
    await second.close()
