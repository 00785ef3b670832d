"""A batch of 1,000 members drained by worker processes of which two are killed with
``kill -9`` while members run: each callback is submitted exactly once, and the batch's
counts agree with the members' final statuses. Real processes, both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cairnq import SyncCairnQ

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = 1000

pytestmark = pytest.mark.slow


def _spawn(db: Database, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests._batch_child", db.spec(), str(stop)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_a_batch_of_1000_survives_two_killed_workers_with_each_callback_submitted_once(
    db: Database, tmp_path: Path
) -> None:
    with SyncCairnQ(db.backend()) as cq:
        items = [
            {
                "task": "member",
                "payload": {"n": n, "fail": n % 100 == 7},
                "max_attempts": 1 if n % 100 == 7 else 5,
            }
            for n in range(MEMBERS)
        ]
        batch = cq.batch(
            items, on_success="cb.success", on_failure="cb.failure", on_complete="cb.complete"
        )
        assert batch.total == MEMBERS

        def ended_at_least(count: int) -> Callable[[], bool]:
            def check() -> bool:
                found = cq.batch_status(batch.id)
                return found is not None and found.ended >= count

            return check

        procs: list[subprocess.Popen[str]] = []
        try:
            for n, share in enumerate((MEMBERS // 4, MEMBERS // 2)):
                procs.append(_spawn(db, tmp_path / f"stop-{n}"))
                _wait_for(ended_at_least(share))
                _kill(procs[-1])
            procs.append(_spawn(db, tmp_path / "stop-last"))

            def done() -> bool:
                found = cq.batch_status(batch.id)
                return found is not None and found.state == "done"

            _wait_for(done)
        finally:
            (tmp_path / "stop-last").touch()
            for proc in procs:
                if proc.poll() is None:
                    proc.communicate(timeout=60)
        status = cq.batch_status(batch.id)
        assert status is not None
        members = cq.list(name="member", limit=MEMBERS + 1)
        final = Counter(t.status for t in members)
        assert len(members) == MEMBERS
        assert (status.total, status.pending, status.purged) == (MEMBERS, 0, 0)
        assert (status.succeeded, status.failed, status.canceled) == (
            final["succeeded"],
            final["failed"],
            final["canceled"],
        )
        recorded = {m.task_id: m.outcome for m in cq.batches.members(batch.id, limit=MEMBERS)}
        assert recorded == {t.id: t.status for t in members}
        callbacks = Counter(
            t.name
            for t in cq.list(limit=10_000)
            if isinstance(t.payload, dict) and t.payload.get("batch_id") == batch.id
        )
        assert callbacks == {"cb.failure": 1, "cb.complete": 1}
        assert status.submitted == ("on_failure", "on_complete")
        assert final["failed"] >= MEMBERS // 100
