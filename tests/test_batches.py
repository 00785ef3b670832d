"""Batches on a real database: members and callbacks submitted at once, each callback
submitted exactly once when the batch is closed and every member ended, outcomes kept
through a purge, members added to an open batch, the sweep for ends cairnq did not
write, and each option refused with nothing written.

A reference-like worker is the protocol's claim settled with ``kernel.complete`` /
``kernel.fail`` without a ``task_end`` hook: what a worker that knows nothing of the
batch tables writes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, kernel
from cairnq.extensions.batches import Batch, BatchClosed, BatchNotFound
from cairnq.extensions.batches import _ops as _batches
from cairnq.models import Lease

from ._db import Database
from ._waits import eventually
from .test_cli import run_on


async def _claim_reference(cq: CairnQ, worker_id: str = "ref", n: int = 1000) -> list[Lease]:
    rows = await cq.backend.arun(
        kernel.claim(["default"], worker_id, 30_000, [kernel.Draw(None, n)], n), write=True
    )
    return [Lease.of(r) for r in rows]


async def _callbacks(cq: CairnQ, batch: Batch) -> dict[str, list[str]]:
    """The tasks of each callback name, by the batch's id in their payload."""
    found: dict[str, list[str]] = {}
    for task in await cq.list(limit=10_000):
        if isinstance(task.payload, dict) and task.payload.get("batch_id") == batch.id:
            found.setdefault(task.name, []).append(task.id)
    return found


CALLBACKS = {"on_success": "cb.success", "on_failure": "cb.failure", "on_complete": "cb.complete"}


async def test_a_batch_whose_members_all_succeed_submits_on_success_and_on_complete(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, queues=["default"])

    @worker.task
    async def job(ctx: Any, payload: Any) -> int:
        return int(payload["n"])

    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(20)], **CALLBACKS)
        assert batch.total == 20 and batch.pending == 20 and batch.state == "closed"
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        status = await cq.batch_status(batch.id)
        assert status is not None
        assert (status.state, status.succeeded, status.pending) == ("done", 20, 0)
        assert status.submitted == ("on_success", "on_complete")
        found = await _callbacks(cq, batch)
        assert found == {
            "cb.success": [batch.callbacks["on_success"]],
            "cb.complete": [batch.callbacks["on_complete"]],
        }


async def test_a_batch_with_a_failed_member_submits_on_failure_not_on_success(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, queues=["default"])

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        if payload["n"] == 3:
            raise RuntimeError("boom")

    async with db.client() as cq:
        items = [{"task": "job", "payload": {"n": n}, "max_attempts": 1} for n in range(6)]
        batch = await cq.batch(items, **CALLBACKS)
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        status = await cq.batch_status(batch.id)
        assert status is not None
        assert (status.succeeded, status.failed, status.state) == (5, 1, "done")
        assert sorted(await _callbacks(cq, batch)) == ["cb.complete", "cb.failure"]


async def test_the_transaction_ending_the_last_member_submits_the_callbacks(
    db: Database,
) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(2)], on_complete="cb")
        leases = await _claim_reference(cq)
        ending = kernel.ending_with(_batches.after_ended)
        await cq.backend.arun(kernel.complete(leases[0], "ref", "1", points=ending), write=True)
        assert await _callbacks(cq, batch) == {}
        await cq.backend.arun(kernel.complete(leases[1], "ref", "2", points=ending), write=True)
        assert await _callbacks(cq, batch) == {"cb": [batch.callbacks["on_complete"]]}


async def test_the_sweep_submits_the_callbacks_of_a_batch_a_reference_worker_ended(
    db: Database,
) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(3)], **CALLBACKS)
        leases = await _claim_reference(cq)
        for lease in leases[:2]:
            await cq.backend.arun(kernel.complete(lease, "ref", "1"), write=True)
        await cq.backend.arun(
            kernel.fail(leases[2], "ref", '{"message": "no"}', retryable=False, delay_ms=0),
            write=True,
        )
        assert await _callbacks(cq, batch) == {}
        assert await cq.backend.arun(_batches.sweep(), write=True) == [batch.id]
        assert await cq.backend.arun(_batches.sweep(), write=True) == []
        assert sorted(await _callbacks(cq, batch)) == ["cb.complete", "cb.failure"]
        status = await cq.batch_status(batch.id)
        assert status is not None and (status.succeeded, status.failed) == (2, 1)


