"""An approval flow across a ``kill -9``: a task waits for an event in a worker
process, the process is killed while the task waits, a new worker process starts, the
event is sent from the command line, and the task finishes with the payload.

While the task waits it holds no worker slot: it is ``queued`` (parked), no task is
``running``, and its attempt is not spent.
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
from cairnq.extensions.waits import PARKED_RUN_AT_MS

from ._db import Database
from .test_cli import db_args, installed_cairnq

ROOT = Path(__file__).resolve().parents[1]


def _spawn(db: Database, tmp: Path, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests._approval_child", db.spec(), str(tmp / "effects"), str(stop)],
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


def test_an_approval_survives_a_kill_9_while_waiting_and_finishes_with_the_cli_s_payload(
    db: Database, tmp_path: Path
) -> None:
    with SyncCairnQ(db.backend()) as cq:
        task = cq.submit("approve", {"order": "o-7"}, max_attempts=1)
        first = _spawn(db, tmp_path, tmp_path / "stop-first")
        try:

            def waiting() -> bool:
                waits = cq.events.waits(task.id)
                return bool(waits) and waits[0].state == "waiting"

            _wait_for(waiting)
            parked = cq.get(task.id)
            running = cq.stats()["default"]["running"]
            os.kill(first.pid, signal.SIGKILL)
        finally:
            if first.poll() is None:
                first.kill()
            first.communicate(timeout=30)
        assert parked is not None
        assert (parked.status, parked.attempt, parked.run_at_ms) == ("queued", 0, PARKED_RUN_AT_MS)
        assert running == 0
        second = _spawn(db, tmp_path, tmp_path / "stop-second")
        try:
            sent = installed_cairnq(
                "send", "approval:o-7", '{"approved": true, "by": "ada"}', *db_args(db)
            )
            assert sent.code == 0, sent.err
            assert sent.out.endswith(": woke 1 waiting task\n")

            def ended() -> bool:
                current = cq.get(task.id)
                return current is not None and current.is_terminal

            _wait_for(ended)
        finally:
            (tmp_path / "stop-second").touch()
            _, errors = second.communicate(timeout=60)
        done = cq.get(task.id)
    effects = (tmp_path / "effects").read_text().split()
    assert done is not None and done.status == "succeeded", errors
    assert done.result == {
        "order": "o-7",
        "answer": {"approved": True, "by": "ada"},
        "pid": second.pid,
    }
    assert done.attempt == 1
    assert effects == ["asked", str(first.pid)]
