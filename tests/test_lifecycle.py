"""The worker's components under one lifecycle: prepared in order, their jobs started once
all are prepared, stopped in reverse order around the drain, on a refused start and on a
cancel too.

The runner is driven with components that record what happens to them (no database
involved); the worker's own components are checked through a real ``Worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import pytest

from cairnq import CairnQ, TaskContext, Worker
from cairnq.backends import Backend, SQLiteBackend
from cairnq.extensions.schedules import _scheduler as scheduler_module
from cairnq.extensions.schedules._scheduler import Scheduler
from cairnq.kernel.periodic import PeriodicJob
from cairnq.testing import FakeClock
from cairnq.worker._lifecycle import Lifecycle, Step

from ._db import Database, admin_connect
from ._waits import eventually


class Refused(Exception):
    pass


class RecordedJob:
    def __init__(self, name: str, log: list[str], *, stop_raises: BaseException | None = None):
        self.name, self.log, self.stop_raises = name, log, stop_raises

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    async def stop(self, *, wait: bool = True) -> None:
        self.log.append(f"stop {self.name}")
        if self.stop_raises is not None:
            raise self.stop_raises


class Recorded:
    """A component that writes each step of its lifecycle into ``log``."""

    def __init__(
        self,
        name: str,
        log: list[str],
        *,
        stops_after_drain: bool = False,
        prepare_raises: BaseException | None = None,
        close_raises: BaseException | None = None,
        job: RecordedJob | PeriodicJob | None = None,
    ) -> None:
        self.name = name
        self.log = log
        self.stops_after_drain = stops_after_drain
        self.prepare_raises = prepare_raises
        self.close_raises = close_raises
        self.job = RecordedJob(name, log) if job is None else job

    async def prepare(self) -> None:
        self.log.append(f"prepare {self.name}")
        if self.prepare_raises is not None:
            raise self.prepare_raises

    async def close(self) -> None:
        # A close that waits, as presence's delete does: a stop goes on past it.
        await asyncio.sleep(0)
        self.log.append(f"close {self.name}")
        if self.close_raises is not None:
            raise self.close_raises


def recorded(log: list[str], *names: str) -> list[Recorded]:
    return [Recorded(name, log) for name in names]


async def test_components_are_prepared_and_started_in_order_and_stopped_in_reverse() -> None:
    log: list[str] = []
    lifecycle = Lifecycle(recorded(log, "a", "b", "c"))
    assert await lifecycle.prepare()
    lifecycle.start()
    await lifecycle.stop()
    assert log == [
        *("prepare a", "prepare b", "prepare c"),
        *("start a", "start b", "start c"),
        *("stop c", "close c", "stop b", "close b", "stop a", "close a"),
    ]


async def test_a_prepare_that_raises_refuses_the_start_and_closes_those_prepared() -> None:
    log: list[str] = []
    parts = recorded(log, "a", "b")
    parts.append(Recorded("c", log, prepare_raises=Refused("no limits tables")))
    parts.append(Recorded("d", log))
    lifecycle = Lifecycle(parts)
    with pytest.raises(Refused):
        await lifecycle.prepare()
    with pytest.raises(RuntimeError):
        lifecycle.start()
    await lifecycle.stop()
    assert log == ["prepare a", "prepare b", "prepare c", "close b", "close a"]


async def test_a_stop_during_the_prepares_leaves_the_rest_unprepared_and_nothing_started() -> None:
    log: list[str] = []

    async def until_b(step: Step, name: str) -> bool:
        if name == "b":
            return False  # as the worker's attempt does once stop() was called
        await step()
        return True

    lifecycle = Lifecycle(recorded(log, "a", "b", "c"), attempt=until_b)
    assert not await lifecycle.prepare()
    await lifecycle.stop()
    assert log == ["prepare a", "close a"]


async def test_a_job_that_raises_is_reported_and_keeps_running_at_its_backed_off_pace() -> None:
    errors: list[dict[str, Any]] = []
    third = asyncio.Event()

    async def broken() -> None:
        raise Refused("the database said no")

    def report(exc: BaseException, context: dict[str, Any]) -> None:
        errors.append(context)
        if len(errors) == 3:
            third.set()

    job = PeriodicJob("broken", broken, interval_ms=1, on_error=report, phase="broken")
    lifecycle = Lifecycle([Recorded("broken", [], job=job)])
    assert await lifecycle.prepare()
    lifecycle.start()
    await asyncio.wait_for(third.wait(), 10)
    still_running = job.running
    # Doubled after each error up to the cap: 2, 4, then 8 ms (eight intervals).
    pace = job.next_delay_ms
    await lifecycle.stop()
    assert still_running and not job.running
    assert pace == job.max_error_backoff_ms == 8
    assert errors[0] == {"phase": "broken", "job": "broken"}


async def test_a_stop_without_waiting_cancels_a_run_in_progress() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def waits_on_a_gone_database() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = PeriodicJob("stuck", waits_on_a_gone_database, interval_ms=1, phase="stuck")
    lifecycle = Lifecycle([Recorded("stuck", [], job=job)])
    assert await lifecycle.prepare()
    lifecycle.start()
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(lifecycle.stop(wait=False), 10)
    assert cancelled.is_set() and not job.running


async def test_a_stop_that_waits_lets_a_run_in_progress_finish() -> None:
    started = asyncio.Event()
    finish = asyncio.Event()
    finished: list[bool] = []

    async def run_to_its_end() -> None:
        started.set()
        await finish.wait()
        finished.append(True)

    job = PeriodicJob("slow", run_to_its_end, interval_ms=1, phase="slow")
    lifecycle = Lifecycle([Recorded("slow", [], job=job)])
    assert await lifecycle.prepare()
    lifecycle.start()
    await asyncio.wait_for(started.wait(), 10)
    stopping = asyncio.ensure_future(lifecycle.stop())
    await asyncio.sleep(0)
    assert not stopping.done()
    finish.set()
    await asyncio.wait_for(stopping, 10)
    assert finished == [True]


async def test_a_cancelled_run_stops_every_component_in_reverse_order() -> None:
    log: list[str] = []
    lifecycle = Lifecycle(recorded(log, "a", "b", "c"))
    running = asyncio.Event()

    async def run() -> None:
        try:
            if await lifecycle.prepare():
                lifecycle.start()
                running.set()
                await asyncio.Event().wait()
        finally:
            await lifecycle.stop()

    task = asyncio.ensure_future(run())
    await asyncio.wait_for(running.wait(), 10)
    del log[:]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["stop c", "close c", "stop b", "close b", "stop a", "close a"]


async def test_components_that_stop_after_the_drain_stop_after_it_in_reverse_order() -> None:
    log: list[str] = []
    parts = [
        Recorded("presence", log, stops_after_drain=True),
        Recorded("pauses", log),
        Recorded("heartbeat", log, stops_after_drain=True),
        Recorded("schedules", log),
    ]
    lifecycle = Lifecycle(parts)
    assert await lifecycle.prepare()
    lifecycle.start()
    del log[:]

    async def drain() -> None:
        log.append("drain")

    await lifecycle.stop(drain=drain)
    assert log == [
        *("stop schedules", "close schedules", "stop pauses", "close pauses"),
        "drain",
        *("stop heartbeat", "close heartbeat", "stop presence", "close presence"),
    ]


async def test_a_close_that_raises_is_reported_and_the_others_still_stop() -> None:
    log: list[str] = []
    reported: list[tuple[BaseException, dict[str, Any]]] = []
    failing = Refused("row not deleted")
    parts = [Recorded("a", log), Recorded("b", log, close_raises=failing), Recorded("c", log)]
    lifecycle = Lifecycle(
        parts, report=lambda exc, ctx: reported.append((exc, ctx)), context={"worker_id": "w"}
    )
    assert await lifecycle.prepare()
    lifecycle.start()
    del log[:]
    await lifecycle.stop()
    assert log == ["stop c", "close c", "stop b", "close b", "stop a", "close a"]
    assert reported == [(failing, {"worker_id": "w", "phase": "b"})]


async def test_a_cancel_while_stopping_still_stops_the_rest_then_is_raised() -> None:
    log: list[str] = []
    parts = recorded(log, "a")
    parts.append(
        Recorded("b", log, job=RecordedJob("b", log, stop_raises=asyncio.CancelledError()))
    )
    parts.append(Recorded("c", log))
    lifecycle = Lifecycle(parts)
    assert await lifecycle.prepare()
    lifecycle.start()
    del log[:]
    with pytest.raises(asyncio.CancelledError):
        await lifecycle.stop()
    assert log == ["stop c", "close c", "stop b", "stop a", "close a"]


# --- a real worker --------------------------------------------------------------------------


async def drain_noted(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set when a worker begins its drain."""
    draining = asyncio.Event()
    drain = Worker._drain

    async def noted(self: Worker, *args: Any) -> None:
        draining.set()
        await drain(self, *args)

    monkeypatch.setattr(Worker, "_drain", noted)
    return draining


