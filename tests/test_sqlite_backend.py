"""SQLite specifics: WAL, foreign keys, BEGIN IMMEDIATE, the busy budget, private files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairnq import (
    DatabaseBusy,
    DatabaseError,
    DatabaseUnavailable,
    SerializationError,
    SQLiteStore,
    SyncCairnQ,
    TaskContext,
    Worker,
    kernel,
)
from cairnq._filewatch import TRAILING_MS
from cairnq.backends import SQLiteBackend, open_backend, sqlite_path_from_url
from cairnq.errors import AlreadyExists, InvalidArgument, StoreClosed
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import eventually, results_of


def test_database_file_is_created_private(tmp_path: Path) -> None:
    with SyncCairnQ.sqlite(tmp_path / "q.db") as cq:
        cq.submit("job", {})
    mode = stat.S_IMODE(os.stat(tmp_path / "q.db").st_mode)
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


def _hold_write_lock(
    path: Path, ready: threading.Event, release: threading.Event, seconds: float = 10.0
) -> None:
    """Hold the write lock from ``ready`` until ``release`` is set (at most ``seconds``)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("begin immediate")
    ready.set()
    release.wait(seconds)
    conn.execute("rollback")
    conn.close()


def test_a_write_past_the_busy_budget_raises_database_busy_and_writes_nothing(
    sqlite_db: Database,
) -> None:
    with sqlite_db.sync_client() as cq:
        cq.stats()
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, ready, release))
    holder.start()
    ready.wait()
    try:
        with sqlite_db.sync_client(busy_timeout_ms=100) as cq:
            with pytest.raises(DatabaseBusy) as busy:
                cq.submit("job", {})
            assert busy.value.retryable
    finally:
        release.set()
        holder.join()
    with sqlite_db.sync_client() as cq:
        assert cq.list() == []


def test_a_write_held_up_by_another_connection_goes_through_once_the_lock_is_free(
    sqlite_db: Database,
) -> None:
    with sqlite_db.sync_client() as cq:
        cq.stats()
    ready = threading.Event()
    # Held for 0.3 s whatever happens (the write must wait it out): the hold is what is tested.
    holder = threading.Thread(
        target=_hold_write_lock, args=(sqlite_db.path, ready, threading.Event(), 0.3)
    )
    holder.start()
    ready.wait()
    try:
        with sqlite_db.sync_client(busy_timeout_ms=5000) as cq:
            task = cq.submit("job", {})
            assert cq.get(task.id) is not None
    finally:
        holder.join()


async def test_waiting_for_the_write_lock_never_blocks_the_event_loop(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.client() as cq:
        await cq.submit("seed", {})
        ready, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, ready, release))
        holder.start()
        ready.wait()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                if ticks == 10:  # the loop ran on while the submit waited: free the lock
                    release.set()
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
        ready, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, ready, release))
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
        release.set()
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
    backend.run(kernel.stats(), write=False)
    backend.close()
    with pytest.raises(StoreClosed):
        backend.run(kernel.stats(), write=False)
    with pytest.raises(StoreClosed):
        backend.run(kernel.cancel("task_x"), write=True)


async def test_reopening_a_closed_in_memory_store_is_refused_as_it_would_start_empty() -> None:
    store = SQLiteStore(":memory:")
    await store.connect()
    await store.submit(name="job")
    await store.close()
    with pytest.raises(StoreClosed, match="silently start"):
        await store.connect()
    with pytest.raises(StoreClosed, match="silently start"):
        await store.stats()


