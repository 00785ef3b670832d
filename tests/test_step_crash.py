"""A worker process killed with ``kill -9`` in the middle of a five-step handler.

The first process records steps 1-3, signals through a file and is killed. A new
worker process recovers the lease, runs the task's next attempt, and resumes at
step 4: steps 1-3 are not run again, as the effects file (written by the steps
themselves, outside cairnq) shows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cairnq import SyncCairnQ

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]


def _spawn(db: Database, tmp: Path, hang_after: int, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests._steps_child",
            db.spec(),
            str(tmp / "effects"),
            str(tmp / "signal"),
            str(stop),
            str(hang_after),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_a_task_killed_after_step_3_of_5_resumes_at_step_4_on_another_process(
    db: Database, tmp_path: Path
) -> None:
    with SyncCairnQ(db.backend()) as cq:
        task = cq.submit("five_steps", max_attempts=3)
        first = _spawn(db, tmp_path, 3, tmp_path / "stop-first")
        try:
            _wait_for((tmp_path / "signal").exists)
            os.kill(first.pid, signal.SIGKILL)
        finally:
            if first.poll() is None and not (tmp_path / "signal").exists():
                first.kill()
            first.communicate(timeout=30)
        second = _spawn(db, tmp_path, 0, tmp_path / "stop-second")
        try:

            def ended() -> bool:
                current = cq.get(task.id)
                return current is not None and current.status in ("succeeded", "failed")

            _wait_for(ended)
        finally:
            (tmp_path / "stop-second").touch()
            _, errors = second.communicate(timeout=60)
        done = cq.get(task.id)
        attempts = cq.attempts.list(task.id)
    effects = [line.split() for line in (tmp_path / "effects").read_text().splitlines()]
    assert done is not None and done.status == "succeeded", errors
    assert done.result == [10, 20, 30, 40, 50]
    assert [step for step, _ in effects] == [f"step-{n}" for n in range(1, 6)]
    assert {pid for step, pid in effects[:3]} == {str(first.pid)}
    assert {pid for step, pid in effects[3:]} == {str(second.pid)}
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "lost"), (2, "succeeded")]
