"""The SQLite backend's group-commit writer: every write runs on the one write connection.

A writer thread takes every write operation waiting in its queue (up to
``MAX_GROUP``) and runs them in one ``BEGIN IMMEDIATE`` transaction, each inside
its own savepoint: one operation's error rolls back only that operation, and
every caller learns its outcome only after COMMIT; wake-ups are published after
COMMIT, for the operations that committed. A blocking caller that finds the
writer idle runs its operation the same way, as a group of one, on its own
thread under the same lock (``_run_here``). ``BEGIN IMMEDIATE`` waits for another
process's write lock in fine steps (``_begin``). Before each group the file's
identity is checked, and while the disk is short of space (or a write just
found none) the WAL is checkpointed (``TRUNCATE``) so it cannot swallow the last
free bytes. ``SQLiteBackend`` (``backends/sqlite.py``) mixes ``GroupWriter`` in
and holds the state it runs on: the queue, the lock, the write connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._crashpoints import ARMED, PAUSE_ARMED, around_commit, pausepoint
from .._wakeups import WakeHub
from ..errors import StoreClosed
from ..protocol.steps import Call, Emit, Op, Rows, Script, drive, is_single_statement
from ._sqlite_errors import _busy, _out_of_space, _translate
from ._sqlite_files import LOW_SPACE_BYTES, _free_bytes

T = TypeVar("T")

log = logging.getLogger("cairnq.sqlite")

MAX_GROUP = 128
SPACE_CHECK_S = 1.0
# The writer's waits for another process's write lock: first and longest pause.
BEGIN_FIRST_PAUSE_S = 0.00005
BEGIN_MAX_PAUSE_S = 0.002


class _LoopResult:
    """Where the writer puts an awaited operation's outcome: the awaiting loop's own
    future, settled on that loop (``asyncio.wrap_future`` without a concurrent
    future and its chaining in between).

    It answers the writer as a ``concurrent.futures.Future`` would: an operation
    whose caller was cancelled before the writer took it up is not run.
    """

    __slots__ = ("_done", "_loop", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self._done = False

    def set_running_or_notify_cancel(self) -> bool:
        return not self.future.cancelled()

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        self._done = True
        # A closed loop has nobody left awaiting.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle, self.future, value, error)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


@dataclass
class _Job:
    op: Op[Any]
    future: concurrent.futures.Future[Any] | _LoopResult = field(
        default_factory=concurrent.futures.Future
    )


_STOP = object()


class GroupWriter:
    """The write path of ``SQLiteBackend``: the writer thread's loop, its groups and
    their transactions, and a blocking caller's group of one.

    The attributes below are set by ``SQLiteBackend.__init__``; the methods under
    ``TYPE_CHECKING`` are the backend's own.
    """

    # Every write transaction takes the write lock up front: a deferred one that reads
    # first fails with SQLITE_BUSY_SNAPSHOT, without waiting, when another writer commits.
    begin_write = "begin immediate"

    busy_timeout_ms: int
    hub: WakeHub
    _file: str | None
    _state: Literal["new", "open", "closed"]
    _open_lock: threading.Lock
    _pid: int
    _jobs: queue.SimpleQueue[Any]
    _write_conn: sqlite3.Connection | None
    _write_lock: threading.Lock
    _writer_busy: bool
    _short_of_space: bool
    _ran_out: bool
    _space_checked_at: float

    if TYPE_CHECKING:

        def _closed(self) -> StoreClosed: ...

        def _ensure_open(self) -> None: ...

        def _verify_file(self) -> None: ...

        def _execute(self, conn: sqlite3.Connection, step: Call | Script) -> Rows: ...

    def _submit(self, op: Op[T]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(_Job(op, future))
        return future

    def _asubmit(self, op: Op[T]) -> asyncio.Future[T]:
        """``_submit`` for a caller on an event loop: a future of that loop."""
        result = _LoopResult(asyncio.get_running_loop())
        self._enqueue(_Job(op, result))
        return result.future

    def _enqueue(self, job: _Job) -> None:
        if os.getpid() != self._pid:
            self._ensure_open()
        with self._open_lock:
            if self._state == "closed":
                raise self._closed()
            self._jobs.put(job)

    def _run_here(self, op: Op[T]) -> T:
        """Run ``op`` as a group of one on this thread; the caller holds ``_write_lock``.

        The writer thread's own steps (file check, ``BEGIN IMMEDIATE``, savepoint,
        error translation, wake-ups after COMMIT), so the two paths keep the same
        guarantees. A transaction left open by an interruption (Ctrl-C in the
        middle) is rolled back before the lock is let go.
        """
        conn = self._write_conn
        if self._state == "closed" or conn is None:
            raise self._closed()
        try:
            self._before_group(conn)
            [(value, error)] = self._transact(conn, [op])
        except BaseException as exc:
            translated = self._write_error(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("rollback")
        if error is not None:
            raise error
        result: T = value
        return result

    def _write_loop(self) -> None:
        conn = self._write_conn
        assert conn is not None
        stopping = False
        while not stopping:
            first = self._jobs.get()
            if first is _STOP:
                break
            # Set before waiting for the lock, so that a blocking caller arriving now
            # queues behind this group instead of overtaking it.
            self._writer_busy = True
            with self._write_lock:
                batch: list[_Job] = [first]
                while len(batch) < MAX_GROUP:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is _STOP:
                        stopping = True
                        break
                    batch.append(job)
                try:
                    self._before_group(conn)
                    self._run_group(conn, batch)
                except BaseException as exc:
                    self._fail_stranded(conn, batch, exc)
                finally:
                    self._writer_busy = False
        with self._write_lock:
            # ``close`` marked the backend closed first: a blocking caller that takes
            # the lock from now on refuses instead of using this connection.
            self._drain_after_stop()
            conn.close()

    def _before_group(self, conn: sqlite3.Connection) -> None:
        """Refuse to write into a file that left its path; make room in the WAL when short."""
        if self._file is None:
            return
        self._verify_file()
        now = time.monotonic()
        if now - self._space_checked_at >= SPACE_CHECK_S:
            self._space_checked_at = now
            self._short_of_space = self._ran_out or _free_bytes(self._file) < LOW_SPACE_BYTES
            self._ran_out = False
        if self._short_of_space:
            self._checkpoint(conn)

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Copy the WAL into the database and truncate it, without waiting for anyone.

        Best effort: a reader or another process's writer in the way, or a database
        that cannot grow yet, leaves it for the next transaction.
        """
        try:
            # The write connection's busy timeout is 0 outside a transaction (``_begin``).
            conn.execute("pragma wal_checkpoint(truncate)").fetchall()
        except sqlite3.Error as exc:
            log.debug("checkpoint on a disk short of space failed: %s", exc)

    def _write_error(self, exc: BaseException) -> BaseException:
        """``_translate`` for the writer, which also notes a write that found no room."""
        if _out_of_space(exc):
            self._ran_out = self._short_of_space = True
        return _translate(exc, self.busy_timeout_ms, self._file)

    def _fail_stranded(
        self, conn: sqlite3.Connection, batch: list[_Job], exc: BaseException
    ) -> None:
        """The group itself broke (not one operation): fail what it left unresolved, carry on."""
        error = self._write_error(exc)
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("rollback")
        for job in batch:
            if not job.future.done():
                job.future.set_exception(error)

    def _drain_after_stop(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not _STOP and job.future.set_running_or_notify_cancel():
                job.future.set_exception(self._closed())

    def _run_group(self, conn: sqlite3.Connection, batch: list[_Job]) -> None:
        """Run a group of write operations in one transaction; resolve each after COMMIT."""
        jobs = [job for job in batch if job.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        outcomes = self._transact(conn, [job.op for job in jobs])
        for job, (value, err) in zip(jobs, outcomes, strict=True):
            if err is None:
                job.future.set_result(value)
            else:
                job.future.set_exception(err)

    def _transact(
        self, conn: sqlite3.Connection, ops: list[Op[Any]]
    ) -> list[tuple[Any, BaseException | None]]:
        """Run ``ops`` in one transaction, each in a savepoint; (value, error) for each.

        Wake-ups are published only after COMMIT, and only for operations that
        committed. Raises only when the group itself broke (a savepoint could not
        be taken): the caller then fails every operation and rolls back.
        """
        if PAUSE_ARMED is not None:
            for op in ops:
                pausepoint(f"before_write:{_op_name(op)}")
        try:
            self._begin(conn)
        except BaseException as exc:
            error = self._write_error(exc)
            return [(None, error) for _ in ops]
        outcomes: list[tuple[Any, list[Emit], BaseException | None]] = []
        aborted: BaseException | None = None
        for op in ops:
            if aborted is not None:
                outcomes.append((None, [], aborted))
                continue
            # A single statement that fails undoes itself; anything longer gets a savepoint.
            guarded = not is_single_statement(op)
            if guarded:
                conn.execute("savepoint op")
            try:
                value, emits = drive(op, lambda step: self._execute(conn, step))
            except BaseException as exc:
                error = self._write_error(exc)
                if conn.in_transaction:
                    if guarded:
                        conn.execute("rollback to op")
                        conn.execute("release op")
                    outcomes.append((None, [], error))
                else:
                    aborted = error
                    outcomes = [(None, [], error) for _ in outcomes]
                    outcomes.append((None, [], error))
                continue
            if guarded:
                conn.execute("release op")
            outcomes.append((value, emits, None))
        if aborted is None:
            if ARMED is not None:
                for op in ops:
                    around_commit("before_commit", _op_name(op))
            try:
                conn.execute("commit")
            except BaseException as exc:
                error = self._write_error(exc)
                if conn.in_transaction:
                    conn.execute("rollback")
                outcomes = [(None, [], err or error) for _, _, err in outcomes]
        if ARMED is not None and aborted is None:
            for op in ops:
                around_commit("after_commit", _op_name(op))
        for _, emits, err in outcomes:
            if err is None and emits:
                self.hub.publish(emits)
        return [(value, err) for value, _, err in outcomes]

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting for another process's write lock in fine steps.

        SQLite's own busy handler sleeps 1, 2, 5, 10... ms between tries, so two
        processes trading the lock every millisecond or two lose most of their time
        asleep. The first try does not wait; later ones sleep from 50 µs up to 2 ms,
        until ``busy_timeout_ms`` has passed.

        The write connection keeps a busy timeout of 0 once opened (``open``), so no
        statement sets it per transaction: SQLite's handler would only ever wait
        for the write lock, and every statement after ``BEGIN IMMEDIATE`` holds it.
        """
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        pause = BEGIN_FIRST_PAUSE_S
        while True:
            try:
                conn.execute(self.begin_write)
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, BEGIN_MAX_PAUSE_S)


def _op_name(op: Op[Any]) -> str:
    return str(getattr(op, "__name__", ""))
