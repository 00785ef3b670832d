"""The soak counts a fault only when it took effect on a live process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

from . import soak


def _process(seconds: float) -> subprocess.Popen[bytes]:
    """A stand-in worker: its own process group, as the harness starts workers."""
    return subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({seconds})"], start_new_session=True
    )


def _exited(seconds: float = 0) -> subprocess.Popen[bytes]:
    """A stand-in worker that has exited and is not reaped yet (a zombie)."""
    proc = _process(seconds)
    deadline = time.monotonic() + 10
    while soak._state(proc.pid) != "Z":
        assert time.monotonic() < deadline, "the stand-in never exited"
        time.sleep(0.01)
    return proc


def _run(proc: subprocess.Popen[bytes]) -> Any:
    return SimpleNamespace(workers={0: proc})


def test_a_kill_counts_when_it_killed_a_live_worker() -> None:
    proc = _process(30)
    assert soak._kill(_run(proc), 0) is True
    assert proc.returncode == -signal.SIGKILL


def test_a_kill_of_a_worker_that_already_exited_does_not_count() -> None:
    proc = _process(0)
    proc.wait()
    assert soak._kill(_run(proc), 0) is False


def test_a_kill_of_an_exited_worker_not_yet_reaped_does_not_count() -> None:
    proc = _exited()
    assert soak._kill(_run(proc), 0) is False


def test_a_pause_counts_when_it_stopped_a_live_worker_and_resumes_it() -> None:
    proc = _process(30)
    try:
        assert soak._pause(_run(proc), 0, 0.05) is True
        deadline = time.monotonic() + 5
        while soak._state(proc.pid) == "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert soak._state(proc.pid) in {"S", "R"}
    finally:
        proc.kill()
        proc.wait()


def test_a_pause_of_a_worker_that_already_exited_does_not_count() -> None:
    proc = _exited()
    assert soak._pause(_run(proc), 0, 0.05) is False
    proc.wait()


def _summary(**changes: Any) -> dict[str, Any]:
    """A soak summary that did everything its mix asks for, with ``changes`` applied."""
    summary: dict[str, Any] = {
        "workers_exited_unkilled": {},
        "faults": {"by_kind": {"kill": 3, "lock": 2}, "chosen_by_kind": {"kill": 3, "lock": 2}},
        "schedule_slots": 100,
        "workflows": {"gathers": 5, "dependents": 40},
        "limited_runs": 20,
        "waits": {"slept": 30, "waited": 25},
        "retried": 9,
        "purged": 300,
    }
    summary.update(changes)
    return summary


def test_a_soak_that_reached_every_feature_with_every_fault_falls_short_of_nothing() -> None:
    assert soak.shortfalls(_summary()) == []


def test_a_soak_whose_workers_died_by_themselves_before_any_fault_falls_short() -> None:
    summary = _summary(
        workers_exited_unkilled={"0": 1},
        faults={"by_kind": {"kill": 0, "lock": 2}, "chosen_by_kind": {"kill": 4, "lock": 2}},
        schedule_slots=0,
    )
    assert soak.shortfalls(summary) == [
        "worker 0 exited by itself (code 1)",
        "no kill fault took effect",
        "no schedule slots",
    ]
