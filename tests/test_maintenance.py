"""Lease recovery runs in every worker, for every queue, even when that worker is busy."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairnq import TaskContext, kernel
from cairnq.testing import FakeClock

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]


async def test_a_killed_workers_last_attempt_fails_via_a_busy_worker_of_another_queue(
    db: Database, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    async with db.client() as cq:
        doomed = await cq.submit("stuck", {}, queue="doomed", max_attempts=1)
        child = subprocess.Popen(
            [sys.executable, "-m", "tests._child", "doomed", db.spec(), str(marker)], cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 30
            while not marker.exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert marker.read_text() == doomed.id
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        running = await cq.get(doomed.id)
        assert running is not None and running.status == "running"

        other = db.worker(
            queues=["other"], concurrency=1, poll_interval_ms=60_000, recovery_interval="200ms"
        )
        release = asyncio.Event()

        @other.task
        async def busy(ctx: TaskContext, payload: Any) -> None:
            await release.wait()

        async with other.background():
            await cq.submit("busy", {}, queue="other")
            done = await cq.wait(doomed.id, timeout_ms=15_000)
            release.set()
        await other.close()
    assert done.status == "failed"
    assert done.error == {
        "type": "LeaseExpired",
        "code": "lease_expired",
        "message": "task lease expired and max attempts reached",
        "retryable": False,
        "details": {},
    }


async def test_recovery_with_attempts_left_requeues_and_with_a_cancel_cancels(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        retry = await cq.submit("job", {}, max_attempts=3)
        cancel = await cq.submit("job", {}, max_attempts=3)
        claim = kernel.claim(["default"], "gone", 1000, [kernel.Draw(None, 2)], 100)
        await cq.backend.arun(claim, write=True)
        await cq.cancel(cancel.id)
        clock.advance(1001)
        worker = db.worker(clock=clock, queues=["elsewhere"], recovery_interval="50ms")

        @worker.task
        async def noop(ctx: TaskContext) -> None: ...

        recovered = await worker.recover_expired()
        await worker.close()
        again = await cq.get(retry.id)
        ended = await cq.get(cancel.id)
    assert recovered == 2
    assert again is not None and (again.status, again.attempt, again.worker_id) == (
        "queued",
        1,
        None,
    )
    assert ended is not None and ended.status == "canceled"


async def test_recovery_is_bounded_per_run(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await cq.submit_many([("job", {}) for _ in range(250)])
        claim = kernel.claim(["default"], "gone", 1000, [kernel.Draw(None, 250)], 100)
        await cq.backend.arun(claim, write=True)
        clock.advance(1001)
        worker = db.worker(clock=clock)
        first = await worker.recover_expired(batches=2)
        rest = await worker.recover_expired()
        await worker.close()
        stats = await cq.stats()
    assert (first, rest) == (200, 50)
    assert stats["default"]["queued"] == 250


@pytest.mark.parametrize("workers", [5])
async def test_many_workers_recovering_at_once_recover_each_lease_once(
    db: Database, workers: int
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await cq.submit_many([("job", {}) for _ in range(300)])
        claim = kernel.claim(["default"], "gone", 1000, [kernel.Draw(None, 300)], 100)
        await cq.backend.arun(claim, write=True)
        clock.advance(1001)
        fleet = [db.worker(clock=clock) for _ in range(workers)]
        counts = await asyncio.gather(*(w.recover_expired() for w in fleet))
        for w in fleet:
            await w.close()
        tasks = await cq.list(limit=300)
    assert sum(counts) == 300
    assert {(t.status, t.attempt) for t in tasks} == {("queued", 1)}
