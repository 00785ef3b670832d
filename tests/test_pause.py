"""Pausing and resuming queues and task names on a real database, and workers honouring it.

Pause records take their time from a ``FakeClock``; the worker tests use the real
clock, since a worker reads the pauses on a timer, and only wait for outcomes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cairnq import InvalidArgument, Pause, SchemaIncomplete, Snooze, Worker, kernel
from cairnq.extensions.pauses import _filter as pauses_filter
from cairnq.extensions.pauses._filter import PauseSet
from cairnq.protocol.statements import migrations
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import ClaimTurns, eventually
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


def pause_refreshes(monkeypatch: pytest.MonkeyPatch) -> list[frozenset[str]]:
    """The paused queues each worker refresh of the pauses read, in order.

    Workers read the pauses every 20 ms instead of every half second: a test
    waits for a refresh, and how often refreshes come changes nothing it checks.
    """
    seen: list[frozenset[str]] = []
    refresh = PauseSet.refresh

    async def recorded(self: PauseSet) -> None:
        await refresh(self)
        seen.append(self.queues)

    class Often(PauseSet):
        def __init__(self, *args: Any, **options: Any) -> None:
            super().__init__(*args, **{"interval_ms": 20, **options})

    monkeypatch.setattr(PauseSet, "refresh", recorded)
    monkeypatch.setattr(pauses_filter, "PauseSet", Often)
    return seen


# --- the records ----------------------------------------------------------------------------


async def test_pausing_a_queue_and_a_task_name_lists_both_with_when_and_by_whom(
    db: Database,
) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        queue = await cq.pauses.pause_queue("emails", by="ops")
        clock.advance(5)
        name = await cq.pauses.pause_task("invoice.charge")
        assert queue == Pause("queue", "emails", START, "ops")
        assert name == Pause("name", "invoice.charge", START + 5, None)
        assert await cq.pauses.list() == [queue, name]


async def test_pausing_what_is_paused_keeps_the_first_pause(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        first = await cq.pauses.pause_queue("emails", by="alice")
        clock.advance(1_000)
        again = await cq.pauses.pause_queue("emails", by="bob")
        assert again == first
        assert await cq.pauses.list() == [first]


async def test_resuming_returns_the_pause_it_ended_and_none_when_nothing_was_paused(
    db: Database,
) -> None:
    async with db.client() as cq:
        paused = await cq.pauses.pause_task("report.build")
        assert await cq.pauses.resume_queue("report.build") is None
        assert await cq.pauses.resume_task("report.build") == paused
        assert await cq.pauses.resume_task("report.build") is None
        assert await cq.pauses.list() == []


def test_the_blocking_client_pauses_and_resumes(db: Database) -> None:
    with db.sync_client() as cq:
        cq.pauses.pause_queue("emails")
        assert [p.target for p in cq.pauses.list()] == ["emails"]
        assert cq.pauses.resume_queue("emails") is not None
        assert cq.pauses.list() == []


@pytest.mark.parametrize("target", ["", 5, None, "a\x00b"])
async def test_a_bad_pause_target_is_refused_and_nothing_is_written(
    db: Database, target: Any
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument):
            await cq.pauses.pause_queue(target)
        assert await cq.pauses.list() == []


# --- workers ----------------------------------------------------------------------------------


async def test_a_worker_claims_nothing_from_a_paused_queue_until_it_is_resumed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = ClaimTurns(monkeypatch)
    pause_refreshes(monkeypatch)
    worker = db.worker(poll_interval_ms=20, queues=["default", "other"])
    ran: list[str] = []

    @worker.task
    async def job(ctx: Any) -> None:
        ran.append(ctx.queue)

    async with db.client() as cq:
        await cq.pauses.pause_queue("default")
        paused_task = await cq.submit("job")
        async with worker.background():
            await cq.submit("job", queue="other")
            await _eventually(lambda: _true(ran == ["other"]))
            await turns.passed(3)  # claims that would have taken the paused queue's task
            assert (await cq.get(paused_task.id)).status == "queued"
            await cq.pauses.resume_queue("default")
            await _eventually(lambda: _true(sorted(ran) == ["default", "other"]))


async def test_a_paused_task_name_is_left_queued_while_other_names_in_its_queue_run(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = ClaimTurns(monkeypatch)
    pause_refreshes(monkeypatch)
    worker = db.worker(poll_interval_ms=20)
    ran: list[str] = []

    @worker.task
    async def slow(ctx: Any) -> None:
        ran.append("slow")

    @worker.task
    async def fast(ctx: Any) -> None:
        ran.append("fast")

    async with db.client() as cq:
        await cq.pauses.pause_task("slow")
        held = await cq.submit("slow")
        async with worker.background():
            await cq.submit("fast")
            await _eventually(lambda: _true(ran == ["fast"]))
            await turns.passed(3)  # claims that would have taken the paused name's task
            assert (await cq.get(held.id)).status == "queued"
            await cq.pauses.resume_task("slow")
            await _eventually(lambda: _true(ran == ["fast", "slow"]))


async def test_a_call_running_when_its_queue_is_paused_finishes(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    refreshes = pause_refreshes(monkeypatch)
    worker = db.worker(poll_interval_ms=20)
    started = asyncio.Event()
    release = asyncio.Event()

    @worker.task
    async def job(ctx: Any) -> str:
        started.set()
        await release.wait()
        return "finished"

    async with db.client() as cq, worker.background():
        task = await cq.submit("job")
        await asyncio.wait_for(started.wait(), 10)
        await cq.pauses.pause_queue("default")
        await eventually(lambda: refreshes and "default" in refreshes[-1], "the pause seen")
        release.set()
        done = await cq.wait(task.id, timeout_ms=10_000)
    assert (done.status, done.result) == ("succeeded", "finished")


async def _true(value: bool) -> bool:
    return value


# --- a database without the flow tables ----------------------------------------------------


def _all_but_flow(db: Database) -> None:
    """Every migration but x0007_flow.sql and the ones building on its tables, as a database an
    older cairnq migrated."""
    protocol_only(db)

    async def apply() -> None:
        async with db.client(migrate=False) as cq:
            for migration in migrations(cq.backend.dialect):
                if migration.name.startswith("x") and migration.name not in (
                    "x0007_flow.sql",
                    "x0012_snoozes_forget.sql",
                    "x0021_pauses_until.sql",
                ):
                    await cq.backend.arun(
                        kernel.apply_migration(migration.name, migration.source), write=True
                    )

    asyncio.run(apply())


def test_pause_calls_on_a_database_without_the_flow_tables_name_the_migration(
    db: Database,
) -> None:
    _all_but_flow(db)
    with db.sync_client(migrate=False) as cq:
        for call in (
            lambda: cq.pauses.pause_queue("emails"),
            lambda: cq.pauses.resume_queue("emails"),
            lambda: cq.pauses.pause_task("job"),
            cq.pauses.list,
        ):
            with pytest.raises(SchemaIncomplete) as raised:
                call()
            message = str(raised.value)
            assert "x0007_flow.sql" in message and "cairnq migrate" in message
            assert "\n" not in message


def test_a_worker_on_a_database_without_the_flow_tables_runs_tasks(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    _all_but_flow(db)
    refreshes = pause_refreshes(monkeypatch)
    reported: list[BaseException] = []
    worker = Worker(
        db.backend(migrate=False),
        poll_interval_ms=20,
        on_error=lambda exc, context: reported.append(exc),
    )
    done: list[str] = []

    @worker.task
    async def job(ctx: Any) -> None:
        done.append(ctx.task_id)

    async def run() -> str:
        async with db.client(migrate=False) as cq:
            task = await cq.submit("job")
            async with worker.background():
                await _eventually(lambda: _true(done == [task.id]))
                # A refresh on the timer too, not only the one before the first claim.
                await eventually(lambda: len(refreshes) >= 2, "a second refresh of the pauses")
            return task.id

    task_id = asyncio.run(run())
    assert done == [task_id]
    assert reported == []


# --- the command line -------------------------------------------------------------------------


def test_cairnq_pause_resume_and_paused_manage_queues_and_task_names(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.stats()
    assert "queue emails paused since" in run_on(db, capsys, "pause", "emails", "--by", "ops").out
    assert "task report.build paused" in run_on(db, capsys, "pause", "--task", "report.build").out
    listed = run_on(db, capsys, "paused").out.splitlines()
    assert len(listed) == 2
    assert listed[0].startswith("queue emails paused since") and listed[0].endswith("by ops")
    assert listed[1].startswith("task report.build paused since")
    assert run_on(db, capsys, "resume", "emails").out == "queue emails resumed\n"
    assert run_on(db, capsys, "resume", "emails").out == "queue emails was not paused\n"
    rows = json.loads(run_on(db, capsys, "paused", "--json").out)
    assert [(r["scope"], r["target"]) for r in rows] == [("name", "report.build")]


def test_cairnq_pause_needs_exactly_one_of_a_queue_and_a_task_name(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.sync_client() as cq:
        cq.stats()
    for argv in (("pause",), ("pause", "emails", "--task", "job")):
        result = run_on(db, capsys, *argv)
        assert result.code != 0
        assert "give a QUEUE or --task NAME" in result.err
    assert json.loads(run_on(db, capsys, "paused", "--json").out) == []


def test_cairnq_pause_on_a_database_without_the_flow_tables_says_so_in_one_line(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    _all_but_flow(db)
    result = run_on(db, capsys, "pause", "emails")
    assert result.code == 1
    lines = result.err.splitlines()
    assert len(lines) == 1 and "x0007_flow.sql" in lines[0] and "cairnq migrate" in lines[0]


def test_a_snooze_on_a_database_without_the_flow_tables_fails_the_attempt_for_retry(
    db: Database,
) -> None:
    _all_but_flow(db)
    worker = Worker(db.backend(migrate=False), poll_interval_ms=20)

    @worker.task
    async def job(ctx: Any) -> None:
        raise Snooze(30)

    async def run() -> Any:
        async with db.client(migrate=False) as cq:
            task = await cq.submit("job", max_attempts=1)
            async with worker.background():
                return await cq.wait(task.id, timeout_ms=10_000)

    failed = asyncio.run(run())
    assert failed.status == "failed"
    assert failed.error["code"] == "snooze_unavailable"
    assert "x0007_flow.sql" in failed.error["message"]
