"""Whole programs in real processes: the reference quick start, serve(), the CLI, the demo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairnq import SyncCairnQ

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


def test_a_second_signal_stops_at_once_and_releases_the_task(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    marker = tmp_path / "started"
    with SyncCairnQ.sqlite(db) as cq:
        slow = cq.submit("slow", {"seconds": 30})
        proc = subprocess.Popen(
            [sys.executable, str(PROGRAMS / "serve_worker.py"), str(db), str(marker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(marker)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        released = cq.get(slow.id)
    assert released is not None
    assert (released.status, released.attempt, released.error) == ("queued", 0, None)


def test_the_installed_console_script_runs_the_demo(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "cairnq"
    if not script.exists():
        pytest.fail("the cairnq console script is not installed next to this Python")
    done = run([str(script), "demo", "--path", str(tmp_path / "demo.db")], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "summary: 8/8 succeeded, 1 after a retry" in done.stdout


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
