"""Durable waits on a real database: ``ctx.wait_for`` and ``cq.events.send``, ``ctx.sleep``
and ``ctx.sleep_until``; each parks its task (queued, attempt not spent, no slot held).

Time is a ``FakeClock`` the backend reads: a sleeping task comes due when the test
advances the clock, not when it sleeps.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument
from cairnq.extensions.waits import PARKED_RUN_AT_MS, WaitTimeout
from cairnq.testing import FakeClock

from ._db import Database

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


def _parked(cq: CairnQ, task_id: str) -> Any:
    """The task once a wait of its parked it (a waiting wait, the task queued)."""

    async def probe() -> Any:
        waits = await cq.events.waits(task_id)
        task = await cq.get(task_id)
        if waits and waits[-1].state == "waiting" and task is not None and task.is_queued:
            return task
        return None

    return probe


# --- events ---------------------------------------------------------------------------------


async def test_a_wait_parks_the_task_until_a_send_delivers_the_payload(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    runs: list[int] = []

    @worker.task
    async def approve(ctx: Any) -> Any:
        runs.append(ctx.attempt)
        answer = await ctx.wait_for("order-1")
        return {"answer": answer}

    async with db.client() as cq, worker.background():
        task = await cq.submit("approve", max_attempts=1)
        parked = await _eventually(_parked(cq, task.id))
        assert (parked.status, parked.attempt, parked.run_at_ms) == ("queued", 0, PARKED_RUN_AT_MS)
        assert (await cq.stats())["default"]["running"] == 0
        sent = await cq.events.send("order-1", {"approved": True})
        assert sent.delivered_to == (task.id,) and not sent.kept
        done = await _eventually(_status(cq, task.id, "succeeded"))
    assert done.result == {"answer": {"approved": True}}
    assert runs == [1, 1]


async def test_an_event_sent_before_the_wait_begins_is_kept_and_taken(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def approve(ctx: Any) -> Any:
        return await ctx.wait_for("early")

    async with db.client() as cq:
        sent = await cq.events.send("early", "yes")
        assert sent.kept and sent.delivered_to == ()
        assert [r["payload"] for r in await cq.events.kept("early")] == ['"yes"']
        task = await cq.submit("approve")
        async with worker.background():
            done = await _eventually(_status(cq, task.id, "succeeded"))
        assert done.result == "yes"
        assert await cq.events.kept("early") == []


async def test_a_one_receiver_event_wakes_only_the_oldest_waiter(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=2)

    @worker.task
    async def approve(ctx: Any) -> Any:
        return await ctx.wait_for("shared")

    async with db.client() as cq, worker.background():
        first = await cq.submit("approve")
        await _eventually(_parked(cq, first.id))
        second = await cq.submit("approve")
        await _eventually(_parked(cq, second.id))
        await cq.events.send("shared", 1)
        done = await _eventually(_status(cq, first.id, "succeeded"))
        still = await cq.get(second.id)
        assert still is not None and still.is_queued
        await cq.events.send("shared", 2)
        other = await _eventually(_status(cq, second.id, "succeeded"))
    assert (done.result, other.result) == (1, 2)


async def test_an_event_to_all_wakes_every_waiter_and_later_waits(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=2)

    @worker.task
    async def approve(ctx: Any) -> Any:
        return await ctx.wait_for("release")

    async with db.client() as cq, worker.background():
        tasks = [await cq.submit("approve") for _ in range(2)]
        for task in tasks:
            await _eventually(_parked(cq, task.id))
        sent = await cq.events.send("release", "go", to="all")
        assert set(sent.delivered_to) == {t.id for t in tasks} and sent.kept
        late = await cq.submit("approve")
        results = [(await _eventually(_status(cq, t.id, "succeeded"))).result for t in tasks]
        late_done = await _eventually(_status(cq, late.id, "succeeded"))
    assert results == ["go", "go"] and late_done.result == "go"


async def test_an_event_addressed_to_a_task_reaches_that_task_alone(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=2)

    @worker.task
    async def approve(ctx: Any) -> Any:
        return await ctx.wait_for("approval")

    async with db.client() as cq, worker.background():
        first = await cq.submit("approve")
        await _eventually(_parked(cq, first.id))
        second = await cq.submit("approve")
        await _eventually(_parked(cq, second.id))
        sent = await cq.events.send("approval", "you", task_id=second.id)
        assert sent.delivered_to == (second.id,)
        done = await _eventually(_status(cq, second.id, "succeeded"))
        waiting = await cq.get(first.id)
    assert done.result == "you"
    assert waiting is not None and waiting.is_queued


async def test_a_wait_times_out_with_a_wait_timeout_the_handler_catches(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)

    @worker.task
    async def approve(ctx: Any) -> Any:
        try:
            return await ctx.wait_for("never", timeout="1h")
        except WaitTimeout as exc:
            return f"timed out on {exc.key}"

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("approve")
        parked = await _eventually(_parked(cq, task.id))
        assert parked.run_at_ms == START + 3_600_000
        clock.advance(3_600_000)
        done = await _eventually(_status(cq, task.id, "succeeded"))
        waits = await cq.events.waits(task.id)
    assert done.result == "timed out on never"
    assert [w.state for w in waits] == ["timed_out"]


async def test_a_retried_attempt_gets_the_payload_its_wait_received(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    seen: list[Any] = []

    @worker.task
    async def approve(ctx: Any) -> Any:
        answer = await ctx.wait_for("retry-me")
        seen.append(answer)
        if len(seen) == 1:
            raise RuntimeError("fails after the wait")
        return answer

    async with db.client() as cq, worker.background():
        task = await cq.submit("approve", max_attempts=2)
        await _eventually(_parked(cq, task.id))
        await cq.events.send("retry-me", "first")
        await cq.events.send("retry-me", "second")
        done = await _eventually(_status(cq, task.id, "succeeded"))
        kept = await cq.events.kept("retry-me")
    assert seen == ["first", "first"] and done.result == "first"
    assert [r["payload"] for r in kept] == ['"second"']


async def test_a_sync_handler_waits_through_its_blocking_context(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    def approve(ctx: Any) -> Any:
        return ctx.wait_for("sync-key")

    async with db.client() as cq, worker.background():
        task = await cq.submit("approve")
        await _eventually(_parked(cq, task.id))
        await cq.events.send("sync-key", [1, 2])
        done = await _eventually(_status(cq, task.id, "succeeded"))
    assert done.result == [1, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"to": "some"}, "to must be"),
        ({"retention": -1}, "retention"),
        ({"task_id": ""}, "task id"),
    ],
)
async def test_a_send_with_a_bad_option_is_refused_before_anything_is_written(
    db: Database, kwargs: dict[str, Any], message: str
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=message):
            await cq.events.send("k", 1, **kwargs)
        assert await cq.events.kept("k") == []


async def test_a_send_on_an_empty_key_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="event key"):
            await cq.events.send("", 1)


async def test_an_event_past_its_retention_is_not_taken(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await cq.events.send("short", 1, retention="1m")
        assert len(await cq.events.kept("short")) == 1
        clock.advance(60_000)
        assert await cq.events.kept("short") == []


# --- sleeps ---------------------------------------------------------------------------------


async def test_a_sleep_parks_the_task_until_its_wake_time_without_spending_anything(
    db: Database,
) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    effects: list[str] = []

    @worker.task
    async def remind(ctx: Any) -> Any:
        await ctx.step("before", effects.append, "before")
        await ctx.sleep("2h")
        effects.append("after")
        return ctx.attempt

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("remind", max_attempts=1)
        parked = await _eventually(_parked(cq, task.id))
        assert (parked.attempt, parked.run_at_ms) == (0, START + 7_200_000)
        assert await cq.snooze.get(task.id) is None
        clock.advance(7_199_999)
        await asyncio.sleep(0.2)
        assert effects == ["before"]
        clock.advance(1)
        done = await _eventually(_status(cq, task.id, "succeeded"))
        waits = await cq.events.waits(task.id)
    assert effects == ["before", "after"] and done.result == 1
    assert [(w.name, w.state, w.wake_at_ms) for w in waits] == [
        ("sleep", "slept", START + 7_200_000)
    ]


async def test_sleep_until_parks_the_task_until_that_time(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    wake = datetime.datetime.fromtimestamp((START + 5_000) / 1000, tz=datetime.timezone.utc)

    @worker.task
    def remind(ctx: Any) -> Any:
        ctx.sleep_until(wake)
        return "woke"

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("remind")
        parked = await _eventually(_parked(cq, task.id))
        assert parked.run_at_ms == START + 5_000
        clock.advance(5_000)
        done = await _eventually(_status(cq, task.id, "succeeded"))
    assert done.result == "woke"


async def test_a_sleep_with_a_naive_datetime_fails_the_task_for_good(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def remind(ctx: Any) -> Any:
        await ctx.sleep_until(datetime.datetime(2030, 1, 1))

    async with db.client() as cq, worker.background():
        task = await cq.submit("remind", max_attempts=3)
        failed = await _eventually(_status(cq, task.id, "failed"))
    assert failed.attempt == 1 and "naive" in str(failed.error)


async def test_many_sleeps_on_few_slots_all_wake_together(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20, concurrency=2)

    @worker.task
    async def nap(ctx: Any) -> Any:
        await ctx.sleep(2)
        return "done"

    async with db.client(clock=clock) as cq, worker.background():
        tasks = [await cq.submit("nap") for _ in range(10)]
        for task in tasks:
            await _eventually(_parked(cq, task.id))
        assert (await cq.stats())["default"]["running"] == 0
        clock.advance(2_000)
        for task in tasks:
            await _eventually(_status(cq, task.id, "succeeded"))


async def test_an_uncaught_wait_timeout_fails_the_task_for_good(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)

    @worker.task
    async def approve(ctx: Any) -> Any:
        return await ctx.wait_for("never", timeout=60)

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("approve", max_attempts=3)
        await _eventually(_parked(cq, task.id))
        clock.advance(60_000)
        failed = await _eventually(_status(cq, task.id, "failed"))
    assert failed.attempt == 1 and "WaitTimeout" in str(failed.error)


async def test_a_wait_in_a_batch_handler_is_refused_before_anything_parks(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    refused: list[str] = []

    @worker.task("batched", batch=4)
    async def batched(contexts: list[Any]) -> Any:
        for wait in (lambda: contexts[0].sleep("1h"), lambda: contexts[0].wait_for("k")):
            try:
                await wait()
            except InvalidArgument as exc:
                refused.append(str(exc))
        return {ctx.task_id: "ok" for ctx in contexts}

    async with db.client() as cq:
        tasks = [await cq.submit("batched", {"i": i}) for i in range(3)]
        async with worker.background():
            done = [await _eventually(_status(cq, t.id, "succeeded")) for t in tasks]
        waits = [await cq.events.waits(t.id) for t in tasks]
    assert [(d.attempt, d.result) for d in done] == [(1, "ok")] * 3
    assert refused and all("cannot park a task of a batch handler" in r for r in refused)
    assert waits == [[], [], []]
