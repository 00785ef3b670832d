"""A worker's start-up reads and writes wait out a busy database instead of stopping it."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from cairnq import CairnQ, Limit, Worker
from cairnq.backends import SQLiteBackend
from cairnq.extensions import Limits

from ._db import Database


def _hold_write_lock(path: Path, release: threading.Event, held: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("begin immediate")
    held.set()
    release.wait(30)
    conn.execute("rollback")
    conn.close()


def _limited_worker(path: Path) -> Worker:
    client = CairnQ(SQLiteBackend(path, busy_timeout_ms=50))
    client._owns_backend = True
    worker = Worker(
        client, extensions=[Limits([Limit.concurrency(1, queue="default", key="payload.customer")])]
    )
    worker._owns_client = True

    @worker.task("job")
    async def job(ctx: Any, payload: Any) -> str:
        return "ran"

    return worker


async def test_a_worker_started_while_another_process_holds_the_write_lock_runs_once_it_is_free(
    sqlite_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    assert sqlite_db.path is not None
    async with sqlite_db.client() as cq:
        task = await cq.submit("job", {"customer": "a"})
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, release, held))
    holder.start()
    held.wait(10)
    worker = _limited_worker(sqlite_db.path)
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    running = asyncio.ensure_future(worker.run(until_idle=True))
    try:
        # Its limit cannot be stored while the lock is held: it says so and waits.
        while not any("worker start-up (limits)" in r.getMessage() for r in caplog.records):
            assert not running.done(), running.exception()
            await asyncio.sleep(0.01)
    finally:
        release.set()
        holder.join()
    await asyncio.wait_for(running, 30)
    async with sqlite_db.client() as cq:
        done = await cq.get(task.id)
    assert (done.status, done.result) == ("succeeded", "ran")


async def test_a_worker_stopped_while_waiting_out_a_locked_database_returns_without_error(
    sqlite_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    assert sqlite_db.path is not None
    async with sqlite_db.client() as cq:
        await cq.stats()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, release, held))
    holder.start()
    held.wait(10)
    worker = _limited_worker(sqlite_db.path)
    caplog.set_level(logging.WARNING, logger="cairnq.worker")
    running = asyncio.ensure_future(worker.run())
    try:
        while not any("worker start-up" in r.getMessage() for r in caplog.records):
            assert not running.done(), running.exception()
            await asyncio.sleep(0.01)
        worker.stop()
        await asyncio.wait_for(running, 10)
    finally:
        release.set()
        holder.join()
