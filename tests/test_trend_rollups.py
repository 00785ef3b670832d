"""Hourly rollups of the attempt history: the trends read them for the whole hours rolled
up and the attempts for the rest, and count what the attempts alone count (a late attempt
and the current partial hour included); the rollups outlive purged tasks; the worker's
part rolls up the hours that are over."""

from __future__ import annotations

from typing import Any

from cairnq.extensions.history._hooks import record
from cairnq.extensions.history._rollups import (
    HOUR_MS,
    RollupComponent,
    bucket_index,
    bucket_ms,
    roll_up,
    rolled_until,
)
from cairnq.extensions.history._trends import raw_series, raw_trends, series, trends
from cairnq.kernel.points import AttemptEnd
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database

START = 1_800_000_000_000 - 1_800_000_000_000 % HOUR_MS + 20 * 60_000
OUTCOMES = ("succeeded", "succeeded", "retry", "failed", "canceled", "lost", "snoozed")


async def _ended(cq: Any, clock: FakeClock, count: int, salt: int) -> list[str]:
    """``count`` tasks over two names and queues, each with one attempt ending now."""
    ends, ids = [], []
    for i in range(count):
        name, queue = ("a", "q1") if i % 3 else ("b", "q2")
        task = await cq.submit(name, queue=queue)
        ids.append(task.id)
        ran = None if i % 5 == 4 else clock.now_ms() - (i * 37 + salt) % 4_000
        outcome = OUTCOMES[(i + salt) % len(OUTCOMES)]
        ends.append(AttemptEnd(Lease(task.id, 1, 100 + i), "w", ran, outcome))
    await cq.backend.arun(record(ends, None), write=True)
    return ids


async def _both(cq: Any, now: int) -> tuple[list[Any], list[Any]]:
    found = []
    for read in (trends, raw_trends):
        for by in ("name", "queue"):
            found.append(await cq.backend.arun(read(by, "1d", now_ms=now), write=False))
    return found[:2], found[2:]


async def test_rolled_trends_count_what_the_attempts_count(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        for hour in range(6):
            await _ended(cq, clock, 9 + hour, hour)
            clock.advance(HOUR_MS)
        assert await roll_up(cq.backend, clock.now_ms()) > 0
        rolled_to = clock.now_ms() - clock.now_ms() % HOUR_MS
        assert await cq.backend.arun(rolled_until(), write=False) == rolled_to
        # A late attempt: its end falls in an hour rolled up already.
        clock.set(rolled_to - HOUR_MS + 5 * 60_000)
        await _ended(cq, clock, 4, 7)
        clock.set(rolled_to + 40 * 60_000)
        assert await roll_up(cq.backend, clock.now_ms()) == 0  # the hour is not over
        clock.set(rolled_to + HOUR_MS + 40 * 60_000)
        await _ended(cq, clock, 5, 8)  # the current, partial hour
        await roll_up(cq.backend, clock.now_ms())  # the turn once the next hour is over
        now = clock.now_ms()
        rolled, raw = await _both(cq, now)
    assert rolled == raw
    assert sum(t.attempts for t in rolled[0]) == sum(9 + h for h in range(6)) + 4 + 5
    assert all(t.p50_ms is not None for t in rolled[0])


async def test_rolled_series_count_what_the_attempts_count(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        for hour in range(30):
            await _ended(cq, clock, 3, hour)
            clock.advance(HOUR_MS)
        await roll_up(cq.backend, clock.now_ms())
        clock.set(clock.now_ms() - HOUR_MS)  # a late attempt, then the next hour's turn
        await _ended(cq, clock, 2, 40)
        clock.advance(2 * HOUR_MS + 17 * 60_000)
        await _ended(cq, clock, 2, 41)
        await roll_up(cq.backend, clock.now_ms())
        now, found = clock.now_ms(), []
        for since, buckets in (("1d", 24), ("1d", 5), ("7d", 28), ("2h", 7)):
            for read in (series, raw_series):
                op = read("queue", since, buckets, now_ms=now)
                found.append(await cq.backend.arun(op, write=False))
    assert found[0::2] == found[1::2]
    assert sum(s + f for s, f in found[4]["q1"] + found[4]["q2"]) > 0


async def test_a_window_starting_mid_hour_reads_that_hours_attempts(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        for hour in range(30):
            await _ended(cq, clock, 2, hour)
            clock.advance(HOUR_MS)
        await roll_up(cq.backend, clock.now_ms())
        clock.advance(HOUR_MS // 2)
        rolled, raw = await _both(cq, clock.now_ms())
    assert rolled == raw
    assert sum(t.attempts for t in rolled[0]) < 60


async def test_rollups_keep_counting_purged_tasks(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        ids = await _ended(cq, clock, 6, 0)
        clock.advance(2 * HOUR_MS)
        await roll_up(cq.backend, clock.now_ms())
        for task_id in ids:
            await cq.cancel(task_id)
        clock.advance(1_000)
        assert len(await cq.purge(older_than_ms=1, limit=100)) == 6
        now = clock.now_ms()
        rolled = await cq.backend.arun(trends("name", "1d", now_ms=now), write=False)
        raw = await cq.backend.arun(raw_trends("name", "1d", now_ms=now), write=False)
    assert sum(t.attempts for t in rolled) == 6 and raw == []


async def test_rolling_an_hour_again_replaces_its_rows(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await _ended(cq, clock, 6, 0)
        clock.advance(HOUR_MS)
        await roll_up(cq.backend, clock.now_ms())
        await roll_up(cq.backend, clock.now_ms())
        clock.advance(HOUR_MS)
        await roll_up(cq.backend, clock.now_ms())
        found = await cq.backend.arun(trends("name", "1d", now_ms=clock.now_ms()), write=False)
    assert sum(t.attempts for t in found) == 6


async def test_the_history_part_rolls_up_the_hours_that_are_over(db: Database) -> None:
    clock = FakeClock(START)
    errors: list[BaseException] = []
    async with db.client(clock=clock) as cq:
        await _ended(cq, clock, 3, 0)
        clock.advance(HOUR_MS)
        part = RollupComponent(cq.backend, "w1", report=lambda exc, ctx: errors.append(exc))
        assert await part.has_tables()
        assert await part.tick() == 2
        mark = await cq.backend.arun(rolled_until(), write=False)
    assert mark == clock.now_ms() - clock.now_ms() % HOUR_MS and errors == []


def test_each_histogram_bucket_starts_at_a_two_significant_figure_run_time() -> None:
    starts = [0, 1, 99, 100, 110, 990, 1_000, 1_100, 9_900, 10_000, 120_000_000]
    assert [bucket_ms(bucket_index(ms)) for ms in starts] == starts
    assert [bucket_index(ms) for ms in (99, 100, 110, 990, 1_000)] == [99, 100, 101, 189, 190]
