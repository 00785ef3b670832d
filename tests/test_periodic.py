"""PeriodicJob: an async callable on a timer, never overlapping, optionally under a named lease."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from cairnq import InvalidArgument, kernel
from cairnq.kernel.periodic import NamedLease, PeriodicJob
from cairnq.testing import FakeClock

from ._db import Database

TTL_MS = 60_000


def sql(db: Database, statement: str) -> None:
    """Run raw SQL on the test database (to take a migration back out)."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(str(db.path))) as conn, conn:
            conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute(statement)


def leased_job(
    db: Database,
    fn: Callable[[], Awaitable[object]],
    *,
    clock: FakeClock | None = None,
    holder: str = "holder-a",
    **options: Any,
) -> PeriodicJob:
    """A job on ``db`` under the named lease ``test-job``, held as ``holder``."""
    options.setdefault("interval_ms", 10)
    lease = NamedLease(db.backend(clock=clock), holder, ttl_ms=TTL_MS)
    return PeriodicJob("test-job", fn, lease=lease, **options)


async def nothing() -> None:
    return None


async def test_a_job_runs_again_every_interval(db: Database) -> None:
    runs = 0
    third = asyncio.Event()

    async def count() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            third.set()

    job = leased_job(db, count, interval_ms=5, first_delay_ms=0)
    job.start()
    await asyncio.wait_for(third.wait(), 30)
    await job.stop()
    assert job.runs == runs >= 3


async def test_runs_never_overlap_even_when_a_run_outlasts_the_interval(db: Database) -> None:
    active = 0
    most = 0
    done = asyncio.Event()

    async def slow() -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.02)
        active -= 1
        if job.runs >= 2:
            done.set()

    job = leased_job(db, slow, interval_ms=1, first_delay_ms=0)
    job.start()
    await asyncio.wait_for(done.wait(), 30)
    await job.stop()
    assert most == 1


async def test_stop_waits_for_the_run_in_progress(db: Database) -> None:
    started = asyncio.Event()
    finished: list[bool] = []

    async def slow() -> None:
        started.set()
        await asyncio.sleep(0.05)
        finished.append(True)

    job = leased_job(db, slow, first_delay_ms=0)
    job.start()
    await asyncio.wait_for(started.wait(), 30)
    await job.stop()
    assert finished == [True]
    assert not job.running


async def test_an_error_is_reported_and_the_next_run_backs_off(db: Database) -> None:
    reports: list[tuple[str, dict[str, Any], int]] = []
    recovered = asyncio.Event()
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RuntimeError(f"failure {calls}")
        recovered.set()

    def on_error(exc: BaseException, context: dict[str, Any]) -> None:
        reports.append((str(exc), context, job.next_delay_ms))

    job = leased_job(
        db, flaky, interval_ms=10, first_delay_ms=0, on_error=on_error, context={"worker_id": "w"}
    )
    job.start()
    await asyncio.wait_for(recovered.wait(), 30)
    await job.stop()
    context = {"phase": "test-job", "job": "test-job", "worker_id": "w"}
    assert reports == [("failure 1", context, 20), ("failure 2", context, 40)]
    assert job.next_delay_ms == 10


