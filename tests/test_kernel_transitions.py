"""The kernel's transitions that extensions build on: ``hand_back`` (an owned attempt
back unspent, for later), ``defer``/``undefer`` (queued tasks put out of reach and
brought back) and ``fail_queued`` (a queued task failed without running), on every
backend."""

from __future__ import annotations

import pytest

from cairnq import CairnQ, LostLease, kernel
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database

START = 1_700_000_000_000
FAR = 253_402_214_400_000


async def _claimed(cq: CairnQ) -> Lease:
    rows = await cq.backend.arun(
        kernel.claim(["default"], "w-1", 30_000, [kernel.Draw(None, 1)], 10), write=True
    )
    return Lease.of(rows[0])


async def test_a_handed_back_attempt_is_queued_unspent_after_its_delay(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job")
        lease = await _claimed(cq)
        row = await cq.backend.arun(kernel.hand_back(lease, "w-1", delay_ms=5_000), write=True)
        assert (row["status"], row["attempt"], row["run_at_ms"]) == ("queued", 0, START + 5_000)
        stored = await cq.get(task.id)
    assert stored is not None and stored.worker_id is None


async def test_a_handed_back_attempt_is_due_at_the_time_given(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await cq.submit("job")
        lease = await _claimed(cq)
        row = await cq.backend.arun(kernel.hand_back(lease, "w-1", run_at_ms=FAR), write=True)
    assert (row["status"], row["run_at_ms"]) == ("queued", FAR)


async def test_handing_back_an_attempt_of_an_older_claim_is_a_lost_lease(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await cq.submit("job")
        lease = await _claimed(cq)
        stale = Lease(lease.id, lease.attempt, lease.token - 1)
        with pytest.raises(LostLease):
            await cq.backend.arun(kernel.hand_back(stale, "w-1"), write=True)


async def test_undefer_makes_each_deferred_task_due_its_own_delay_from_now(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        a = await cq.submit("job")
        b = await cq.submit("job")
        deferred = await cq.backend.arun(kernel.defer([a.id, b.id], FAR), write=True)
        assert {r["run_at_ms"] for r in deferred} == {FAR}
        clock.advance(1_000)
        rows = await cq.backend.arun(kernel.undefer({a.id: 0, b.id: 2_000}, FAR), write=True)
    assert {r["id"]: r["run_at_ms"] for r in rows} == {a.id: START + 1_000, b.id: START + 3_000}


async def test_undefer_leaves_a_task_no_longer_at_the_deferred_time(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        task = await cq.submit("job")
        assert await cq.backend.arun(kernel.undefer({task.id: 0}, FAR), write=True) == []
        stored = await cq.get(task.id)
    assert stored is not None and stored.run_at_ms == START


async def test_fail_queued_fails_a_queued_task_and_leaves_a_running_one(db: Database) -> None:
    error = '{"message":"no","code":"refused"}'
    async with db.client(clock=FakeClock(START)) as cq:
        running = await cq.submit("job")
        await _claimed(cq)
        queued = await cq.submit("job")
        failed = await cq.backend.arun(kernel.fail_queued(queued.id, error), write=True)
        assert [(r["id"], r["status"]) for r in failed] == [(queued.id, "failed")]
        assert await cq.backend.arun(kernel.fail_queued(running.id, error), write=True) == []
        stored = await cq.get(queued.id)
    assert stored is not None and stored.error is not None and stored.error["code"] == "refused"