def test_urls_and_paths_open_sqlite(tmp_path: Path) -> None:
    assert sqlite_path_from_url("sqlite:///rel/q.db") == "rel/q.db"
    assert sqlite_path_from_url("sqlite:////abs/q.db") == "/abs/q.db"
    assert sqlite_path_from_url("sqlite:///:memory:") == ":memory:"
    assert isinstance(open_backend(f"sqlite:///{tmp_path}/q.db"), SQLiteBackend)
    assert isinstance(open_backend(f"file:{tmp_path}/q.db"), SQLiteBackend)
    assert isinstance(open_backend(":memory:"), SQLiteBackend)
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
    backend.run(kernel.stats(), write=False)
    pid = os.fork()
    if pid == 0:
        try:
            backend.run(kernel.cancel("task_x"), write=True)
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
    worker = sqlite_db.worker(poll_interval_ms=20, lease_ms=300, heartbeat_interval="50ms")
    started = asyncio.Event()
    release = asyncio.Event()
    seen: list[bool] = []
    contexts: list[TaskContext] = []

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        contexts.append(ctx)
        started.set()
        await release.wait()
        seen.append(ctx.lost_lease)

    async with sqlite_db.client() as cq, worker.background():
        task = await cq.submit("hold", {})
        await asyncio.wait_for(started.wait(), 10)
        ready, unlock = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_write_lock, args=(sqlite_db.path, ready, unlock))
        holder.start()
        ready.wait()
        # The renewals are stuck behind the lock; the lease runs out and is flagged.
        await eventually(lambda: contexts[0].lost_lease, "the lease flagged lost")
        release.set()
        unlock.set()
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
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    worker = sqlite_db.worker(poll_interval_ms=120_000)
    probes = results_of(monkeypatch, "probe")

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "woken"

    root = Path(__file__).resolve().parents[1]
    async with sqlite_db.client() as cq, worker.background():
        # Its claim found nothing: idle for the poll interval.
        await eventually(lambda: probes and not any(probes), "an idle worker")
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


class _WatchedBurst:
    """A file watcher on ``q.db-wal`` in ``folder``; ``run`` writes a burst to that file."""

    def __init__(self, folder: Path) -> None:
        from cairnq._filewatch import FileWatcher

        self.calls: list[float] = []
        self._called = threading.Condition()
        self._path = folder / "q.db-wal"
        self._path.touch()
        self._watcher = FileWatcher(str(folder), {"q.db-wal"}, self._on_change)

    def _on_change(self) -> None:
        with self._called:
            self.calls.append(time.monotonic())
            self._called.notify_all()

    def run(self, times: int) -> tuple[float, float]:
        """Write ``times`` times, each write its own event, then wait for the watcher's
        last trailing call and stop it. Returns when the burst began and the moment just
        before its last write (the watcher cannot have read that one sooner)."""
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
            try:
                began = last = time.monotonic()
                for _ in range(times):
                    last = time.monotonic()
                    os.write(fd, b"frame")
            finally:
                os.close(fd)
            settled = last + sum(TRAILING_MS) / 1000
            with self._called:
                assert self._called.wait_for(lambda: self.calls[-1:] >= [settled], 10)
        finally:
            self._watcher.close()
        return began, last


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the file watcher uses inotify")
def test_a_burst_of_writes_wakes_waiters_about_once_per_trailing_gap_not_once_per_write(
    tmp_path: Path,
) -> None:
    burst = _WatchedBurst(tmp_path)
    began, last = burst.run(5_000)
    # One call at the burst's first write, then at most one per TRAILING_MS[0] while
    # it lasts, then the trailing calls; a call per read of the events would be hundreds.
    during = [call for call in burst.calls if began <= call]
    assert len(during) <= (last - began) * 1000 / TRAILING_MS[0] + 2 + len(TRAILING_MS) + 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the file watcher uses inotify")
def test_waiters_are_woken_once_per_trailing_gap_after_a_bursts_last_write(
    tmp_path: Path,
) -> None:
    burst = _WatchedBurst(tmp_path)
    _, last = burst.run(200)
    # The commit a write belongs to is visible only after its sync, which writes nothing
    # more: a waiter has to look again once the file has been quiet, the first time a
    # trailing gap after the last write.
    quiet = [call for call in burst.calls if call >= last + TRAILING_MS[0] / 1000]
    assert len(quiet) >= len(TRAILING_MS)


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


# --- paths, directories, permissions and file modes -------------------------------------------

CLI = Path(sys.executable).parent / "cairnq"
MISSPELT = [
    ("sqlite:tasks.db", "did you mean sqlite:///tasks.db (relative) or sqlite:////abs/path.db?"),
    ("sqlite:/srv/q/tasks.db", "did you mean sqlite:////srv/q/tasks.db (absolute)"),
    ("SQLite:tasks.db", "did you mean sqlite:///tasks.db (relative)"),
    ("sqlite://tasks.db", "did you mean sqlite:///tasks.db (relative)?"),
]


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    return subprocess.run(
        [str(CLI), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "open_it",
    [
        pytest.param(lambda url: SyncCairnQ(url), id="SyncCairnQ(url)"),
        pytest.param(lambda url: SyncCairnQ.sqlite(url), id="SyncCairnQ.sqlite"),
        pytest.param(lambda url: open_backend(url), id="open_backend"),
    ],
)
@pytest.mark.parametrize(("url", "suggestion"), MISSPELT, ids=[u for u, _ in MISSPELT])
def test_a_misspelt_sqlite_url_is_refused_with_the_right_spelling_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_it: Any, url: str, suggestion: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument) as refused:
        open_it(url).open()
    assert suggestion in str(refused.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("url", "suggestion"), MISSPELT[:2], ids=[u for u, _ in MISSPELT[:2]])
