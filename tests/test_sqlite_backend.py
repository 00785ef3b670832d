"""SQLite specifics: WAL, foreign keys, BEGIN IMMEDIATE, the busy budget, private files."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairnq import DatabaseBusy, SerializationError, SyncCairnQ, TaskContext
from cairnq.backends import SQLiteBackend, open_backend, sqlite_path_from_url
from cairnq.errors import AlreadyExists, InvalidArgument, StoreClosed
from cairnq.protocol import ops as _ops
from cairnq.testing import FakeClock

from ._db import Database


def test_database_file_is_created_private(tmp_path: Path) -> None:
    with SyncCairnQ.sqlite(tmp_path / "sub" / "q.db") as cq:
        cq.submit("job", {})
    mode = stat.S_IMODE(os.stat(tmp_path / "sub" / "q.db").st_mode)
    assert mode == 0o600


def test_wal_and_foreign_keys_are_on(sqlite_db: Database) -> None:
    backend = sqlite_db.backend()
    with SyncCairnQ(backend) as cq:
        cq.submit("job", {})
    conn = backend._take_reader()  # type: ignore[attr-defined]
    assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert conn.execute("pragma foreign_keys").fetchone()[0] == 1


def test_purge_cascades_the_key_row(sqlite_db: Database) -> None:
    clock = FakeClock()
    with sqlite_db.sync_client(clock=clock) as cq:
        task = cq.submit("job", {}, key="k")
        cq.cancel(task.id)
        clock.advance(1)
        assert cq.purge(older_than_ms=0) == [task.id]
        conn = sqlite3.connect(sqlite_db.path)  # type: ignore[arg-type]
        assert conn.execute("select count(*) from cairnq_task_keys").fetchone()[0] == 0
        conn.close()


def _hold_write_lock(path: Path, seconds: float, ready: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("begin immediate")
    ready.set()
    time.sleep(seconds)
    conn.execute("rollback")
    conn.close()


def test_a_write_past_the_busy_budget_raises_database_busy_and_writes_nothing(
    sqlite_db: Database,
) -> None:
    with sqlite_db.sync_client() as cq:
        cq.stats()
    ready = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, 1.0, ready))
    holder.start()
    ready.wait()
    try:
        with sqlite_db.sync_client(busy_timeout_ms=100) as cq:
            with pytest.raises(DatabaseBusy) as busy:
                cq.submit("job", {})
            assert busy.value.retryable
    finally:
        holder.join()
    with sqlite_db.sync_client() as cq:
        assert cq.list() == []


async def test_waiting_for_the_write_lock_never_blocks_the_event_loop(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.client() as cq:
        await cq.submit("seed", {})
        ready = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, 0.5, ready))
        holder.start()
        ready.wait()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        task = await cq.submit("job", {})
        ticker.cancel()
        holder.join()
    assert task.status == "queued"
    assert ticks >= 10


async def test_reads_proceed_while_another_process_holds_the_write_lock(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.client() as cq:
        task = await cq.submit("job", {})
        ready = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, 0.5, ready))
        holder.start()
        ready.wait()
        pending_write = asyncio.ensure_future(cq.submit("blocked", {}))
        reads = 0
        while not pending_write.done():
            got = await cq.get(task.id)
            assert got is not None
            reads += 1
            if reads >= 20:
                break
        write_done_during_reads = pending_write.done()
        await pending_write
        holder.join()
    assert reads >= 20
    assert not write_done_during_reads


def test_group_commit_keeps_one_operations_error_to_itself(sqlite_db: Database) -> None:
    with sqlite_db.sync_client() as cq:
        cq.submit("job", {}, key="taken", conflict="reject")
        results: list[Any] = []

        def submit(i: int) -> None:
            try:
                results.append(cq.submit("job", {"i": i}, key="taken", conflict="reject"))
            except AlreadyExists as exc:
                results.append(exc)

        def plain(i: int) -> None:
            results.append(cq.submit("job", {"i": i}))

        threads = [
            threading.Thread(target=submit if i % 2 else plain, args=(i,)) for i in range(20)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(isinstance(r, AlreadyExists) for r in results) == 10
        assert cq.stats()["default"]["queued"] == 11


def test_a_row_with_json_python_cannot_read_fails_its_task(sqlite_db: Database) -> None:
    with sqlite_db.sync_client() as cq:
        bad = cq.submit("job", {})
        good = cq.submit("job", {})
    conn = sqlite3.connect(sqlite_db.path)  # type: ignore[arg-type]
    conn.execute(
        "update cairnq_tasks set payload = ? where id = ?", ("[" * 1500 + "]" * 1500, bad.id)
    )
    conn.commit()
    conn.close()
    worker = sqlite_db.worker(poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "ran"

    async def main() -> Any:
        async with sqlite_db.client() as client, worker.background():
            done = await client.wait(good.id, timeout_ms=10_000)
            for _ in range(500):
                ref = await client.get_status(bad.id)
                if ref is not None and ref.status == "failed":
                    break
                await asyncio.sleep(0.02)
            return done

    succeeded = asyncio.run(main())
    assert succeeded.result == "ran"
    conn = sqlite3.connect(sqlite_db.path)  # type: ignore[arg-type]
    status, error = conn.execute(
        "select status, error from cairnq_tasks where id = ?", (bad.id,)
    ).fetchone()
    conn.close()
    assert status == "failed"
    assert json.loads(error)["code"] == "invalid_payload"
    with sqlite_db.sync_client() as cq, pytest.raises(SerializationError) as raised:
        cq.get(bad.id)
    assert raised.value.task_id == bad.id


def test_a_closed_backend_refuses_work(sqlite_db: Database) -> None:
    backend = sqlite_db.backend()
    backend.run(_ops.stats(), write=False)
    backend.close()
    with pytest.raises(StoreClosed):
        backend.run(_ops.stats(), write=False)
    with pytest.raises(StoreClosed):
        backend.run(_ops.cancel("task_x"), write=True)


def test_urls_and_paths_open_sqlite(tmp_path: Path) -> None:
    assert sqlite_path_from_url("sqlite:///rel/q.db") == "rel/q.db"
    assert sqlite_path_from_url("sqlite:////abs/q.db") == "/abs/q.db"
    assert isinstance(open_backend(str(tmp_path / "q.db")), SQLiteBackend)
    with pytest.raises(InvalidArgument):
        open_backend("mysql://localhost/x")
    with pytest.raises(InvalidArgument):
        sqlite_path_from_url("sqlite://")


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not a database " * 100)
    from cairnq import DatabaseError

    with pytest.raises(DatabaseError, match="not a usable SQLite database"):
        SyncCairnQ.sqlite(path).open()


def test_synchronous_normal_is_an_option(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "q.db", synchronous="normal")
    backend.open()
    assert backend._write_conn.execute("pragma synchronous").fetchone()[0] == 1  # type: ignore[union-attr]
    backend.close()
    with pytest.raises(InvalidArgument):
        SQLiteBackend(tmp_path / "q.db", synchronous="off")  # type: ignore[arg-type]


def test_reads_from_many_threads_share_a_bounded_set_of_connections(sqlite_db: Database) -> None:
    backend = sqlite_db.backend()
    with SyncCairnQ(backend) as cq:
        task = cq.submit("job", {})
        seen: list[Any] = []
        for _ in range(10):
            threads = [
                threading.Thread(target=lambda: seen.append(cq.get(task.id))) for _ in range(30)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert len(seen) == 300
        assert all(t is not None and t.id == task.id for t in seen)
        assert len(backend._read_conns) <= 8  # type: ignore[attr-defined]


def test_a_backend_used_after_fork_says_so_instead_of_hanging(sqlite_db: Database) -> None:
    backend = sqlite_db.backend()
    backend.run(_ops.stats(), write=False)
    pid = os.fork()
    if pid == 0:
        try:
            backend.run(_ops.cancel("task_x"), write=True)
        except StoreClosed as exc:
            os._exit(0 if "another process" in str(exc) else 3)
        except BaseException:
            os._exit(4)
        os._exit(5)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


async def test_a_heartbeat_stuck_behind_a_lock_flags_the_lease_lost_in_time(
    sqlite_db: Database,
) -> None:
    worker = sqlite_db.worker(poll_interval_ms=20, lease_ms=600, heartbeat_interval_ms=100)
    started = asyncio.Event()
    release = asyncio.Event()
    seen: list[bool] = []

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await release.wait()
        seen.append(ctx.lost_lease)

    async with sqlite_db.client() as cq, worker.background():
        task = await cq.submit("hold", {})
        await asyncio.wait_for(started.wait(), 10)
        ready = threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, 1.5, ready))
        holder.start()
        ready.wait()
        await asyncio.sleep(1.2)
        release.set()
        holder.join()
        # The attempt flagged lost never settles: once its lease expires it is
        # recovered and run again, and the second attempt succeeds.
        done = await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert seen == [True, False]
    assert (done.status, done.attempt) == ("succeeded", 2)


def test_opening_without_migrations_does_not_create_a_missing_file(tmp_path: Path) -> None:
    from cairnq import DatabaseUnavailable

    path = tmp_path / "absent.db"
    with pytest.raises(DatabaseUnavailable, match="no SQLite database"):
        SyncCairnQ.sqlite(path, migrate=False).open()
    assert not path.exists()


async def test_an_idle_worker_wakes_for_another_processs_submit_without_polling(
    sqlite_db: Database,
) -> None:
    import subprocess
    import sys

    worker = sqlite_db.worker(poll_interval_ms=120_000)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "woken"

    root = Path(__file__).resolve().parents[1]
    async with sqlite_db.client() as cq, worker.background():
        await asyncio.sleep(0.3)
        done = subprocess.run(
            [sys.executable, "-m", "tests._child", "submit", sqlite_db.spec(), "1", "0"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        task_id = json.loads(done.stdout)[0]
        result = await cq.wait(task_id, timeout_ms=5_000)
    await worker.close()
    assert (result.status, result.result) == ("succeeded", "woken")


def _watch_threads() -> int:
    return sum(t.name == "cairnq-sqlite-watch" for t in threading.enumerate())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the file watcher uses inotify")
async def test_the_file_watcher_runs_only_while_a_worker_claims_in_the_process(
    sqlite_db: Database,
) -> None:
    before = _watch_threads()
    worker = sqlite_db.worker()

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    async with sqlite_db.client() as cq:
        await cq.submit("job", {})
        only_submitting = _watch_threads()
        async with worker.background():
            claiming = _watch_threads()
        await worker.close()
    closed = _watch_threads()
    assert (only_submitting, claiming, closed) == (before, before + 1, before)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_fresh_wake_hubs_of_its_own() -> None:
    from cairnq._wakeups import hub_for

    parents = hub_for("sqlite:/fork-test")
    release = parents.share_watcher(lambda: None)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        os._exit(0 if hub_for("sqlite:/fork-test") is not parents else 1)
    _, status = os.waitpid(pid, 0)
    release()
    assert os.waitstatus_to_exitcode(status) == 0
