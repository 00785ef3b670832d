"""Limits' running counts (``cairnq_limit_counts``, x0030): what a limited claim costs in
statements, how settlements and recoveries keep the counts, and how a count that drifted
(an attempt a reference SDK worker ended, rows removed from outside) is reconciled.

Claims here are the kernel's own (``kernel.claim`` with a ``ClaimGate``), run on the
backend the way a worker runs them; a settlement "as a reference SDK worker" is the
kernel's settlement without the limits' hook, which is what such a worker's statement
does to the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from typing import Any

from cairnq import CairnQ, Limit, Task, kernel
from cairnq.extensions import Limits
from cairnq.extensions.limits._claim import ClaimGate, reconcile, release
from cairnq.kernel.points import AttemptEnd, Points, Recovered, always
from cairnq.models import Lease
from cairnq.protocol.steps import Call, Op
from cairnq.testing import FakeClock

from ._db import Database
from .test_migrate_repair import outside

WORKER = "worker-a"
LIMIT = Limit.concurrency(2, queue="default", key="payload.customer")


def _heard(op: Op[Any], names: list[str]) -> Generator[Any, Any, Any]:
    """``op``, noting the name of each statement it runs in ``names``."""
    reply = None
    while True:
        try:
            step = op.send(reply)
        except StopIteration as stop:
            return stop.value
        if isinstance(step, Call):
            names.append(step.statement)
        reply = yield step


async def _claim(cq: CairnQ, want: int, names: list[str] | None = None) -> list[Any]:
    op = kernel.claim(
        ["default"],
        WORKER,
        60_000,
        [kernel.Draw(None, want)],
        0,
        points=kernel.claiming_with(ClaimGate([LIMIT])),
    )
    return list(await cq.backend.arun(_heard(op, [] if names is None else names), write=True))


def _released(ended: Sequence[AttemptEnd], recovered: Recovered | None) -> Op[None]:
    """The limits' hook as a worker runs it on every attempt its claims counted."""
    if recovered is not None:
        yield from release([str(row["id"]) for row in recovered.rows])
    else:
        yield from release([e.lease.id for e in ended])


async def _settle(cq: CairnQ, row: Any, *, hooked: bool, names: list[str] | None = None) -> None:
    """Complete ``row``: as a cairnq worker (its settlement takes the task from its key's
    count) or, not ``hooked``, as a reference SDK worker."""
    points = Points(attempt_end=((_released, None, always),)) if hooked else kernel.NO_POINTS
    op = kernel.complete(Lease.of(row), WORKER, None, points=points)
    await cq.backend.arun(_heard(op, [] if names is None else names), write=True)


def _customers(rows: Sequence[Any]) -> list[str]:
    return sorted(Task.from_row(r).payload["customer"] for r in rows)


async def _submit(cq: CairnQ, customer: str, count: int) -> None:
    await cq.submit_many([("job", {"customer": customer}) for _ in range(count)])


async def _running(cq: CairnQ) -> dict[str, int]:
    [usage] = await cq.limits.usage()
    return usage.running


async def test_a_claim_under_one_limit_is_a_page_a_take_and_the_claim(db: Database) -> None:
    async with db.client(clock=FakeClock(1_800_000_000_000)) as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 3)
        await _submit(cq, "b", 1)
        names: list[str] = []
        rows = await _claim(cq, 4, names)
    assert _customers(rows) == ["a", "a", "b"]
    assert names == ["limits_page_one_queue", "limits_take", "claim_ids"]


async def test_a_cairnq_settlement_frees_its_key_in_the_same_transaction(db: Database) -> None:
    async with db.client(clock=FakeClock(1_800_000_000_000)) as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 3)
        first = await _claim(cq, 3)
        names: list[str] = []
        await _settle(cq, first[0], hooked=True, names=names)
        assert names == ["complete", "limits_release"]
        assert _customers(await _claim(cq, 3)) == ["a"]


async def test_a_key_a_reference_worker_settled_stays_counted_until_reconciled(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(1_800_000_000_000)) as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 4)
        for row in await _claim(cq, 4):
            await _settle(cq, row, hooked=False)
        assert await _claim(cq, 4) == []
        fixed = await cq.backend.arun(reconcile([LIMIT.id]), write=True)
        assert fixed == 1
        assert _customers(await _claim(cq, 4)) == ["a", "a"]
        assert await _running(cq) == {"a": 2}


async def test_a_count_whose_keys_were_removed_from_outside_is_set_from_the_keys_left(
    db: Database,
) -> None:
    """Recorded keys deleted without their counts (the sweep of rows whose task is gone,
    a hand-run delete) leave a count too high until the reconciliation recounts it."""
    async with db.client(clock=FakeClock(1_800_000_000_000)) as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 2)
        await _claim(cq, 2)
        outside(db, "delete from cairnq_tasks")
        outside(db, "delete from cairnq_limit_keys")
        if db.kind == "postgres":  # SQLite's triggers took them from the count already
            assert outside(db, "select running from cairnq_limit_counts") == [(2,)]
        await _submit(cq, "a", 3)
        await cq.backend.arun(reconcile([LIMIT.id]), write=True)
        assert outside(db, "select running from cairnq_limit_counts") == [(0,)]
        assert _customers(await _claim(cq, 3)) == ["a", "a"]


async def test_a_recovery_by_a_cairnq_worker_frees_the_key_of_an_expired_lease(
    db: Database,
) -> None:
    clock = FakeClock(1_800_000_000_000)
    async with db.client(clock=clock) as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 3)
        await _claim(cq, 3)
        clock.advance(61_000)
        hooked = Points(attempt_end=((_released, None, always),))
        await cq.backend.arun(kernel.recover(10, points=hooked), write=True)
        assert await _running(cq) == {}
        assert _customers(await _claim(cq, 3)) == ["a", "a"]


async def test_a_worker_reconciles_a_key_left_full_and_runs_its_tasks(db: Database) -> None:
    """A count a reference SDK worker's settlement left behind holds the key full; the
    worker that finds it full reconciles within about a second and runs the key's task."""
    worker = db.worker(poll_interval_ms=20, extensions=[Limits([LIMIT])])
    ran = asyncio.Event()

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        ran.set()

    async with db.client() as cq:
        await cq.limits.set(LIMIT)
        await _submit(cq, "a", 2)
        for row in await _claim(cq, 2):
            await _settle(cq, row, hooked=False)
        await _submit(cq, "a", 1)
        async with worker.background():
            await asyncio.wait_for(ran.wait(), timeout=20)