async def test_under_a_named_lease_only_the_holder_runs_each_turn(db: Database) -> None:
    clock = FakeClock()
    first = leased_job(db, nothing, clock=clock, holder="holder-a")
    second = leased_job(db, nothing, clock=clock, holder="holder-b")
    turns = []
    for _ in range(3):
        turns.append((await first.run_once(), await second.run_once()))
        clock.advance(TTL_MS // 2)
    assert turns == [(True, False)] * 3


async def test_another_holder_takes_over_once_the_holder_stops_renewing(db: Database) -> None:
    clock = FakeClock()
    first = leased_job(db, nothing, clock=clock, holder="holder-a")
    second = leased_job(db, nothing, clock=clock, holder="holder-b")
    assert await first.run_once()
    assert not await second.run_once()
    clock.advance(TTL_MS)
    assert await second.run_once()
    assert not await first.run_once()


async def test_a_stopped_holder_hands_the_lease_over_at_once(db: Database) -> None:
    clock = FakeClock()
    first = leased_job(db, nothing, clock=clock, holder="holder-a")
    second = leased_job(db, nothing, clock=clock, holder="holder-b")
    assert await first.run_once()
    await first.stop()
    assert await second.run_once()


async def test_without_the_named_leases_migration_the_job_runs_here_and_says_so_once(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async with db.client() as cq:
        await cq.stats()
    sql(db, "drop table cairnq_locks")
    sql(db, "delete from cairnq_migrations where name = 'x0001_locks.sql'")
    clock = FakeClock()
    lease = NamedLease(db.backend(clock=clock, migrate=False), "holder-a", ttl_ms=TTL_MS)
    other = NamedLease(db.backend(clock=clock, migrate=False), "holder-b", ttl_ms=TTL_MS)
    first = PeriodicJob("test-job", nothing, interval_ms=10, lease=lease)
    second = PeriodicJob("test-job", nothing, interval_ms=10, lease=other)
    with caplog.at_level(logging.WARNING, logger="cairnq.periodic"):
        ran = [await first.run_once() for _ in range(3)]
        ran.append(await second.run_once())
    lines = [r.getMessage() for r in caplog.records if r.name == "cairnq.periodic"]
    assert ran == [True, True, True, True]
    assert (
        lines
        == [
            "periodic job test-job runs in this process without its named lease: the database "
            "lacks x0001_locks.sql (run `cairnq migrate`)"
        ]
        * 2
    )


async def test_a_job_with_no_work_by_its_when_skips_the_turn_before_its_lease(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async with db.client() as cq:
        await cq.stats()
    sql(db, "drop table cairnq_locks")
    sql(db, "delete from cairnq_migrations where name = 'x0001_locks.sql'")
    work: list[bool] = [False]
    runs: list[int] = []

    async def has_work() -> bool:
        return work[0]

    async def run() -> None:
        runs.append(len(runs))

    lease = NamedLease(db.backend(migrate=False), "holder-a", ttl_ms=TTL_MS)
    job = PeriodicJob("test-job", run, interval_ms=10, lease=lease, when=has_work)
    with caplog.at_level(logging.WARNING, logger="cairnq.periodic"):
        idle = [await job.run_once() for _ in range(2)]
        unwarned = [r.getMessage() for r in caplog.records if r.name == "cairnq.periodic"]
        work[0] = True
        busy = await job.run_once()
    assert (idle, unwarned, busy, runs) == ([False, False], [], True, [0])
    assert "without its named lease" in caplog.records[-1].getMessage()


async def test_an_error_of_a_stop_on_type_is_reported_and_ends_the_job(db: Database) -> None:
    reports: list[str] = []

    async def broken() -> None:
        raise LookupError("gone for good")

    job = leased_job(
        db,
        broken,
        first_delay_ms=0,
        stop_on=(LookupError,),
        on_error=lambda exc, context: reports.append(str(exc)),
    )
    job.start()
    while job.running:
        await asyncio.sleep(0.005)
    await job.stop()
    assert reports == ["gone for good"]


async def test_a_job_whose_backend_was_closed_ends_without_reporting_an_error(
    db: Database,
) -> None:
    reports: list[BaseException] = []
    backend = db.backend()
    ran = asyncio.Event()

    async def read() -> None:
        ran.set()
        await backend.arun(kernel.probe(["default"], None), write=False)

    await backend.aclose()
    job = PeriodicJob(
        "test-job",
        read,
        interval_ms=10,
        first_delay_ms=0,
        on_error=lambda exc, context: reports.append(exc),
    )
    job.start()
    await asyncio.wait_for(ran.wait(), 30)
    for _ in range(2000):  # the loop ends on the first run's error, or backs off for ever
        if not job.running:
            break
        await asyncio.sleep(0.005)
    running = job.running
    await job.stop()
    assert (running, reports) == (False, [])


def test_jitter_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="jitter"):
        PeriodicJob("test-job", nothing, interval_ms=10, jitter=1.5)
