"""Pause and resume across real worker processes: every process honours them within a second.

Three worker processes run tasks that record their start on the wall clock
(one host, one clock). The pause counts from the moment ``pause_*`` returned,
when it has committed: no task may start more than one second after it, and
after ``resume_*`` every process starts tasks again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cairnq import SyncCairnQ

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = 3
TASKS = 3_000
HONOURED_WITHIN_S = 1.0
PAUSED_FOR_S = 2.0

pytestmark = pytest.mark.slow

Start = tuple[float, str, str, int]  # (time, name, task id, process index)


def _spawn(db: Database, log: Path, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests._flow_child", db.spec(), str(log), str(stop)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _starts(logs: list[Path]) -> list[Start]:
    out: list[Start] = []
    for index, log in enumerate(logs):
        if not log.exists():
            continue
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                out.append((float(parts[0]), parts[1], parts[2], index))
    return out


def _wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def _run_paused(
    db: Database,
    tmp_path: Path,
    pause: Callable[[SyncCairnQ], object],
    resume: Callable[[SyncCairnQ], object],
) -> tuple[list[Start], float, float]:
    """Drive three workers through a pause and a resume; returns the starts and both instants."""
    logs = [tmp_path / f"starts-{i}.log" for i in range(PROCESSES)]
    stop = tmp_path / "stop"
    with db.sync_client() as cq:
        cq.submit_many(
            [{"task": "tick" if i % 2 else "tock", "payload": {"i": i}} for i in range(TASKS)]
        )
        procs = [_spawn(db, log, stop) for log in logs]
        try:
            # Every process is claiming before the pause.
            _wait_for(lambda: len({s[3] for s in _starts(logs)}) == PROCESSES)
            pause(cq)
            paused_at = time.time()
            time.sleep(PAUSED_FOR_S)
            resume(cq)
            resumed_at = time.time()
            _wait_for(lambda: len({s[3] for s in _starts(logs) if s[0] > resumed_at}) == PROCESSES)
        finally:
            stop.touch()
            for proc in procs:
                _, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{err}"
    return _starts(logs), paused_at, resumed_at


def test_a_paused_queue_stops_new_claims_on_every_process_within_a_second(
    db: Database, tmp_path: Path
) -> None:
    starts, paused_at, resumed_at = _run_paused(
        db,
        tmp_path,
        lambda cq: cq.pauses.pause_queue("default"),
        lambda cq: cq.pauses.resume_queue("default"),
    )
    late = [s for s in starts if paused_at + HONOURED_WITHIN_S < s[0] < resumed_at]
    assert late == []
    assert len(starts) < TASKS  # work was waiting the whole time the queue was paused


def test_a_resumed_queue_is_claimed_from_again_by_every_process(
    db: Database, tmp_path: Path
) -> None:
    starts, _, resumed_at = _run_paused(
        db,
        tmp_path,
        lambda cq: cq.pauses.pause_queue("default"),
        lambda cq: cq.pauses.resume_queue("default"),
    )
    assert {s[3] for s in starts if s[0] > resumed_at} == set(range(PROCESSES))


def test_a_paused_task_name_stops_its_claims_on_every_process_while_others_run(
    db: Database, tmp_path: Path
) -> None:
    starts, paused_at, resumed_at = _run_paused(
        db,
        tmp_path,
        lambda cq: cq.pauses.pause_task("tick"),
        lambda cq: cq.pauses.resume_task("tick"),
    )
    window = [s for s in starts if paused_at + HONOURED_WITHIN_S < s[0] < resumed_at]
    assert [s for s in window if s[1] == "tick"] == []
    assert {s[3] for s in window if s[1] == "tock"} == set(range(PROCESSES))
