"""SQLite under a foreign lock, a full disk and a read-only file, checked by the history checker."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairnq import DatabaseBusy, DatabaseError, SyncCairnQ
from cairnq.worker._worker import CLAIM_ERROR_BACKOFF_S

from .._db import Database
from .checker import Report
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


# Takes the write lock when told (a line on stdin) and holds it until told again.
HOLD_LOCK_WHEN_TOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
print("ready", flush=True)
sys.stdin.readline()
conn.execute("begin immediate")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("rollback")
"""


def _busy_clients(folder: Path) -> set[int]:
    """The client processes that recorded a submit refused with DatabaseBusy."""
    events = load(sorted(folder.glob("client-*.jsonl")))
    return {
        e["pid"] for e in events if e["event"] == "submit_fail" and e["error"] == "DatabaseBusy"
    }


def _submitting_clients(folder: Path) -> set[int]:
    events = load(sorted(folder.glob("client-*.jsonl")))
    return {e["pid"] for e in events if e["event"] == "submit_ok"}


def _until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_a_process_holding_the_write_lock_past_the_budget_gives_typed_errors_and_loses_nothing(
    sqlite_db: Database, tmp_path: Path
) -> None:
    """Another process takes the write lock once every client is submitting, and holds it
    until every client has had a submit refused (its 300 ms budget spent)."""
    config = Config(workers=2, clients=2, tasks_per_client=80, busy_ms=300, seed=9)
    run = Run(sqlite_db, tmp_path, config)
    blocker = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK_WHEN_TOLD, str(sqlite_db.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert blocker.stdin is not None and blocker.stdout is not None
    try:
        assert blocker.stdout.readline().strip() == "ready"
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients(gap_ms=20)
        _until(
            lambda: len(_submitting_clients(tmp_path)) == config.clients,
            "every client submitted",
        )
        blocker.stdin.write("lock\n")
        blocker.stdin.flush()
        assert blocker.stdout.readline().strip() == "locked"
        with SyncCairnQ.sqlite(sqlite_db.path, busy_timeout_ms=300) as client:  # type: ignore[arg-type]
            # Reads answer under the foreign lock; no write, the refused submit included,
            # gets through while it is held.
            held = client.stats()
            with pytest.raises(DatabaseBusy):
                client.submit("job", {"n": -1})
            _until(
                lambda: len(_busy_clients(tmp_path)) == config.clients,
                "every client had a submit refused",
            )
            assert client.stats() == held
        blocker.stdin.write("release\n")
        blocker.stdin.close()
        assert blocker.wait(timeout=10) == 0
        run.wait_clients()
        run.quiesce()
    finally:
        if blocker.poll() is None:
            blocker.kill()
            blocker.wait()
        for pipe in (blocker.stdin, blocker.stdout):
            pipe.close()
        run.stop()
    report = run.check()
    assert report.valid, report.summary()
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


def fill(path: Path) -> None:
    """Write ``path`` until its file system has no byte left."""
    with path.open("ab", buffering=0) as f:
        for chunk in (64 * 1024, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * chunk)
    with pytest.raises(OSError, match="No space") as full:
        path.with_name("probe").write_bytes(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC


OUTAGE_S = 3.0
BLOB_TASKS = 20
FREED_BYTES = 512 * 1024
POLL_MS = 100
# Space is back: the claim backoff in progress ends (at most its cap), then a few
# poll intervals for the claims and settlements of 20 short tasks.
DRAIN_BOUND_S = CLAIM_ERROR_BACKOFF_S[1] + 30 * POLL_MS / 1000


@dataclass
class DiskOutage:
    outage: tuple[float, float]
    claim_errors: list[dict[str, Any]]
    drained_after_s: float | None
    statuses: dict[str, int]
    workers_started: int
    report: Report


@pytest.fixture(scope="module")
def disk_outage(tmp_path_factory: pytest.TempPathFactory) -> DiskOutage:
    """One worker, 20 queued tasks of 20 KB, a disk full for 3 s, then 512 KiB freed.

    The worker is paused (SIGSTOP) while the tasks go in and the disk fills, so
    every one of them is still queued when its claims start failing.
    """
    folder = tmp_path_factory.mktemp("outage")
    with tmpfs(folder / "small", "3m") as disk:
        db = Database.sqlite(disk / "q.db")
        run = Run(db, folder, Config(workers=1, clients=0, poll_ms=POLL_MS))
        drained_after: float | None = None
        try:
            with db.sync_client() as client:
                run.start_worker()
                first = client.submit("job", {"n": -1})
                assert client.wait(first.id, timeout_ms=30_000).status == "succeeded"
                run.signal_worker(0, signal.SIGSTOP)
                for i in range(BLOB_TASKS):
                    client.submit("job", {"n": i, "blob": "x" * 20_000})
                freed = disk / "freed"
                freed.write_bytes(b"\0" * FREED_BYTES)
                fill(disk / "ballast")
                run.signal_worker(0, signal.SIGCONT)
                started = time.monotonic()
                time.sleep(OUTAGE_S)
                ended = time.monotonic()
                freed.unlink()
                while time.monotonic() - ended < DRAIN_BOUND_S:
                    stats = client.stats()["default"]
                    if stats["queued"] + stats["running"] == 0:
                        drained_after = time.monotonic() - ended
                        break
                    time.sleep(0.05)
                statuses = client.stats()["default"]
        finally:
            run.stop()
        # The same worker's drain is this run's quiescence: a task still live fails INV-2.
        run.quiesced = drained_after is not None
        report = run.check()
        db.close_all()
    errors = [e for e in load(sorted(folder.glob("*.jsonl"))) if e["event"] == "claim_error"]
    return DiskOutage(
        outage=(started, ended),
        claim_errors=errors,
        drained_after_s=drained_after,
        statuses=statuses,
        workers_started=len(run.workers),
        report=report,
    )


def test_claims_on_a_full_disk_wait_out_the_error_backoff_whatever_wakes_the_worker(
    disk_outage: DiskOutage,
) -> None:
    started, ended = disk_outage.outage
    during = [e for e in disk_outage.claim_errors if started <= e["t"] <= ended]
    assert len(during) >= 2, "the claims never failed: the disk did not fill"
    assert {e["error"] for e in during} == {"DatabaseError"}
    floor = CLAIM_ERROR_BACKOFF_S[0]
    assert len(during) <= OUTAGE_S / floor + 1, (
        f"{len(during)} failed claim transactions in {OUTAGE_S} s"
    )
    times = [e["t"] for e in disk_outage.claim_errors]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= floor * 0.99, f"failed claims {min(gaps):.4f} s apart"


def test_the_same_worker_drains_every_task_once_space_returns_after_a_full_disk(
    disk_outage: DiskOutage,
) -> None:
    assert disk_outage.drained_after_s is not None, (
        f"not drained {DRAIN_BOUND_S} s after space returned: {disk_outage.statuses}"
    )
    assert disk_outage.workers_started == 1
    assert disk_outage.statuses["succeeded"] == BLOB_TASKS + 1
    assert disk_outage.report.valid, disk_outage.report.summary()


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