async def test_a_purge_does_not_change_the_outcomes_the_callbacks_read(db: Database) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(2)], **CALLBACKS)
        leases = await _claim_reference(cq)
        await cq.backend.arun(kernel.complete(leases[0], "ref", "1"), write=True)
        await cq.backend.arun(
            kernel.fail(leases[1], "ref", '{"message": "no"}', retryable=False, delay_ms=0),
            write=True,
        )
        purged: list[str] = []

        async def both_purged() -> bool:
            # A purge takes tasks that ended before its own millisecond.
            purged.extend(await cq.purge(older_than_ms=0, name="job"))
            return len(purged) == len(leases)

        await eventually(both_purged, "both members purged")
        assert sorted(purged) == sorted(lease.id for lease in leases)
        await cq.backend.arun(_batches.sweep(), write=True)
        members = await cq.batches.members(batch.id)
        assert sorted((m.outcome, m.status) for m in members) == [
            ("failed", None),
            ("succeeded", None),
        ]
        assert sorted(await _callbacks(cq, batch)) == ["cb.complete", "cb.failure"]


async def test_members_can_be_added_to_an_open_batch_until_it_is_closed(db: Database) -> None:
    async with db.client() as cq:
        batch = await cq.batch([], on_complete="cb", close=False)
        assert batch.state == "open" and batch.total == 0
        added = await cq.batches.add(batch.id, [("job", {"n": 1}), ("job", {"n": 2})])
        assert len(added) == 2
        closed = await cq.batches.close(batch.id)
        assert (closed.state, closed.total, closed.pending) == ("closed", 2, 2)
        with pytest.raises(BatchClosed):
            await cq.batches.add(batch.id, [("job", {"n": 3})])
        status = await cq.batch_status(batch.id)
        assert status is not None and status.total == 2


async def test_an_empty_batch_closed_submits_its_callbacks_at_once(db: Database) -> None:
    async with db.client() as cq:
        batch = await cq.batch([], **CALLBACKS)
        assert batch.state == "done"
        assert sorted(await _callbacks(cq, batch)) == ["cb.complete", "cb.success"]


async def test_a_callback_s_payload_carries_the_batch_id(db: Database) -> None:
    async with db.client() as cq:
        batch = await cq.batch([], on_complete={"task": "cb", "payload": {"album": 7}})
        task = await cq.get(batch.callbacks["on_complete"])
        assert task is not None and task.payload == {"album": 7, "batch_id": batch.id}


async def test_status_of_an_unknown_batch_is_none_and_adding_to_it_is_refused(
    db: Database,
) -> None:
    async with db.client() as cq:
        assert await cq.batch_status("batch_nope") is None
        with pytest.raises(BatchNotFound):
            await cq.batches.add("batch_nope", [("job", {})])


async def test_the_sync_client_submits_and_reads_a_batch(db: Database) -> None:
    with db.sync_client() as cq:
        batch = cq.batch([("job", {"n": 1})], on_complete="cb")
        status = cq.batch_status(batch.id)
        assert status is not None and (status.total, status.pending) == (1, 1)
        assert [m.task_id for m in cq.batches.members(batch.id)] == [batch.tasks[0].id]


# --- options refused, nothing written -----------------------------------------------------


async def _refused(db: Database, **options: Any) -> None:
    async with db.client() as cq:
        before = await cq.list(limit=100)
        with pytest.raises(InvalidArgument):
            await cq.batch(**options)
        assert await cq.list(limit=100) == before


async def test_tasks_that_are_not_a_list_are_refused(db: Database) -> None:
    await _refused(db, tasks="job")


async def test_a_bad_member_is_refused(db: Database) -> None:
    await _refused(db, tasks=[("job", {}), {"payload": {}}])


async def test_on_success_of_a_wrong_type_is_refused(db: Database) -> None:
    await _refused(db, tasks=[("job", {})], on_success=42)


async def test_on_failure_with_a_key_is_refused(db: Database) -> None:
    await _refused(db, tasks=[("job", {})], on_failure={"task": "cb", "key": "k"})


async def test_on_complete_with_a_payload_that_is_not_a_dict_is_refused(db: Database) -> None:
    await _refused(db, tasks=[("job", {})], on_complete={"task": "cb", "payload": [1]})


async def test_close_that_is_not_a_bool_is_refused(db: Database) -> None:
    await _refused(db, tasks=[("job", {})], close="yes")


async def test_a_bad_batch_id_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument):
            await cq.batch_status("")
        with pytest.raises(InvalidArgument):
            await cq.batches.members("batch_x", limit=0)