def test_the_cli_refuses_a_misspelt_sqlite_url_in_one_line_and_creates_nothing(
    tmp_path: Path, url: str, suggestion: str
) -> None:
    done = run_cli(tmp_path, "--db", url, "migrate")
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert suggestion in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "open_it",
    [
        pytest.param(lambda p: SyncCairnQ.sqlite(p), id="SyncCairnQ.sqlite"),
        pytest.param(lambda p: SyncCairnQ(f"sqlite:///{p}"), id="sqlite-url"),
        pytest.param(lambda p: SyncCairnQ(str(p)), id="plain-path"),
    ],
)
def test_a_database_in_a_missing_directory_is_refused_naming_it_and_no_directory_is_made(
    tmp_path: Path, open_it: Any
) -> None:
    path = tmp_path / "no" / "such" / "q.db"
    with pytest.raises(DatabaseUnavailable) as refused, open_it(path) as cq:
        cq.stats()
    assert f"the directory {path.parent} does not exist" in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_worker_on_a_missing_directory_is_refused_and_no_directory_is_made(
    tmp_path: Path,
) -> None:
    worker = Worker.sqlite(tmp_path / "new" / "q.db")
    worker.register("job", lambda ctx: None)
    with pytest.raises(DatabaseUnavailable, match="does not exist"):
        asyncio.run(worker.client.open())
    asyncio.run(worker.close())
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_a_database_in_a_missing_directory_and_makes_none(tmp_path: Path) -> None:
    path = tmp_path / "nonexistent" / "dir" / "x.db"
    done = run_cli(tmp_path, "--db", str(path), "migrate")
    assert done.returncode != 0
    assert f"the directory {path.parent} does not exist" in done.stderr
    assert list(tmp_path.iterdir()) == []


@contextlib.contextmanager
def as_another_user() -> Iterator[None]:
    """Run the body as an unprivileged user: ``nobody`` when root (who may open anything)."""
    if os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can enter (pytest's own is private to its user)."""
    folder = Path(tempfile.mkdtemp(prefix="cairnq-perm-"))
    folder.chmod(0o755)
    SQLiteBackend(folder / "warm.db").close()  # modules loaded while we may still read them
    with SyncCairnQ.sqlite(folder / "warm.db") as cq:
        cq.stats()
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o700)
        shutil.rmtree(folder)


def make_database(path: Path, mode: int) -> None:
    with SyncCairnQ.sqlite(path) as cq:
        cq.submit("job", {})
    path.chmod(mode)


def test_a_database_file_this_user_cannot_read_says_permission_denied_naming_the_file(
    shared_dir: Path,
) -> None:
    path = shared_dir / "q.db"
    make_database(path, 0o000)
    with as_another_user(), pytest.raises(DatabaseUnavailable) as refused:
        SyncCairnQ.sqlite(path).open()
    message = str(refused.value)
    assert "unable to open database file" not in message
    assert (
        f"permission denied: this user (uid {65534 if os.geteuid() == 0 else os.geteuid()})"
        in message
    )
    assert f"cannot read or write the file {path} " in message
    assert "file_mode" in message


def test_a_read_only_database_file_says_permission_denied_naming_the_file(
    shared_dir: Path,
) -> None:
    path = shared_dir / "q.db"
    make_database(path, 0o444)
    with as_another_user(), pytest.raises(DatabaseError) as refused, SyncCairnQ.sqlite(path) as cq:
        cq.submit("job", {})
    message = str(refused.value)
    assert f"SQLite database {str(path)!r} is read-only for this process" in message
    assert "permission denied: this user (uid" in message
    assert f"cannot write the file {path} (owner uid {os.stat(path).st_uid}, mode 0444;" in message


