"""Schedules after downtime, on a real database with a fake clock: what a returning worker
catches up, in which order it runs it, what it records as missed, and that an evaluation
cut short or repeated doubles nothing.

"Downtime" is the fake clock moving while nothing evaluates; a worker started
afterwards is the one that comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from cairnq import CairnQ, Worker
from cairnq.extensions.schedules import _ops as _schedules
from cairnq.extensions.schedules._ops import slot_key
from cairnq.protocol.steps import Call
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import ClaimTurns

MINUTE = 60_000
START = 1_800_000_000_000  # a whole minute: slots of every="1m" fall on it


def _slots(first: int, last: int) -> list[int]:
    """The every-minute slots START + first min .. START + last min."""
    return [START + m * MINUTE for m in range(first, last + 1)]


def _recording_worker(db: Database, clock: FakeClock, ran: list[int]) -> Worker:
    """A worker running one task at a time, noting each task's slot as it starts."""
    worker = db.worker(clock=clock, concurrency=1, poll_interval_ms=10)

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        ran.append(ctx.task.metadata["cairnq.schedule"]["slot_ms"])

    return worker


async def _until_ran(ran: list[int], count: int, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while len(ran) < count:
        assert asyncio.get_running_loop().time() < deadline, f"ran {len(ran)} of {count}"
        await asyncio.sleep(0.01)


async def _task_slots(cq: CairnQ) -> list[int]:
    """The slot of every task the schedules submitted, sorted (repeats kept)."""
    tasks = await cq.list(name="job", limit=1000)
    return sorted(t.metadata["cairnq.schedule"]["slot_ms"] for t in tasks)


async def _decisions(cq: CairnQ) -> list[tuple[int, int | None, str, int]]:
    """Every recorded decision of schedule "tick", oldest first: (slot, through, outcome, slots)."""
    history = await cq.schedules.history("tick", limit=500)
    return [(h.slot_ms, h.through_ms, h.outcome, h.slots) for h in reversed(history)]


async def test_a_worker_back_from_downtime_inside_catch_up_runs_each_missed_slot_once_oldest_first(
    db: Database,
) -> None:
    clock = FakeClock(START + 1)
    ran: list[int] = []
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="1h")
        clock.advance(10 * MINUTE)  # every worker down for ten slots
        worker = _recording_worker(db, clock, ran)
        async with worker.background():
            await _until_ran(ran, 10)
        assert ran == _slots(1, 10)
        assert await _task_slots(cq) == _slots(1, 10)
        assert await _decisions(cq) == [(slot, None, "enqueued", 1) for slot in _slots(1, 10)]


async def test_a_caught_up_slot_task_is_due_at_its_slot(db: Database) -> None:
    clock = FakeClock(START + 1)
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="1h")
        clock.advance(3 * MINUTE)
        assert await cq.schedules.run_due() == 3
        tasks = await cq.list(name="job")
    assert sorted(t.run_at_ms for t in tasks) == _slots(1, 3)


async def test_a_worker_back_after_more_than_catch_up_runs_the_slots_inside_and_records_the_rest(
    db: Database,
) -> None:
    clock = FakeClock(START + 1)
    ran: list[int] = []
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="4m")
        clock.advance(10 * MINUTE)
        # now is START + 10 min + 1 ms: slots after START + 6 min + 1 ms are inside catch_up
        worker = _recording_worker(db, clock, ran)
        async with worker.background():
            await _until_ran(ran, 4)
        assert ran == _slots(7, 10)
        assert await _task_slots(cq) == _slots(7, 10)
        assert await _decisions(cq) == [
            (START + MINUTE, START + 6 * MINUTE, "missed", 6),
            *[(slot, None, "enqueued", 1) for slot in _slots(7, 10)],
        ]


async def test_downtime_far_beyond_catch_up_records_every_slot_as_one_counted_missed_range(
    db: Database,
) -> None:
    clock = FakeClock(START + 1)
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="2m")
        clock.advance(3 * 24 * 60 * MINUTE)  # three days down
        assert await cq.schedules.run_due() == 2
        decisions = await _decisions(cq)
    last = 3 * 24 * 60
    assert decisions == [
        (START + MINUTE, START + (last - 2) * MINUTE, "missed", last - 2),
        *[(slot, None, "enqueued", 1) for slot in _slots(last - 1, last)],
    ]


async def test_catch_up_policy_latest_runs_only_the_newest_missed_slot(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = ClaimTurns(monkeypatch)
    clock = FakeClock(START + 1)
    ran: list[int] = []
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="1h", catch_up_policy="latest")
        clock.advance(10 * MINUTE)
        worker = _recording_worker(db, clock, ran)
        async with worker.background():
            await _until_ran(ran, 1)
            await turns.passed(3)  # claims that would have run any other slot's task
        assert ran == _slots(10, 10)
        assert await _task_slots(cq) == _slots(10, 10)
        assert await _decisions(cq) == [
            (START + MINUTE, START + 9 * MINUTE, "superseded", 9),
            (START + 10 * MINUTE, None, "enqueued", 1),
        ]


def _dies_at_the_third_slot_task(op: Any) -> Generator[Any, Any, Any]:
    """``op``'s statements, until the third slot's task is linked: then the evaluator dies."""
    linked = 0
    reply: Any = None
    while True:
        try:
            call = op.send(reply)
        except StopIteration as done:
            return done.value
        if isinstance(call, Call) and call.statement == "schedule_slot_task":
            linked += 1
            if linked == 3:
                raise RuntimeError("the evaluating process died")
        reply = yield call


async def test_a_restart_in_the_middle_of_a_catch_up_doubles_nothing(db: Database) -> None:
    clock = FakeClock(START + 1)
    ran: list[int] = []
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="1m", catch_up="1h")
        clock.advance(10 * MINUTE)
        # A first evaluator decides four of the ten slots, then one dies mid-transaction.
        first = await cq.backend.arun(_schedules.evaluate("tick", cq.codec, batch=4), write=True)
        assert first is not None and [slot for slot, _ in first.enqueued] == _slots(1, 4)
        try:
            await cq.backend.arun(
                _dies_at_the_third_slot_task(_schedules.evaluate("tick", cq.codec, batch=4)),
                write=True,
            )
        except RuntimeError:
            pass
        else:
            raise AssertionError("the evaluation did not die")
        assert await _task_slots(cq) == _slots(1, 4)
        # A worker comes back, evaluates the rest and runs everything.
        worker = _recording_worker(db, clock, ran)
        async with worker.background():
            await _until_ran(ran, 10)
        assert await cq.schedules.run_due() == 0
        assert ran == _slots(1, 10)
        assert await _task_slots(cq) == _slots(1, 10)
        assert await _decisions(cq) == [(slot, None, "enqueued", 1) for slot in _slots(1, 10)]
        for slot in _slots(1, 10):
            task = await cq.get_by_key(slot_key("tick", slot))
            assert task is not None and task.status == "succeeded"
