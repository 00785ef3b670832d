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