async def recorded_row(cq: CairnQ, worker_id: str) -> bool:
    """Whether the worker's own row (presence) is in ``cairnq_workers``."""
    infos = {info.worker_id: info for info in await cq.presence.workers()}
    info = infos.get(worker_id)
    return info is not None and info.last_seen_ms is not None


async def test_a_workers_presence_row_stays_until_its_calls_have_drained(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    draining = await drain_noted(monkeypatch)
    worker = db.worker(poll_interval_ms=20)
    started, release = asyncio.Event(), asyncio.Event()

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> str:
        started.set()
        await release.wait()
        return "finished"

    async with db.client() as cq:
        await cq.submit("slow", {})
        runner = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        await eventually(lambda: recorded_row(cq, worker.worker_id), "the presence row")
        worker.stop()
        await asyncio.wait_for(draining.wait(), 10)
        during = await recorded_row(cq, worker.worker_id)
        release.set()
        await asyncio.wait_for(runner, 10)
        after = await recorded_row(cq, worker.worker_id)
    await worker.close()
    assert during and not after


async def test_a_call_still_running_in_the_drain_keeps_its_lease_renewed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    draining = await drain_noted(monkeypatch)
    clock = FakeClock()
    worker = db.worker(clock=clock, poll_interval_ms=20, lease_ms=60_000, heartbeat_interval="50ms")
    started, release = asyncio.Event(), asyncio.Event()

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> str:
        started.set()
        await release.wait()
        return "finished"

    async with db.client(clock=clock) as cq:
        task = await cq.submit("slow", {})
        runner = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        worker.stop()
        await asyncio.wait_for(draining.wait(), 10)
        claimed = await cq.get(task.id)
        assert claimed is not None and claimed.lease_until_ms is not None
        clock.advance(30_000)

        async def renewed() -> bool:
            now = await cq.get(task.id)
            assert now is not None and now.lease_until_ms is not None
            return now.lease_until_ms > claimed.lease_until_ms

        await eventually(renewed, "a heartbeat during the drain")
        release.set()
        await asyncio.wait_for(runner, 10)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and (done.status, done.result) == ("succeeded", "finished")


async def test_a_cancelled_worker_run_still_deletes_its_presence_row(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    async with db.client() as cq:
        runner = asyncio.ensure_future(worker.run())
        await eventually(lambda: recorded_row(cq, worker.worker_id), "the presence row")
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        after = await recorded_row(cq, worker.worker_id)
    await worker.close()
    assert not after


def open_connections(db: Database, backend: Backend, application_name: str) -> int:
    """The connections ``backend`` holds open: on PostgreSQL, this database's sessions
    named after ``application_name``; on SQLite, its read connections and writer."""
    if isinstance(backend, SQLiteBackend):
        writer = backend._writer
        return len(backend._read_conns) + int(writer is not None and writer.is_alive())
    with admin_connect(db.url) as admin:
        row = admin.execute(
            "select count(*) from pg_stat_activity where datname = current_database() "
            "and application_name like %s",
            (f"{application_name}-%",),
        ).fetchone()
    return int(row[0]) if row else 0


async def test_a_worker_run_cancelled_while_its_client_opens_leaves_no_connection_open(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "cairnq-open-cancelled"
    options: dict[str, Any] = {} if db.kind == "sqlite" else {"application_name": name}
    client = CairnQ(db.backend(**options))
    client._owns_backend = True
    worker = Worker(client, poll_interval_ms=20)
    worker._owns_client = True

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    real_open = client.open
    begun, ended = asyncio.Event(), asyncio.Event()

    async def open_watched() -> CairnQ:
        begun.set()
        try:
            return await real_open()
        finally:
            ended.set()

    monkeypatch.setattr(client, "open", open_watched)
    runner = asyncio.ensure_future(worker.run())
    # The open has begun and waits inside the backend (connecting) when the cancel lands.
    await begun.wait()
    assert not ended.is_set()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    open_ended_with_the_run = ended.is_set()
    await worker.close()
    await asyncio.wait_for(ended.wait(), 30)
    assert open_ended_with_the_run, "the open went on after the cancelled run ended"
    await eventually(
        lambda: open_connections(db, client.backend, name) == 0, "every connection closed"
    )


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() came in 3.11")
async def test_a_worker_run_ends_on_a_cancel_a_database_call_swallowed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncio.wait_for before Python 3.12 (which the PostgreSQL pool waits for a
    # connection with) returns a result that arrives as a cancel lands, and the cancel
    # is lost (CPython gh-86296). Here one claim-loop call loses the run's cancel so.
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    backend = worker.client.backend
    arun = backend.arun
    inside = asyncio.Event()
    armed = False
    runner: asyncio.Future[None] | None = None

    async def losing_a_cancel(op: Any, *, write: bool) -> Any:
        nonlocal armed
        value = await arun(op, write=write)
        if armed and asyncio.current_task() is runner:
            armed = False
            inside.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
        return value

    monkeypatch.setattr(backend, "arun", losing_a_cancel)
    async with db.client() as cq:
        runner = asyncio.ensure_future(worker.run())
        await eventually(lambda: recorded_row(cq, worker.worker_id), "the presence row")
        armed = True
        await inside.wait()
        runner.cancel()
        done, _ = await asyncio.wait({runner}, timeout=10)
        if not done:
            worker.stop()
            await runner
        assert done, "the run went on claiming after its cancel"
        assert runner.cancelled()
        after = await recorded_row(cq, worker.worker_id)
    await worker.close()
    assert not after


async def test_a_schedule_store_that_fails_refuses_the_start_and_closes_the_parts_before_it(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = db.worker(poll_interval_ms=20)
    worker.schedule("tick", "job", every="10s")

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    async with db.client() as cq:

        class Failing(Scheduler):
            async def prepare(self) -> None:
                # Presence, prepared before the schedules, has written the worker's row.
                await eventually(lambda: recorded_row(cq, self.worker_id), "the presence row")
                raise Refused("the schedules could not be stored")

        monkeypatch.setattr(scheduler_module, "Scheduler", Failing)
        task = await cq.submit("job", {})
        with pytest.raises(Refused):
            await worker.run()
        after = await recorded_row(cq, worker.worker_id)
        unclaimed = await cq.get(task.id)
    await worker.close()
    assert not after
    assert unclaimed is not None and unclaimed.status == "queued"
