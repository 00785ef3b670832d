"""Schedules on a real database: storing, evaluating, pausing, overlap, workers, missing tables.

Time is a ``FakeClock`` the backend reads; every slot decision uses the database's
clock, so advancing it is all a test needs to make slots come due.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, SchemaIncomplete, SerializationError, Worker
from cairnq.extensions import Schedules
from cairnq.extensions.schedules import _scheduler as scheduler_module
from cairnq.extensions.schedules._ops import slot_key
from cairnq.extensions.schedules._plan import jitter_for
from cairnq.extensions.schedules._scheduler import Scheduler
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import ClaimTurns
from .test_without_extensions import protocol_only

START = 1_800_000_000_000  # a multiple of 10 s: slots of every="10s" fall on it


def _clock() -> FakeClock:
    return FakeClock(START + 1)


async def _slots_of(cq: CairnQ, name: str) -> list[int]:
    tasks = await cq.list(name=name, limit=1000)
    return sorted(t.metadata["cairnq.schedule"]["slot_ms"] for t in tasks)


# --- storing -------------------------------------------------------------------------------


async def test_a_new_schedule_starts_at_the_first_slot_after_now(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        stored = await cq.schedules.add("tick", "job", every="10s", payload={"a": 1})
        assert (stored.next_ms, stored.cursor_ms) == (START + 10_000, START + 1)
        assert (stored.task, stored.queue, stored.payload, stored.source) == (
            "job",
            "default",
            {"a": 1},
            "api",
        )
        assert await cq.schedules.get("tick") == stored
        assert [s.name for s in await cq.schedules.list()] == ["tick"]


async def test_every_3600_schedules_hourly(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        stored = await cq.schedules.add("hourly", "job", every=3600)
        assert (stored.every_ms, stored.when) == (3_600_000, "every 1h00m")


async def test_a_schedule_without_catch_up_may_run_an_hour_late(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        stored = await cq.schedules.add("tick", "job", every=60)
        assert stored.catch_up_ms == 3_600_000


async def test_catch_up_and_jitter_numbers_mean_seconds(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        stored = await cq.schedules.add("tick", "job", every=60, catch_up=120, jitter=1.5)
        assert (stored.catch_up_ms, stored.jitter_ms) == (120_000, 1_500)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"every": "-5s"}, "duration"),
        ({"every": 0}, "every"),
        ({"every": "10s", "catch_up_policy": "some"}, "catch_up_policy must be one of all, latest"),
        ({"every": "10s", "overlap": "never"}, "overlap must be one of allow, skip, queue"),
        ({"every": "10s", "jitter": "10s"}, "jitter must be shorter than the interval"),
        ({"every": "10s", "catch_up": "0s"}, "catch_up must be 1s or more, got .0s."),
        ({}, "every"),
        ({"cron": "61 * * * *"}, "61 \\* \\* \\* \\*"),
        ({"cron": "@reboot"}, "@reboot"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "Mars/Olympus"),
        ({"every": "10s", "tz": "Europe/Paris"}, "tz applies to cron schedules"),
    ],
)
async def test_bad_input_is_refused_before_anything_is_stored(
    db: Database, options: dict[str, Any], message: str
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=message):
            await cq.schedules.add("tick", "job", **options)
        assert await cq.schedules.list() == []


async def test_a_payload_that_is_not_json_is_refused_before_anything_is_stored(
    db: Database,
) -> None:
    async with db.client() as cq:
        with pytest.raises(SerializationError):
            await cq.schedules.add("tick", "job", every="10s", payload={"when": object()})
        assert await cq.schedules.list() == []


async def test_adding_a_taken_name_is_refused_without_replace(db: Database) -> None:
    async with db.client() as cq:
        await cq.schedules.add("tick", "job", every="10s")
        with pytest.raises(InvalidArgument, match="a schedule named 'tick' exists"):
            await cq.schedules.add("tick", "other", every="20s")
        assert (await cq.schedules.get("tick")).task == "job"  # type: ignore[union-attr]


async def test_replace_changes_the_definition_and_keeps_cursor_and_history(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s")
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
        replaced = await cq.schedules.add("tick", "job2", every="20s", replace=True)
        assert (replaced.task, replaced.every_ms) == ("job2", 20_000)
        assert replaced.cursor_ms == START + 10_001
        assert replaced.next_ms == START + 20_000
        assert len(await cq.schedules.history("tick")) == 1


# --- evaluating ----------------------------------------------------------------------------


async def test_each_due_slot_submits_one_task_with_the_slot_key_and_metadata(
    db: Database,
) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", metadata={"team": "ops"})
        assert await cq.schedules.run_due() == 0
        clock.advance(30_000)
        assert await cq.schedules.run_due() == 3
        assert await cq.schedules.run_due() == 0
        slots = [START + 10_000, START + 20_000, START + 30_000]
        assert await _slots_of(cq, "job") == slots
        for slot in slots:
            task = await cq.get_by_key(slot_key("tick", slot))
            assert task is not None and task.metadata["team"] == "ops"
        history = await cq.schedules.history("tick")
        assert [(h.slot_ms, h.outcome, h.task_status) for h in history] == [
            (slot, "enqueued", "queued") for slot in reversed(slots)
        ]
        stored = await cq.schedules.get("tick")
        assert stored is not None
        assert (stored.last_slot_ms, stored.last_status) == (slots[-1], "queued")
        assert stored.next_ms == START + 40_000


async def test_a_slot_task_runs_at_its_slot_plus_the_schedules_jitter(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", jitter="5s")
        clock.advance(10_000)
        await cq.schedules.run_due()
        [task] = await cq.list(name="job")
    slot = START + 10_000
    assert task.run_at_ms == slot + jitter_for("tick", slot, 5_000)


async def test_evaluators_racing_on_one_schedule_submit_each_slot_once(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as first, db.client(clock=clock) as second:
        await first.schedules.add("tick", "job", every="10s")
        for _ in range(20):
            clock.advance(10_000)
            await asyncio.gather(first.schedules.run_due(), second.schedules.run_due())
        slots = await _slots_of(first, "job")
    assert slots == [START + 10_000 * i for i in range(1, 21)]


async def test_after_downtime_only_slots_inside_catch_up_are_submitted(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", catch_up="35s")
        clock.advance(100_000)
        # now is START + 100_001: slots from START + 70_000 are under 35 s old
        assert await cq.schedules.run_due() == 4
        history = await cq.schedules.history("tick")
    assert [(h.slot_ms - START, h.outcome, h.slots) for h in reversed(history)] == [
        (10_000, "missed", 6),
        (70_000, "enqueued", 1),
        (80_000, "enqueued", 1),
        (90_000, "enqueued", 1),
        (100_000, "enqueued", 1),
    ]
    assert history[-1].through_ms == START + 60_000


async def test_a_cron_slot_that_does_not_exist_locally_runs_once_after_the_gap(
    db: Database,
) -> None:
    # Europe/Paris springs forward at 2026-03-29 01:00 UTC (02:00 -> 03:00 local).
    before = 1_774_731_600_000  # 2026-03-28 21:00 UTC
    clock = FakeClock(before)
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("night", "job", cron="30 2 * * *", tz="Europe/Paris", catch_up="3d")
        clock.advance(2 * 86_400_000)
        assert await cq.schedules.run_due() == 2
        slots = await _slots_of(cq, "job")
    gap_end = 1_774_746_000_000  # 2026-03-29 01:00 UTC = 03:00 CEST
    next_night = 1_774_830_600_000  # 2026-03-30 00:30 UTC = 02:30 CEST
    assert slots == [gap_end, next_night]


# --- pausing and removing ------------------------------------------------------------------


async def test_a_paused_schedule_submits_nothing_and_resumes_from_now(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s")
        paused = await cq.schedules.pause("tick")
        assert paused is not None and paused.paused
        clock.advance(50_000)
        assert await cq.schedules.run_due() == 0
        resumed = await cq.schedules.resume("tick")
        assert resumed is not None and not resumed.paused
        assert await cq.schedules.run_due() == 0
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
        history = await cq.schedules.history("tick")
        assert await _slots_of(cq, "job") == [START + 60_000]
    assert [(h.outcome, h.slots) for h in reversed(history)] == [("paused", 5), ("enqueued", 1)]


async def test_a_schedule_can_be_created_paused(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", paused=True)
        clock.advance(20_000)
        assert await cq.schedules.run_due() == 0


async def test_pause_resume_and_remove_of_an_unknown_name_say_so(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.schedules.pause("nope") is None
        assert await cq.schedules.resume("nope") is None
        assert await cq.schedules.remove("nope") is False
        assert await cq.schedules.get("nope") is None


async def test_removing_a_schedule_keeps_the_tasks_it_submitted(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s")
        clock.advance(10_000)
        await cq.schedules.run_due()
        assert await cq.schedules.remove("tick") is True
        assert await cq.schedules.list() == []
        assert await cq.schedules.history("tick") == []
        assert len(await cq.list(name="job")) == 1


# --- overlap -------------------------------------------------------------------------------


async def test_overlap_skip_records_a_slot_due_while_the_previous_task_is_queued(
    db: Database,
) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", overlap="skip")
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 0
        [first] = await cq.list(name="job")
        await cq.cancel(first.id)
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
        history = await cq.schedules.history("tick")
    assert [h.outcome for h in reversed(history)] == ["enqueued", "overlap", "enqueued"]


async def test_overlap_queue_holds_slots_until_the_previous_task_ends(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s", overlap="queue")
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
        clock.advance(20_000)
        assert await cq.schedules.run_due() == 0
        [first] = await cq.list(name="job")
        await cq.cancel(first.id)
        assert await cq.schedules.run_due() == 1
        assert await cq.schedules.run_due() == 0  # the next waits for this one
        assert await _slots_of(cq, "job") == [START + 10_000, START + 20_000]


# --- workers -------------------------------------------------------------------------------


async def test_a_worker_stores_its_periodic_schedule_and_runs_each_slot(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker evaluates every 20 ms instead of every second: the test waits for the
    # evaluation after the clock moves, and how often evaluations come changes nothing.
    class Often(Scheduler):
        def __init__(self, *args: Any, **options: Any) -> None:
            super().__init__(*args, **{"interval_ms": 20, **options})

    monkeypatch.setattr(scheduler_module, "Scheduler", Often)
    clock = _clock()
    worker = db.worker(clock=clock, poll_interval_ms=20)
    ran: list[int] = []

    @worker.periodic(every="10s", payload={"n": 1})
    async def tick(ctx: Any, payload: Any) -> None:
        ran.append(ctx.task.metadata["cairnq.schedule"]["slot_ms"])

    async with db.client(clock=clock) as cq, worker.background():
        stored = await _eventually(lambda: cq.schedules.get("tick"))
        assert (stored.task, stored.source, stored.payload) == ("tick", "code", {"n": 1})
        clock.advance(10_000)
        await _eventually(lambda: _true_if(ran))
    assert ran == [START + 10_000]


async def test_a_worker_replaces_the_definition_of_its_declared_schedule_keeping_the_cursor(
    db: Database,
) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "tick", every="10s")
        clock.advance(10_000)
        await cq.schedules.run_due()
        worker = db.worker(clock=clock, extensions=[Schedules(evaluate=True)])
        worker.schedule("tick", "tick", every="20s")
        async with worker.background():
            stored = await _eventually(lambda: _if_every(cq, 20_000))
        assert stored.cursor_ms >= START + 10_001
        assert await _slots_of(cq, "tick") == [START + 10_000]


async def test_a_worker_replacing_a_schedule_an_operator_added_says_so_in_one_warning(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cairnq.schedules")
    clock = _clock()
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "tick", every="10s")
        for _ in range(2):  # the second start finds the schedule its code stored
            worker = db.worker(clock=clock, extensions=[Schedules(evaluate=True)])
            worker.schedule("tick", "tick", every="20s")
            async with worker.background():
                stored = await _eventually(lambda: _if_every(cq, 20_000))
    assert stored.source == "code"
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith("schedule tick (every 10s, task tick) was added by a client")
    assert "replaced it (now every 20s, task tick)" in line and "\n" not in line


async def test_a_worker_with_schedules_off_stores_and_evaluates_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = ClaimTurns(monkeypatch)
    clock = _clock()
    worker = db.worker(clock=clock, extensions=[Schedules(evaluate=False)], poll_interval_ms=20)
    worker.schedule("tick", "job", every="10s")
    async with worker.background():
        # Claiming: the worker's start, which stores and starts its schedules, is over.
        await turns.passed(1)
    async with db.client(clock=clock) as cq:
        assert await cq.schedules.list() == []


def test_a_schedule_declared_twice_on_a_worker_is_refused(db: Database) -> None:
    worker = db.worker()
    worker.schedule("tick", "job", every="10s")
    with pytest.raises(InvalidArgument, match="declared twice"):
        worker.schedule("tick", "other", every="20s")


def test_periodic_with_bad_timing_registers_no_handler(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument):

        @worker.periodic(every="-1s")
        async def tick(ctx: Any) -> None: ...

    assert worker.registry.names() == []
    assert worker.schedules == []


# --- a database without the schedules tables ----------------------------------------------


async def test_client_schedule_calls_name_the_missing_migration(db: Database) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        with pytest.raises(SchemaIncomplete, match=r"x0005_schedules\.sql"):
            await cq.schedules.add("tick", "job", every="10s")
        with pytest.raises(SchemaIncomplete, match="cairnq migrate"):
            await cq.schedules.list()
        assert (await cq.submit("job")).status == "queued"


async def test_a_worker_without_the_schedules_tables_says_so_once_and_runs_tasks(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        for migration in ("x0001_locks.sql", "x0002_workers.sql", "x0003_leases.sql"):
            await _apply(cq, migration)
        caplog.set_level(logging.INFO, logger="cairnq.schedules")
        worker = Worker(db.backend(migrate=False), poll_interval_ms=20)
        worker.schedule("tick", "job", every="10s")
        done: list[str] = []

        @worker.task
        async def job(ctx: Any) -> None:
            done.append(ctx.task_id)

        task = await cq.submit("job")
        async with worker.background():
            await _eventually(lambda: _true_if(done))
    assert done == [task.id]
    lines = [r for r in caplog.records if "x0005_schedules.sql" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "\n" not in lines[0].getMessage() and "cairnq migrate" in lines[0].getMessage()


# --- helpers -------------------------------------------------------------------------------


async def _apply(cq: CairnQ, name: str) -> None:
    from cairnq import kernel
    from cairnq.protocol.statements import migrations

    [migration] = [m for m in migrations(cq.backend.dialect) if m.name == name]
    await cq.backend.arun(kernel.apply_migration(migration.name, migration.source), write=True)


async def _true_if(items: list[Any]) -> bool | None:
    return True if items else None


async def _if_every(cq: CairnQ, every_ms: int) -> Any:
    stored = await cq.schedules.get("tick")
    return stored if stored is not None and stored.every_ms == every_ms else None


async def _eventually(probe: Any, timeout_s: float = 10.0) -> Any:
    """Poll ``probe()`` (a coroutine function) until it returns something other than None."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await probe()
        if value is not None:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)
