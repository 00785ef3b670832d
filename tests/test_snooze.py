"""Snooze on a real database: no attempt spent, max_snoozes, the counts, the lease fence.

Time is a ``FakeClock`` the backend reads: a snoozed task comes due when the test
advances the clock, not when it sleeps.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, LostLease, SchemaIncomplete, Snooze, kernel
from cairnq.extensions import Snoozing
from cairnq.extensions.snooze import _ops as _snooze_ops
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database
from .test_cli import run_on
from .test_without_extensions import protocol_only

START = 1_800_000_000_000


async def _eventually(probe: Any, timeout_s: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


def _status(cq: CairnQ, task_id: str, status: str) -> Any:
    async def probe() -> Any:
        task = await cq.get(task_id)
        return task if task is not None and task.status == status else None

    return probe


async def _claim(cq: CairnQ, worker_id: str, lease_ms: int = 1_000) -> Lease:
    rows = await cq.backend.arun(
        kernel.claim(["default"], worker_id, lease_ms, [kernel.Draw(None, 1)], 10), write=True
    )
    return Lease.of(rows[0])


# --- the handler's side ---------------------------------------------------------------------


async def test_ctx_snooze_queues_the_task_after_the_delay_without_spending_an_attempt(
    db: Database,
) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    attempts: list[int] = []

    @worker.task
    async def fetch(ctx: Any) -> str:
        attempts.append(ctx.attempt)
        if len(attempts) == 1:
            snoozed = await ctx.snooze(30)
            assert snoozed.status == "queued"
            return "ignored: the attempt is settled"
        return "done"

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("fetch", max_attempts=1)
        queued = await _eventually(lambda: _snoozed(cq, task.id))
        assert (queued.status, queued.attempt) == ("queued", 0)
        assert queued.run_at_ms == START + 30_000
        clock.advance(30_000)
        done = await _eventually(_status(cq, task.id, "succeeded"))
    assert attempts == [1, 1]
    assert (done.attempt, done.result) == (1, "done")


async def _snoozed(cq: CairnQ, task_id: str) -> Any:
    snoozes = await cq.snooze.get(task_id)
    return await cq.get(task_id) if snoozes is not None else None


async def test_raising_snooze_queues_the_task_again_like_ctx_snooze(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    runs: list[int] = []

    @worker.task
    async def fetch(ctx: Any) -> None:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise Snooze("1m30s")

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("fetch")
        queued = await _eventually(lambda: _snoozed(cq, task.id))
        assert (queued.status, queued.attempt, queued.error) == ("queued", 0, None)
        assert queued.run_at_ms == START + 90_000
        clock.advance(90_000)
        await _eventually(_status(cq, task.id, "succeeded"))
    assert runs == [1, 1]


async def test_a_sync_handler_snoozes_through_its_blocking_context(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    runs: list[int] = []

    @worker.task
    def fetch(ctx: Any) -> None:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            ctx.snooze(datetime.timedelta(seconds=5))

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("fetch")
        queued = await _eventually(lambda: _snoozed(cq, task.id))
        assert queued.run_at_ms == START + 5_000
        clock.advance(5_000)
        await _eventually(_status(cq, task.id, "succeeded"))
    assert runs == [1, 1]


async def test_the_snooze_past_max_snoozes_fails_the_task_with_a_snooze_limit_envelope(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, extensions=[Snoozing(max_snoozes=2)])
    runs: list[int] = []

    @worker.task
    async def fetch(ctx: Any) -> None:
        runs.append(ctx.attempt)
        raise Snooze(0)

    async with db.client() as cq, worker.background():
        task = await cq.submit("fetch", max_attempts=5)
        failed = await _eventually(_status(cq, task.id, "failed"))
        snoozes = await cq.snooze.get(task.id)
    assert runs == [1, 1, 1]
    assert failed.attempt == 1
    assert failed.error["code"] == "snooze_limit"
    assert failed.error["type"] == "SnoozeLimit"
    assert failed.error["retryable"] is False
    assert failed.error["details"] == {"snoozes": 2, "max_snoozes": 2}
    assert "max_snoozes=2" in failed.error["message"]
    assert snoozes is not None and snoozes.count == 2


async def test_a_handler_s_own_max_snoozes_overrides_the_worker_s(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, extensions=[Snoozing(max_snoozes=5)])
    runs: list[int] = []

    @worker.task(max_snoozes=0)
    async def fetch(ctx: Any) -> None:
        runs.append(ctx.attempt)
        raise Snooze(0)

    async with db.client() as cq, worker.background():
        task = await cq.submit("fetch")
        failed = await _eventually(_status(cq, task.id, "failed"))
    assert runs == [1]
    assert failed.error["code"] == "snooze_limit"


# --- what the database shows --------------------------------------------------------------


async def test_a_snoozed_task_shows_its_count_when_and_for_how_long(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("fetch")
        assert await cq.snooze.get(task.id) is None
        for delay_ms in (1_000, 2_500):
            lease = await _claim(cq, "w1")
            await cq.backend.arun(_snooze(cq, lease, "w1", delay_ms), write=True)
            clock.advance(delay_ms)
        snoozes = await cq.snooze.get(task.id)
    assert snoozes is not None
    assert (snoozes.count, snoozes.last_delay_ms) == (2, 2_500)
    assert snoozes.last_snoozed_at_ms == START + 1_000
    assert snoozes.wake_at_ms == START + 3_500


def _snooze(cq: CairnQ, lease: Lease, worker_id: str, delay_ms: int) -> Any:
    return _snooze_ops.snooze(
        lease,
        worker_id,
        delay_ms,
        max_snoozes=20,
        limit_error=lambda count: cq.codec.encode_error(
            _snooze_ops.snooze_limit_error(count, 20), retryable=False
        ),
    )


async def test_a_stale_lease_cannot_snooze_and_counts_nothing(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("fetch")
        stale = await _claim(cq, "w1", lease_ms=1_000)
        clock.advance(1_001)
        current = await _claim(cq, "w2")
        with pytest.raises(LostLease):
            await cq.backend.arun(_snooze(cq, stale, "w1", 5_000), write=True)
        after = await cq.get(task.id)
        assert await cq.snooze.get(task.id) is None
    assert (after.status, after.worker_id, after.attempt) == ("running", "w2", current.attempt)


async def test_a_pending_cancel_wins_over_a_snooze(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("fetch")
        lease = await _claim(cq, "w1")
        await cq.cancel(task.id)
        outcome = await cq.backend.arun(_snooze(cq, lease, "w1", 5_000), write=True)
        assert outcome.row["status"] == "canceled"
        assert await cq.snooze.get(task.id) is None


async def test_snooze_counts_go_with_their_task_when_it_is_purged(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("fetch")
        lease = await _claim(cq, "w1")
        await cq.backend.arun(_snooze(cq, lease, "w1", 0), write=True)
        await cq.cancel(task.id)
        clock.advance(1_000)
        assert await cq.purge(older_than_ms=0, status="canceled") == [task.id]
        assert await cq.snooze.get(task.id) is None


# --- bad input and missing tables ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "snooze needs one delay"),
        ((5,), {"delay_ms": 5}, "snooze needs one delay"),
        ((-1,), {}, "must be 0 seconds or more, got -1"),
        ((float("nan"),), {}, "must be a finite number"),
        (("soon",), {}, "invalid duration"),
        ((True,), {}, "must be a duration: seconds"),
        (([5],), {}, r"got \[5\]"),
    ],
)
def test_a_bad_snooze_delay_is_refused_with_a_clear_message(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Snooze(*args, **kwargs)


@pytest.mark.parametrize(
    ("delay", "ms"),
    [(1.5, 1_500), (2, 2_000), ("30s", 30_000), (datetime.timedelta(minutes=1), 60_000)],
)
def test_a_snooze_delay_reads_seconds_durations_and_timedeltas(delay: Any, ms: int) -> None:
    assert Snooze(delay).delay_ms == ms


def test_a_negative_max_snoozes_is_refused(db: Database) -> None:
    with pytest.raises(InvalidArgument, match="max_snoozes must be >= 0"):
        db.worker(extensions=[Snoozing(max_snoozes=-1)])


async def test_snoozes_on_a_database_without_the_flow_tables_names_the_migration(
    db: Database,
) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        task = await cq.submit("fetch")
        with pytest.raises(SchemaIncomplete, match=r"x0007_flow\.sql.*cairnq migrate"):
            await cq.snooze.get(task.id)


def test_cairnq_get_shows_a_snoozed_task_s_snoozes(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    async def snoozed_task() -> str:
        async with db.client() as cq:
            task = await cq.submit("fetch")
            plain = await cq.submit("other")
            lease = await _claim(cq, "w1")
            await cq.backend.arun(_snooze(cq, lease, "w1", 60_000), write=True)
            assert lease.id == task.id
            return plain.id

    plain_id = asyncio.run(snoozed_task())
    with db.sync_client() as cq:
        [task] = cq.list(name="fetch")
    shown = json.loads(run_on(db, capsys, "get", task.id).out)
    assert shown["status"] == "queued"
    assert shown["snoozes"]["count"] == 1
    assert shown["snoozes"]["last_delay_ms"] == 60_000
    assert "snoozes" not in json.loads(run_on(db, capsys, "get", plain_id).out)
