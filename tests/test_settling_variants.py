"""A settling variant settles exactly as the kernel's statement it stands in for.

The attempt history records each settled attempt in the settling statement itself
where the database allows it (PostgreSQL: ``history_complete``,
``history_complete_many``, ``history_fail``, run in place of ``complete``,
``complete_many`` and ``fail``). Each case settles two identical claimed tasks,
one with the kernel's statement followed by the history's ``record`` hook, the
other as a worker compiles the history's hooks for this database, and compares
the two task rows and the two attempt rows. On SQLite, which has no variant, both
take the first path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairnq import kernel
from cairnq.extensions.history._hooks import RECORDING, record, settling_for
from cairnq.kernel.points import Points, Settling
from cairnq.models import Lease
from cairnq.protocol.steps import Op
from cairnq.testing import FakeClock

from ._db import Database

START = 1_800_000_000_000
WORKER = "w-settling"
KEPT = ("status", "result", "error", "progress", "message", "worker_id", "attempt")
KEPT += ("run_at_ms", "lease_until_ms", "completed_at_ms", "updated_at_ms", "queue")

Settle = Callable[[list[Lease], Points], Op[Any]]


def _compiled(db: Database) -> Points:
    """The history's hooks as a worker on ``db`` compiles them."""
    settling = settling_for(db.kind)
    found = () if settling is None else (Settling(record, settling),)
    return Points(attempt_end=RECORDING.attempt_end, settling=found)


async def _settled_pair(
    db: Database, settle: Settle, *, cancel: bool = False, max_attempts: int = 3, tasks: int = 1
) -> tuple[list[Any], list[Any]]:
    """(task rows, attempt rows) of ``tasks`` identical tasks settled each way in turn: a
    pair of lists of one entry per task (of each task's attempts)."""
    rows: list[Any] = []
    attempts: list[Any] = []
    async with db.client(clock=FakeClock(START)) as cq:
        for points in (RECORDING, _compiled(db)):
            submitted = [
                await cq.submit("job", {"n": 1}, max_attempts=max_attempts) for _ in range(tasks)
            ]
            claimed = await cq.backend.arun(
                kernel.claim(["default"], WORKER, 60_000, [kernel.Draw(None, tasks)], 0),
                write=True,
            )
            leases = [Lease.of(row) for row in claimed]
            assert sorted(lease.id for lease in leases) == sorted(t.id for t in submitted)
            if cancel:
                for task in submitted:
                    await cq.cancel(task.id)
            await cq.backend.arun(settle(leases, points), write=True)
            got = [await cq.get(task.id) for task in submitted]
            rows.append([{k: getattr(task, k, None) for k in KEPT} for task in got])
            attempts.append(
                [[_plain(a) for a in await cq.attempts.list(task.id)] for task in submitted]
            )
    return rows, attempts


def _plain(attempt: Any) -> dict[str, Any]:
    return {
        k: getattr(attempt, k)
        for k in ("attempt", "worker_id", "started_at_ms", "ended_at_ms", "outcome", "error")
    }


def _complete(leases: list[Lease], points: Points) -> Op[Any]:
    return kernel.complete(leases[0], WORKER, '"done"', points=points, started=START - 5)


def _complete_many(leases: list[Lease], points: Points) -> Op[Any]:
    return kernel.complete_many(
        leases, ['"done"'] * len(leases), WORKER, points=points, started=[START - 5] * len(leases)
    )


def _fail(leases: list[Lease], points: Points) -> Op[Any]:
    error = '{"type":"ValueError","message":"boom","retryable":true}'
    return kernel.fail(
        leases[0], WORKER, error, retryable=True, delay_ms=250, points=points, started=None
    )


# name: (settle, tasks settled at once): an idle worker's batches are mostly of one.
CASES: dict[str, tuple[Settle, int]] = {
    "complete": (_complete, 1),
    "complete_many": (_complete_many, 3),
    "complete_many_of_one": (_complete_many, 1),
    "fail": (_fail, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_settling_variant_writes_the_task_and_attempt_rows_the_kernel_and_hook_write(
    db: Database, name: str
) -> None:
    settle, tasks = CASES[name]
    rows, attempts = await _settled_pair(db, settle, tasks=tasks)
    assert rows[0] == rows[1] and attempts[0] == attempts[1]
    assert [len(each) for each in attempts[0]] == [1] * tasks


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_settling_variant_records_a_canceled_attempt_as_the_hook_does(
    db: Database, name: str
) -> None:
    settle, tasks = CASES[name]
    rows, attempts = await _settled_pair(db, settle, cancel=True, tasks=tasks)
    assert [row["status"] for row in rows[0]] == ["canceled"] * tasks and rows[0] == rows[1]
    assert [[a["outcome"] for a in each] for each in attempts[0]] == [["canceled"]] * tasks
    assert attempts[0] == attempts[1]


async def test_a_settling_variant_records_a_final_failure_as_the_hook_does(db: Database) -> None:
    rows, attempts = await _settled_pair(db, _fail, max_attempts=1)
    assert rows[0][0]["status"] == "failed" and rows[0] == rows[1]
    assert [[a["outcome"] for a in each] for each in attempts[0]] == [["failed"]]
    assert attempts[0] == attempts[1]


async def test_a_settling_variant_settles_nothing_and_records_nothing_for_a_lost_lease(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        task = await cq.submit("job")
        claimed = await cq.backend.arun(
            kernel.claim(["default"], WORKER, 60_000, [kernel.Draw(None, 1)], 0), write=True
        )
        lease = Lease.of(claimed[0])
        stale = Lease(lease.id, lease.attempt, lease.token + 1)
        settled = await cq.backend.arun(
            kernel.complete_many([stale], ['"x"'], WORKER, points=_compiled(db), started=[None]),
            write=True,
        )
        assert settled == {}
        got = await cq.get(task.id)
        assert got is not None and got.status == "running"
        assert await cq.attempts.list(task.id) == []
