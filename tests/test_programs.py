"""Whole programs in real processes: the reference quick start, serve(), the CLI, the demo."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairnq import SyncCairnQ
from cairnq.worker._signals import SignalCount

from ._streams import Lines

PROGRAMS = Path(__file__).parent / "programs"


def run(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_reference_quick_start_runs_unchanged(tmp_path: Path) -> None:
    done = run([sys.executable, str(PROGRAMS / "quickstart.py")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "call: {'width': 640, 'ok': True}",
        "wait: succeeded {'month': '2026-11', 'rows': 42}",
        "get_by_key: True succeeded",
        "stats: 2",
    ]


def _wait_for(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def test_serve_drains_in_flight_work_on_sigterm_and_exits_zero(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    marker = tmp_path / "started"
    with SyncCairnQ.sqlite(db) as cq:
        slow = cq.submit("slow", {"seconds": 1.0})
        proc = subprocess.Popen(
            [sys.executable, str(PROGRAMS / "serve_worker.py"), str(db), str(marker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(marker)
        proc.send_signal(signal.SIGTERM)
        later = cq.submit("slow", {"seconds": 0.1})
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out.strip() == "served"
        finished = cq.get(slow.id)
        untouched = cq.get(later.id)
    assert finished is not None and finished.status == "succeeded"
    assert finished.result == {"slept": 1.0}
    assert untouched is not None and untouched.status == "queued"


def serve(db: Path, marker: Path, *prefix: str) -> tuple[subprocess.Popen[str], Lines]:
    """``serve_worker.py`` on ``db`` (after ``prefix``, a command that runs it), in a
    process group of its own, and its stderr (the worker's log) followed live."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, str(PROGRAMS / "serve_worker.py"), str(db), str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    return proc, Lines(proc.stderr)


def test_a_second_signal_stops_at_once_and_releases_the_task(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    marker = tmp_path / "started"
    with SyncCairnQ.sqlite(db) as cq:
        slow = cq.submit("slow", {"seconds": 30})
        proc, log = serve(db, marker)
        _wait_for(marker)
        proc.send_signal(signal.SIGTERM)
        log.until("received SIGTERM: draining", 20)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        released = cq.get(slow.id)
    assert released is not None
    assert (released.status, released.attempt, released.error) == ("queued", 0, None)
    said = log.until(" unfinished", 5)
    assert said.startswith("WARNING drain cut short (a second signal, SIGINT) with 1 task ")
    assert "; handing it back to the queue, its attempt uncounted: " in said
    assert not [line for line in log.rest(20) if "drain ended" in line]


def test_a_signal_sent_to_the_worker_and_then_its_process_group_counts_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    marker = tmp_path / "started"
    with SyncCairnQ.sqlite(db) as cq:
        slow = cq.submit("slow", {"seconds": 2.0})
        proc, log = serve(db, marker)
        _wait_for(marker)
        # As GNU timeout does: the process, then its group (which holds the process).
        os.kill(proc.pid, signal.SIGTERM)
        log.until("received SIGTERM: draining", 20)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        finished = cq.get(slow.id)
    assert finished is not None and finished.status == "succeeded"
    log.until("received SIGTERM again within 1s: taken as the same signal", 5)
    assert not [line for line in log.rest(20) if "stopping now" in line or "drain " in line]


def test_a_worker_under_gnu_timeout_drains_when_timeout_passes_on_a_sigterm(
    tmp_path: Path,
) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("GNU timeout is not installed")
    db = tmp_path / "q.db"
    marker = tmp_path / "started"
    with SyncCairnQ.sqlite(db) as cq:
        slow = cq.submit("slow", {"seconds": 1.0})
        # timeout's own SIGTERM goes on to the worker and to the worker's process group.
        proc, log = serve(db, marker, "timeout", "600")
        _wait_for(marker)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        finished = cq.get(slow.id)
    assert finished is not None and finished.status == "succeeded"
    lines = log.rest(20)
    assert not [line for line in lines if "stopping now" in line or "drain " in line], lines


def test_the_installed_console_script_runs_the_demo(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "cairnq"
    if not script.exists():
        pytest.fail("the cairnq console script is not installed next to this Python")
    done = run([str(script), "demo", "--path", str(tmp_path / "demo.db")], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "summary: 8/8 succeeded, 1 after a retry" in done.stdout
    # The demo's deliberate failure is retried: one line, no traceback. (A loaded machine
    # may add a line of its own, such as a late heartbeat; that line is not the retry's.)
    retried = [line for line in done.stderr.splitlines() if "demo.flaky_upload" in line]
    assert len(retried) == 1 and "retrying in" in retried[0], done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_python_dash_m_cairnq_runs_the_demo_in_the_working_directory(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "cairnq", "demo"], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cairnq-demo.db").exists()
    assert "summary: 8/8 succeeded" in done.stdout
    assert os.stat(tmp_path / "cairnq-demo.db").st_mode & 0o077 == 0


def test_cli_errors_print_one_line_without_a_traceback(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "cairnq", "conformance", str(tmp_path / "nope")], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("cairnq: error: no scenario file or directory")
    assert "Traceback" not in done.stderr


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_same_signal_again_within_the_window_is_not_counted() -> None:
    clock = FakeClock()
    count = SignalCount(window_s=1.0, clock=clock)
    assert count.note(signal.SIGTERM) == 1
    clock.now += 0.999
    assert count.note(signal.SIGTERM) is None


def test_the_same_signal_again_after_the_window_is_the_second() -> None:
    clock = FakeClock()
    count = SignalCount(window_s=1.0, clock=clock)
    assert count.note(signal.SIGTERM) == 1
    clock.now += 1.0
    assert count.note(signal.SIGTERM) == 2


def test_another_signal_within_the_window_is_the_second() -> None:
    count = SignalCount(window_s=1.0, clock=FakeClock())
    assert count.note(signal.SIGTERM) == 1
    assert count.note(signal.SIGINT) == 2