def test_a_directory_this_user_cannot_write_says_permission_denied_naming_the_directory(
    shared_dir: Path,
) -> None:
    folder = shared_dir / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    with as_another_user(), pytest.raises(DatabaseUnavailable) as refused:
        SyncCairnQ.sqlite(folder / "q.db").open()
    message = str(refused.value)
    assert "permission denied: this user (uid" in message
    assert f"cannot write in the directory {folder} (owner uid" in message
    assert "q.db-wal" in message
    assert not (folder / "q.db").exists()


def test_a_directory_this_user_cannot_enter_says_permission_denied_naming_the_directory(
    shared_dir: Path,
) -> None:
    folder = shared_dir / "closed"
    folder.mkdir()
    make_database(folder / "q.db", 0o600)
    folder.chmod(0o000)
    with as_another_user(), pytest.raises(DatabaseUnavailable) as refused:
        SyncCairnQ.sqlite(folder / "q.db").open()
    assert f"cannot enter the directory {folder}" in str(refused.value)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs two users")
def test_another_user_opening_a_default_private_database_is_told_permission_denied_and_file_mode(
    shared_dir: Path,
) -> None:
    path = shared_dir / "q.db"
    with SyncCairnQ.sqlite(path) as cq:
        cq.submit("job", {})
    with as_another_user(), pytest.raises(DatabaseUnavailable) as refused:
        SyncCairnQ.sqlite(path).open()
    message = str(refused.value)
    assert "cannot read or write the file" in message
    assert "owner uid 0, mode 0600; see the file_mode option" in message


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs two users")
def test_a_file_mode_0660_database_is_shared_by_two_users_of_one_group_wal_and_shm_included(
    shared_dir: Path,
) -> None:
    folder = shared_dir / "shared"
    folder.mkdir()
    os.chown(folder, 0, 65534)
    folder.chmod(0o2770)  # the group may write here; new files take the directory's group
    path = folder / "q.db"
    with SyncCairnQ.sqlite(path, file_mode=0o660) as owner:
        owner.submit("job", {})
        with as_another_user(), SyncCairnQ.sqlite(path) as other:
            other.submit("job", {})
            seen = other.stats()["default"]["queued"]
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.glob("q.db*")}
    assert seen == 2
    assert modes == {"q.db": 0o660, "q.db-wal": 0o660, "q.db-shm": 0o660}


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def file_modes(path: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.glob(path.name + "*")}


@pytest.mark.parametrize(
    "open_it",
    [
        pytest.param(lambda p, **kw: SyncCairnQ.sqlite(p, **kw), id="SyncCairnQ.sqlite"),
        pytest.param(lambda p, **kw: SyncCairnQ(str(p), **kw), id="SyncCairnQ(path)"),
        pytest.param(lambda p, **kw: SyncCairnQ(SQLiteBackend(p, **kw)), id="SQLiteBackend"),
    ],
)
@pytest.mark.parametrize(
    ("mask", "file_mode", "expected"),
    [
        pytest.param(0o022, 0o660, 0o660, id="umask-022-file_mode-660"),
        pytest.param(0o077, 0o640, 0o640, id="umask-077-file_mode-640"),
        pytest.param(0o002, None, 0o664, id="umask-002-file_mode-None"),
        pytest.param(0o027, None, 0o640, id="umask-027-file_mode-None"),
    ],
)
def test_file_mode_sets_the_database_wal_and_shm_modes_or_none_follows_the_umask(
    tmp_path: Path, open_it: Any, mask: int, file_mode: int | None, expected: int
) -> None:
    path = tmp_path / "q.db"
    with umask(mask), open_it(path, file_mode=file_mode) as cq:
        cq.submit("job", {})
        cq.get_status(cq.list()[0].id)
        while_open = file_modes(path)
    assert while_open == {"q.db": expected, "q.db-wal": expected, "q.db-shm": expected}


def test_a_worker_takes_file_mode_too(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    worker = Worker.sqlite(path, file_mode=0o660)
    worker.register("job", lambda ctx: None)
    asyncio.run(worker.client.open())
    asyncio.run(worker.close())
    assert stat.S_IMODE(path.stat().st_mode) == 0o660


def test_file_mode_leaves_an_existing_file_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_database(path, 0o640)
    with SyncCairnQ.sqlite(path, file_mode=0o666) as cq:
        cq.stats()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("bad", [0o200, 0o1777, -1, "0660", True, 6.0])
def test_file_mode_refuses_modes_the_owner_cannot_use(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="file_mode"):
        SQLiteBackend(tmp_path / "q.db", file_mode=bad)
    assert list(tmp_path.iterdir()) == []
