"""A SQLite file deleted, renamed or replaced while a worker or client has it open."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairnq import DatabaseUnavailable, SyncCairnQ, TaskContext
from cairnq.backends import SQLiteBackend
from cairnq.backends.sqlite import FILE_CHECK_S

from ._db import Database

HOW = ["deleted", "renamed", "replaced"]


def move_away(path: Path, how: str) -> None:
    """Take the database file away from its path: ``rm``, ``mv``, or a new file moved over it."""
    if how == "deleted":
        path.unlink()
    elif how == "renamed":
        path.rename(path.with_name("moved.db"))
    else:
        other = path.with_name("other.db")
        with SyncCairnQ.sqlite(other) as cq:
            cq.stats()
        os.replace(other, path)


@pytest.mark.parametrize("how", HOW)
async def test_a_worker_whose_file_left_its_path_logs_one_error_and_stops_with_database_unavailable(
    sqlite_db: Database, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = sqlite_db.path
    assert path is not None
    worker = sqlite_db.worker(poll_interval_ms=50)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        pass

    async with sqlite_db.client() as cq:
        running = asyncio.ensure_future(worker.run())
        task = await cq.submit("job")
        assert (await cq.wait(task.id, timeout_ms=10_000)).status == "succeeded"
        with caplog.at_level(logging.INFO, logger="cairnq"):
            move_away(path, how)
            with pytest.raises(DatabaseUnavailable) as stopped:
                await asyncio.wait_for(running, timeout=5)
    await worker.close()
    assert str(path) in str(stopped.value)
    assert stopped.value.retryable is False
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert str(path) in errors[0].getMessage()


async def test_a_background_part_meeting_the_lost_file_first_stops_the_worker_with_one_error(
    sqlite_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    path = sqlite_db.path
    assert path is not None
    # The claim loop looks at the file once a minute here: a part meets the loss first.
    worker = sqlite_db.worker(poll_interval_ms=60_000)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        pass

    running = asyncio.ensure_future(worker.run())
    async with sqlite_db.client() as cq:
        task = await cq.submit("job")
        assert (await cq.wait(task.id, timeout_ms=10_000)).status == "succeeded"
    with caplog.at_level(logging.INFO, logger="cairnq"):
        move_away(path, "replaced")
        backend = worker.client.backend
        assert isinstance(backend, SQLiteBackend)
        with pytest.raises(DatabaseUnavailable) as lost:
            backend.check_file()
        for phase in ("workflows", "retention"):
            worker._report(lost.value, {"phase": phase})
        with pytest.raises(DatabaseUnavailable) as stopped:
            await asyncio.wait_for(running, timeout=5)
    await worker.close()
    assert stopped.value is lost.value
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert errors[0].startswith("worker stopping:")


def test_serve_ends_with_database_unavailable_without_waiting_for_in_flight_calls(
    sqlite_db: Database,
) -> None:
    path = sqlite_db.path
    assert path is not None
    worker = sqlite_db.worker(poll_interval_ms=50, drain_timeout="1m")
    started = threading.Event()

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await asyncio.sleep(120)

    outcome: list[BaseException] = []

    def serve() -> None:
        try:
            worker.serve()
        except BaseException as exc:
            outcome.append(exc)

    with sqlite_db.sync_client() as cq:
        cq.submit("hold")
        thread = threading.Thread(target=serve)
        thread.start()
        assert started.wait(10)
        move_away(path, "deleted")
        thread.join(timeout=10)
    assert not thread.is_alive(), "serve() kept draining a call it can never settle"
    assert len(outcome) == 1
    assert isinstance(outcome[0], DatabaseUnavailable)


async def test_a_worker_whose_file_left_says_its_unfinished_tasks_stay_claimed(
    sqlite_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    path = sqlite_db.path
    assert path is not None
    worker = sqlite_db.worker(poll_interval_ms=50, drain_timeout="1m")
    started = asyncio.Event()

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await asyncio.sleep(120)

    async with sqlite_db.client() as cq:
        await cq.submit("hold")
    with caplog.at_level(logging.WARNING, logger="cairnq.worker"):
        running = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        move_away(path, "deleted")
        with pytest.raises(DatabaseUnavailable):
            await asyncio.wait_for(running, 30)
        await worker.close()
    [said] = [r.getMessage() for r in caplog.records if "unfinished" in r.getMessage()]
    assert said.startswith(
        "drain cut short (the worker is stopping for an error) with 1 task unfinished; "
        "nothing can be written any more, so it stays claimed until its lease expires: "
    )


@pytest.mark.parametrize("how", HOW)
def test_a_client_refuses_every_write_once_its_file_left_its_path(
    sqlite_db: Database, how: str
) -> None:
    path = sqlite_db.path
    assert path is not None
    with SyncCairnQ.sqlite(path) as cq:
        first = cq.submit("job", {"n": 1})
        move_away(path, how)
        with pytest.raises(DatabaseUnavailable) as refused:
            cq.submit("job", {"n": 2})
        assert str(path) in str(refused.value)
        assert refused.value.retryable is False
        with pytest.raises(DatabaseUnavailable):
            cq.cancel(first.id)
        with pytest.raises(DatabaseUnavailable):
            cq.get(first.id)


async def test_a_client_that_only_reads_notices_within_the_file_check_interval(
    sqlite_db: Database,
) -> None:
    path = sqlite_db.path
    assert path is not None
    async with sqlite_db.client() as cq:
        task = await cq.submit("job")
        move_away(path, "deleted")
        moved_at = time.monotonic()
        noticed: DatabaseUnavailable | None = None
        while noticed is None and time.monotonic() - moved_at < FILE_CHECK_S + 2:
            try:
                await cq.get(task.id)
            except DatabaseUnavailable as exc:
                noticed = exc
            await asyncio.sleep(0.05)
    assert noticed is not None, "reads went on from the deleted file"
    assert str(path) in str(noticed)
