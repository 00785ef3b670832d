"""SQLite under a foreign lock, a full disk and a read-only file (reliability.md 2.E, 2.F)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairnq import DatabaseBusy, DatabaseError, SyncCairnQ

from .._db import Database
from .harness import Config, Run
from .history import load

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("begin immediate")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("rollback")
"""


def test_a_process_holding_the_write_lock_past_the_budget_gives_typed_errors_and_loses_nothing(
    sqlite_db: Database, tmp_path: Path
) -> None:
    config = Config(workers=2, clients=2, tasks_per_client=80, busy_ms=300, seed=9)
    run = Run(sqlite_db, tmp_path, config)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients()
        time.sleep(0.5)
        blocker = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(sqlite_db.path), "1.2"], stdout=subprocess.PIPE
        )
        assert blocker.stdout is not None
        assert blocker.stdout.readline().strip() == b"locked"
        blocker.stdout.close()
        with SyncCairnQ.sqlite(sqlite_db.path, busy_timeout_ms=300) as client:  # type: ignore[arg-type]
            # Reads answer under the foreign lock; no write, the refused submit included,
            # gets through while it is held.
            held = client.stats()
            with pytest.raises(DatabaseBusy):
                client.submit("job", {"n": -1})
            assert client.stats() == held
            assert blocker.poll() is None, "the lock was released before the checks ended"
        assert blocker.wait(timeout=10) == 0
        run.wait_clients()
        run.quiesce()
    finally:
        run.stop()
    report = run.check()
    assert report.valid, report.summary()
    events = load(sorted(tmp_path.glob("*.jsonl")))
    assert [e for e in events if e["event"] == "submit_fail" and e["error"] == "DatabaseBusy"]
    with sqlite_db.sync_client() as client:
        assert [t for t in client.list(limit=1000) if t.payload.get("n") == -1] == []


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)])
    if done.returncode != 0:
        pytest.fail("mounting a tmpfs needs root (CI runs as root); the disk tests cannot run")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_is_a_typed_error_and_everything_drains_once_space_returns(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "small", "3m") as folder:
        db = Database.sqlite(folder / "q.db")
        config = Config(workers=2, clients=1, tasks_per_client=10, mix=(1, 0, 0, 0))
        run = Run(db, tmp_path, config)
        filler = folder / "filler"
        try:
            for _ in range(config.workers):
                run.start_worker()
            errors: list[Exception] = []
            with SyncCairnQ.sqlite(db.path) as client:  # type: ignore[arg-type]
                client.stats()
                with filler.open("wb") as f, contextlib.suppress(OSError):
                    f.write(b"\0" * (4 * 1024 * 1024))
                for i in range(200):
                    try:
                        client.submit("job", {"n": i, "blob": "x" * 20_000})
                    except DatabaseError as exc:
                        errors.append(exc)
                        break
            assert errors, "the disk never filled"
            assert "full" in str(errors[0]) or "disk" in str(errors[0])
            assert errors[0].retryable  # type: ignore[attr-defined]
            assert not isinstance(errors[0], DatabaseBusy)
            filler.unlink()
            run.start_clients()
            run.wait_clients()
            run.quiesce()
        finally:
            run.stop()
        report = run.check()
        assert report.valid, report.summary()
        db.close_all()


def test_a_read_only_database_refuses_writes_with_a_typed_error(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "4m") as folder:
        path = folder / "q.db"
        with SyncCairnQ.sqlite(path) as client:
            task = client.submit("job", {})
        conn = sqlite3.connect(path)
        conn.execute("pragma wal_checkpoint(truncate)")
        conn.close()
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        try:
            with pytest.raises(DatabaseError) as refused, SyncCairnQ.sqlite(path) as client:
                client.submit("job", {})
            assert "read-only" in str(refused.value)
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=False)
        with SyncCairnQ.sqlite(path) as client:
            assert client.get(task.id) is not None
            assert client.stats()["default"]["queued"] == 1
    assert os.geteuid() == 0