async def test_a_running_worker_s_sweep_submits_the_callbacks_a_reference_worker_left(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, queues=["elsewhere"])
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(2)], on_complete="cb")
        for lease in await _claim_reference(cq):
            await cq.backend.arun(kernel.complete(lease, "ref", "1"), write=True)
        async with worker.background():
            for _ in range(400):
                found = await cq.batch_status(batch.id)
                if found is not None and found.state == "done":
                    break
                await asyncio.sleep(0.025)
        assert await _callbacks(cq, batch) == {"cb": [batch.callbacks["on_complete"]]}


async def _callbacks_run_until_idle(db: Database, members: int) -> tuple[list[str], Batch]:
    """A batch of ``members`` whose every member a reference worker ended, then a worker
    run ``until_idle``: the callback tasks it ran, and the batch."""
    worker = db.worker(poll_interval_ms=20)
    ran: list[str] = []

    @worker.task(name="cb")
    async def callback(ctx: Any) -> None:
        ran.append(ctx.task.id)

    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(members)], on_complete="cb")
        for lease in await _claim_reference(cq):
            await cq.backend.arun(kernel.complete(lease, "ref", "1"), write=True)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
    return ran, batch


async def test_a_run_until_idle_runs_the_callbacks_of_a_batch_a_reference_worker_ended(
    db: Database,
) -> None:
    ran, batch = await _callbacks_run_until_idle(db, 2)
    assert ran == [batch.callbacks["on_complete"]]


async def test_a_run_until_idle_sweeps_until_no_unrecorded_member_is_left(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep turn records at most ``SWEEP_LIMIT`` ends; a turn that recorded that many
    without finishing a batch is followed by another before the run stops."""
    monkeypatch.setattr(_batches, "SWEEP_LIMIT", 2)
    ran, batch = await _callbacks_run_until_idle(db, 8)
    assert ran == [batch.callbacks["on_complete"]]


def test_the_batch_command_prints_a_batch_s_counts_and_members(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        batch = cq.batch([("job", {"n": n}) for n in range(2)], on_complete="cb")
    result = run_on(db, capsys, "batch", batch.id, "--members", "5")
    assert result.code == 0
    shown = json.loads(result.out)
    assert (shown["id"], shown["total"], shown["pending"]) == (batch.id, 2, 2)
    assert [m["task_id"] for m in shown["members"]] == sorted(t.id for t in batch.tasks)


def test_the_batch_command_says_when_no_batch_has_the_id(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "batch", "batch_nope")
    assert result.code == 1 and "no batch has the id batch_nope" in result.out


async def test_a_callback_s_handler_reads_the_members_outcomes(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, queues=["default"])
    async with db.client() as cq:

        @worker.task
        async def job(ctx: Any, payload: Any) -> None:
            if payload["n"] == 1:
                raise RuntimeError("boom")

        @worker.task("cb")
        async def report(ctx: Any, payload: Any) -> dict[str, str | None]:
            members = await cq.batches.members(payload["batch_id"])
            return {m.task_id: m.outcome for m in members}

        items = [{"task": "job", "payload": {"n": n}, "max_attempts": 1} for n in range(3)]
        batch = await cq.batch(items, on_complete="cb")
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(batch.callbacks["on_complete"])
        assert done is not None and done.status == "succeeded"
        outcomes = {t.id: ("failed" if i == 1 else "succeeded") for i, t in enumerate(batch.tasks)}
        assert done.result == outcomes


async def test_members_added_that_are_not_a_list_are_refused_and_nothing_is_written(
    db: Database,
) -> None:
    async with db.client() as cq:
        batch = await cq.batch([], on_complete="cb", close=False)
        with pytest.raises(InvalidArgument):
            await cq.batches.add(batch.id, "job")
        status = await cq.batch_status(batch.id)
        assert status is not None and status.total == 0


async def test_a_members_page_after_that_is_not_a_task_id_is_refused(db: Database) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {})])
        with pytest.raises(InvalidArgument):
            await cq.batches.members(batch.id, after=5)  # type: ignore[arg-type]


async def test_a_client_cancel_of_the_last_member_submits_on_failure_in_its_transaction(
    db: Database,
) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": 1})], **CALLBACKS)
        await cq.cancel(batch.tasks[0].id)
        status = await cq.batch_status(batch.id)
        assert status is not None and (status.state, status.canceled) == ("done", 1)
        assert sorted(await _callbacks(cq, batch)) == ["cb.complete", "cb.failure"]
