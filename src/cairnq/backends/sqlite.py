"""The embedded backend: one SQLite file, the standard library's ``sqlite3``.

Writes go through the only write connection, held under one lock (the
group-commit writer, ``GroupWriter`` in ``_sqlite_writer.py``). A writer
thread takes every write operation waiting in its queue and runs them in one
``BEGIN IMMEDIATE`` transaction, each inside its own savepoint (group commit):
one operation's error rolls back only that operation, and every caller learns
its outcome only after COMMIT. A blocking caller that finds the writer idle
(nothing queued, nothing running) runs its operation the same way, as a group
of one, on its own thread under the same lock, instead of handing it to the
writer thread and waiting for it; a blocking caller that finds the writer busy
joins its queue and so its next group. Async callers always use the queue, so
the event loop never waits for a lock or a disk flush. Reads run on separate
connections (WAL lets them proceed while a write is open), in the calling
thread for sync callers and in a small thread pool for async ones, so neither
a write nor another process's lock ever blocks the event loop.

Two file-level hazards are handled before every write transaction. Space: the
WAL gives disk space back only through a checkpoint, and SQLite's automatic
one runs after a commit that pushed the WAL past 1000 pages, so on a nearly
full disk the WAL can swallow the last free bytes and every later commit fails
for good. While the file system is short of space, or a write just failed for
lack of it, the writing thread checkpoints (``TRUNCATE``) before each
transaction. Identity: a file deleted, renamed or replaced under an open
connection keeps working for that connection alone, so each write transaction
first checks that the path still names the file it opened, and a backend that
finds it gone refuses every operation from then on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .. import _checks
from .._clock import SYSTEM_CLOCK, Clock
from .._filewatch import watch_database
from .._wakeups import WakeHub, hub_for
from ..errors import (
    CairnQError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    StoreClosed,
    UnsupportedBackend,
)
from ..protocol import steps as _steps
from ..protocol.statements import Dialect, statements
from ..protocol.steps import NOW, Call, Op, Rows, Script, drive
from ._registry import opening, register_backend
from ._sqlite_errors import _translate
from ._sqlite_files import (
    _check_file_mode,
    _create_file,
    _file_path,
    _path,
    split_script,
)
from ._sqlite_writer import _STOP, GroupWriter
from .base import PLAIN_VALUES, Inspection, LoopBinding, bind

T = TypeVar("T")

Synchronous = Literal["full", "normal"]
# Reads look at the file's identity at most this often (every write transaction does).
FILE_CHECK_S = 1.0


@dataclass(frozen=True)
class _Work:
    """A step of ``arun_around``'s operation: call ``fn`` with the writer's connection."""

    fn: Callable[[sqlite3.Connection], Any]


def _around(work: Callable[[sqlite3.Connection], Any], after: Callable[[Any], Op[T]]) -> Op[T]:
    value = yield _Work(work)  # type: ignore[misc]
    return (yield from after(value))


class SQLiteBackend(GroupWriter):
    """A SQLite database file, shared safely by threads and processes.

    Its async side belongs to the event loop that first used it, as on every
    backend: from another loop, calls raise ``EventLoopMismatch``.

    Args:
        path: The database file (or a ``sqlite:///`` URL, a ``file:`` URI,
            ``":memory:"``). Created if missing; its directory must exist (none
            is created). ``sqlite:tasks.db`` and other misspelt URLs are refused.
        busy_timeout_ms: How long a write waits for another process's write lock
            before failing with ``DatabaseBusy``. Waiting happens in the writer
            thread, never on the event loop.
        synchronous: ``"full"`` (default) survives power loss; ``"normal"`` is
            faster and stays consistent, but may lose the last commits on power loss.
        clock: Where ``now_ms`` comes from (a ``FakeClock`` in tests).
        migrate: Apply pending migrations on open (default); otherwise only
            check the protocol version.
        repair: With ``migrate``, apply again the recorded migrations whose
            tables, indexes or triggers are missing, instead of refusing to
            open with ``SchemaIncomplete`` (see ``cairnq.migrate``).
        readers: Threads serving async reads.
        file_mode: Permission bits of a database file this backend creates:
            ``0o600`` (default: only its owner may open it), e.g. ``0o660`` to
            share it with a group, applied whatever the umask; ``None`` follows
            the umask like ``sqlite3`` (``0o666`` less the umask). SQLite gives
            the ``-wal`` and ``-shm`` files the database file's mode. An
            existing file keeps its mode.

    Raises:
        InvalidArgument: a bad option, an empty path, or a malformed ``sqlite:`` path.
    """

    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "full",
        clock: Clock | None = None,
        migrate: bool = True,
        repair: bool = False,
        readers: int = 4,
        file_mode: int | None = 0o600,
    ) -> None:
        self.path = _path(os.fspath(path))
        if not self.path:
            raise InvalidArgument("SQLite path must not be empty")
        self.file_mode = _check_file_mode(file_mode)
        self.busy_timeout_ms = _checks.check_int(busy_timeout_ms, "busy_timeout_ms", low=0)
        if synchronous not in ("full", "normal"):
            raise InvalidArgument(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self.synchronous = synchronous
        self.clock: Clock = clock or SYSTEM_CLOCK
        self.migrate = migrate
        self.repair = _checks.check_repair(repair, migrate)
        self._memory = self.path == ":memory:" or "mode=memory" in self.path
        # Where the file is on disk, absolute so a later chdir changes nothing.
        self._file = None if self._memory else os.path.abspath(_file_path(self.path))
        self._file_id: tuple[int, int] | None = None
        self._file_checked_at = 0.0
        self._lost: DatabaseUnavailable | None = None
        self._short_of_space = False
        self._ran_out = False
        self._space_checked_at = 0.0
        identity = f"memory:{id(self)}" if self._memory else os.path.realpath(self.path)
        self.hub: WakeHub = hub_for("sqlite:" + identity)
        self._statements = statements("sqlite")
        self._state: Literal["new", "open", "closed"] = "new"
        self._open_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._stop_watching: Callable[[], None] | None = None
        self._write_conn: sqlite3.Connection | None = None
        # Held while a group runs on the write connection, by the writer thread or by a
        # blocking caller running its own operation; ``_writer_busy`` is true from the
        # moment the writer thread takes a job off its queue until its group is done.
        self._write_lock = threading.Lock()
        self._writer_busy = False
        self._readers = concurrent.futures.ThreadPoolExecutor(
            max_workers=_checks.check_int(readers, "readers", low=1, high=64),
            thread_name_prefix="cairnq-sqlite-read",
        )
        # Read connections are pooled, not per thread: a server that reads from many
        # short-lived threads must not collect one open connection per thread.
        self._read_slots = threading.BoundedSemaphore(self._readers._max_workers + 4)
        self._idle_readers: list[sqlite3.Connection] = []
        self._read_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._pid = os.getpid()
        self._loops = LoopBinding()
        self.migrations_applied: list[str] = []

    def __repr__(self) -> str:
        return f"<SQLiteBackend {self.path!r} {self._state}>"

    def _closed(self) -> StoreClosed:
        """What a use after ``close()`` raises."""
        if self._memory:
            return StoreClosed(
                "this SQLite backend was closed, and its in-memory database went with it; "
                "reopening would silently start an empty one: open a new backend instead"
            )
        return StoreClosed("this SQLite backend was closed")

    @property
    def label(self) -> str:
        """``SQLite`` and the file's name."""
        return f"SQLite {os.path.basename(self.path)}" if self.path else "SQLite"

    @property
    def description(self) -> str:
        """The database file's absolute path (``:memory:`` and URIs as given).

        Absolute, so two processes that name "the same" relative path from
        different directories show that they are on different files.
        """
        return self._file or self.path

    def inspect(self) -> Inspection:
        """Read the migration ledger through a read-only connection; creates no file.

        Raises:
            DatabaseUnavailable: the file cannot be read.
            DatabaseError: the path is a directory, or the file is no SQLite database.
        """
        path = self.path
        if not os.path.exists(path):
            return Inspection(exists=False)
        if os.path.isdir(path):
            raise DatabaseError(f"{path} is a directory, not a database file")
        import urllib.parse

        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:

                def read(name: str) -> list[Any]:
                    statement = self._statements[name]
                    return conn.execute(statement.text).fetchall()

                if not read("ledger_exists")[0][0]:
                    return Inspection(exists=True)
                rows = read("ledger_applied")
                objects = read("schema_objects")
        except sqlite3.OperationalError as exc:
            raise DatabaseUnavailable(f"cannot read SQLite database {path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{path} is not a cairnq database ({exc})") from exc
        return Inspection(
            exists=True,
            applied={str(name): int(at) for name, at in rows},
            objects=frozenset((str(kind), str(name)) for kind, name in objects),
        )

    # --- lifecycle --------------------------------------------------------------------

    def open(self) -> None:
        if self._state == "open":
            return
        with self._open_lock:
            if self._state != "new":
                if self._state == "closed":
                    raise self._closed()
                return
            conn = self._connect(writer=True)
            try:
                self._migrate(conn)
                self._file_id = None if self._file is None else self._identity()
                # From here on the writer waits for the write lock in ``_begin``, its way.
                _wait_for_locks(conn, 0)
            except BaseException:
                conn.close()
                raise
            self._write_conn = conn
            self._writer = threading.Thread(
                target=self._write_loop, name="cairnq-sqlite-write", daemon=True
            )
            self._writer.start()
            self._state = "open"
        if not self._memory:
            # Commits of other processes reach this process's claim loops through the file.
            hub, path = self.hub, self.path
            self._stop_watching = hub.share_watcher(
                lambda: watch_database(path, lambda: hub.poke(claimers_only=True))
            )

    async def aopen(self) -> None:
        self._loops.check()
        if self._state == "closed":
            raise self._closed()
        if self._state != "open":
            await asyncio.get_running_loop().run_in_executor(self._readers, self.open)

    def close(self) -> None:
        with self._open_lock:
            if self._state == "closed":
                return
            self._state = "closed"
            if self._writer is not None:
                self._jobs.put(_STOP)
        if self._writer is not None:
            self._writer.join()
        if self._stop_watching is not None:
            self._stop_watching()
        self._readers.shutdown(wait=True)
        with self._conns_lock:
            conns, self._idle_readers = self._idle_readers, []
            for conn in conns:
                self._read_conns.remove(conn)
        for conn in conns:
            conn.close()

    async def aclose(self) -> None:
        self._loops.check_close()  # nothing here needs the owning loop, once it is closed
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    # --- running operations -----------------------------------------------------------

    def check_file(self) -> None:
        """Check that the path still names the database file this backend opened.

        A SQLite file deleted, renamed or replaced while open keeps working for
        the connections that have it open, and for them alone: what they write
        is invisible to every other process and gone when they close. Each write
        transaction and each new read connection runs this check first, other
        reads at most once a second, and a worker on its poll timer. Once it
        fails, every operation on this backend raises the same error; open a new
        backend to use the file now at the path. One ``stat`` call; a no-op for
        in-memory databases.

        Raises:
            DatabaseUnavailable: the file was deleted, renamed or replaced
                (``retryable`` is false: this backend can never reach it again).
            StoreClosed: the backend was closed.
        """
        if self._state == "closed":
            raise self._closed()
        self._verify_file()

    def _verify_file(self) -> None:
        if self._lost is not None:
            raise self._lost
        if self._file_id is None:
            return
        self._file_checked_at = time.monotonic()
        if self._identity() != self._file_id:
            self._lost = DatabaseUnavailable(
                f"SQLite database {self.path!r} was deleted, renamed or replaced while open; "
                "this process stops using the file it still holds (anything written to it "
                "would be seen by no other process and lost). Open a new client or worker "
                "to use the file now at that path",
                retryable=False,
            )
            raise self._lost

    def _identity(self) -> tuple[int, int] | None:
        """(device, inode) of the file at the path; None when nothing is there."""
        assert self._file is not None
        try:
            st = os.stat(self._file)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            # Cannot look (a permission change): no evidence the file went away.
            return self._file_id
        return (st.st_dev, st.st_ino)

    def run(self, op: Op[T], *, write: bool) -> T:
        self._ensure_open()
        if write or self._memory:
            if self._write_lock.acquire(blocking=False):
                try:
                    if not self._writer_busy and self._jobs.empty():
                        return self._run_here(op)
                finally:
                    self._write_lock.release()
            result: T = self._submit(op).result()
            return result
        return self._read(op)

    async def arun(self, op: Op[T], *, write: bool) -> T:
        self._loops.check()
        if self._lost is not None:
            raise self._lost
        if self._state != "open":
            await self.aopen()
            self._ensure_open()
        if write or self._memory:
            return await self._asubmit(op)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read, op)

    async def arun_around(
        self, work: Callable[[sqlite3.Connection], Any], after: Callable[[Any], Op[T]]
    ) -> T:
        """Run ``work(conn)`` and then ``after(value)`` in one write transaction (transactional
        steps).

        ``work`` runs on the writer thread with the writer's connection, inside the
        write transaction (in a savepoint of its own): its statements on the
        application's tables in this file commit exactly when ``after`` does. It
        must be a plain function, must not commit, roll back or call cairnq, and
        holds every other write of this database while it runs. Whatever raises
        rolls back its changes with the rest.
        """
        return await self.arun(_around(work, after), write=True)

    def run_on(self, conn: Any, op: Op[T]) -> T:
        """Run ``op`` on the application's ``sqlite3`` connection, in its transaction.

        The connection must be open on this backend's file (Django's, for
        instance). Nothing is committed here when the connection is inside a
        transaction: the task exists when the application commits and is gone if
        it rolls back; the operation runs in a savepoint, so its own failure
        leaves the application's transaction usable. Outside a transaction it
        runs in a ``BEGIN IMMEDIATE`` transaction of its own and commits.
        Wake-ups are not published (workers find the task on their next poll).

        Args:
            conn: An open ``sqlite3.Connection`` on this backend's database file.
            op: The operation (a submit).

        Returns:
            The operation's value.

        Raises:
            UnsupportedBackend: ``conn`` is not a ``sqlite3`` connection (a
                psycopg connection given to the SQLite backend).
            InvalidArgument: ``conn`` is open on another database file.

        Example::

            with sqlite3.connect("app.db", isolation_level=None) as conn:
                conn.execute("begin immediate")
                cq.submit("email.send", {}, conn=conn)
                conn.execute("commit")
        """
        self._ensure_open()
        if not isinstance(conn, sqlite3.Connection):
            raise UnsupportedBackend(
                f"the SQLite backend runs submit(conn=...) on a sqlite3 connection, "
                f"not on {_kind_of_connection(conn)}; use the backend of that connection's "
                "database (CairnQ.postgres for a psycopg connection)"
            )
        self._check_same_file(conn)

        def execute(step: Call | Script) -> Rows:
            cur = conn.cursor()
            cur.row_factory = sqlite3.Row
            if isinstance(step, Script):
                raise InvalidArgument("a script cannot run on the application's connection")
            statement = self._statements[step.statement]
            return cur.execute(
                statement.text, bind(statement, step.params, self._adapt, unchanged=PLAIN_VALUES)
            ).fetchall()

        joined = conn.in_transaction
        try:
            if joined:
                conn.execute("savepoint cairnq_op")
            else:
                conn.execute(self.begin_write)
            try:
                value, _ = drive(op, execute)
            except BaseException:
                if joined:
                    conn.execute("rollback to cairnq_op")
                    conn.execute("release cairnq_op")
                elif conn.in_transaction:
                    conn.execute("rollback")
                raise
            if joined:
                conn.execute("release cairnq_op")
            else:
                conn.execute("commit")
        except CairnQError:
            raise
        except BaseException as exc:
            raise _translate(exc, self.busy_timeout_ms, self._file) from exc
        return value

    async def arun_on(self, conn: Any, op: Op[T]) -> T:
        """``run_on`` from a coroutine; blocks the loop for the (short) write itself.

        A ``sqlite3`` connection belongs to the thread that made it, so the
        statements run right here rather than in a thread of the pool.
        """
        return self.run_on(conn, op)

    def _check_same_file(self, conn: sqlite3.Connection) -> None:
        rows = conn.execute("pragma database_list").fetchall()
        main = next((row[2] for row in rows if row[1] == "main"), "")
        here = self._file
        if here is None or not main:
            same = here is None and not main
        else:
            same = os.path.realpath(main) == os.path.realpath(here)
        if not same:
            raise InvalidArgument(
                f"the connection given to submit(conn=...) is open on "
                f"{main or 'an in-memory database'!r}, "
                f"not on this backend's database {self.description!r}; the task would be "
                "written where no worker of this backend looks"
            )

    def _ensure_open(self) -> None:
        if self._lost is not None:
            raise self._lost
        if os.getpid() != self._pid:
            raise StoreClosed(
                "this SQLite backend was created in another process (before a fork); "
                "open a new one in this process"
            )
        if self._state == "closed":
            raise self._closed()
        if self._state == "new":
            self.open()

    def _read(self, op: Op[T]) -> T:
        if time.monotonic() - self._file_checked_at >= FILE_CHECK_S:
            self._verify_file()
        with self._read_slots:
            conn = self._take_reader()
            try:
                value, _ = drive(op, lambda step: self._execute(conn, step))
            except BaseException as exc:
                raise _translate(exc, self.busy_timeout_ms, self._file) from exc
            finally:
                self._return_reader(conn)
        return value

    def _take_reader(self) -> sqlite3.Connection:
        with self._conns_lock:
            if self._state == "closed":
                raise self._closed()
            if self._idle_readers:
                return self._idle_readers.pop()
        # A new connection opens whatever the path names now: never another file.
        self._verify_file()
        conn = self._connect(writer=False)
        try:
            self._verify_file()
        except DatabaseUnavailable:
            conn.close()
            raise
        with self._conns_lock:
            self._read_conns.append(conn)
        return conn

    def _return_reader(self, conn: sqlite3.Connection) -> None:
        with self._conns_lock:
            if self._state != "closed":
                self._idle_readers.append(conn)
                return
            if conn in self._read_conns:
                self._read_conns.remove(conn)
        conn.close()

    # --- statements -------------------------------------------------------------------

    def _execute(self, conn: sqlite3.Connection, step: Call | Script) -> Rows:
        if isinstance(step, _Work):
            # The application's statements wait for locks as the backend was told to.
            _wait_for_locks(conn, self.busy_timeout_ms)
            try:
                return step.fn(conn)  # type: ignore[no-any-return]
            finally:
                _wait_for_locks(conn, 0)
        if isinstance(step, Script):
            for sql in split_script(step.source):
                conn.execute(sql)
            return []
        statement = self._statements[step.statement]
        params = bind(statement, step.params, self._adapt, unchanged=PLAIN_VALUES)
        return conn.execute(statement.text, params).fetchall()

    def _adapt(self, name: str, value: Any) -> Any:
        if value is NOW:
            return self.clock.now_ms()
        if isinstance(value, (list, tuple)):
            return json.dumps(value, ensure_ascii=False)
        return value

    # --- connections and migrations ---------------------------------------------------

    def _connect(self, *, writer: bool) -> sqlite3.Connection:
        if writer and not self._memory:
            if self.migrate:
                assert self._file is not None
                _create_file(self._file, self.file_mode)
            elif not os.path.exists(self.path):
                raise DatabaseUnavailable(
                    f"no SQLite database at {self.path!r} (opened with migrate=False, "
                    "so it is not created)"
                )
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
                uri=self.path.startswith("file:"),
            )
        except sqlite3.Error as exc:
            raise _translate(exc, self.busy_timeout_ms, self._file) from exc
        try:
            conn.row_factory = sqlite3.Row
            _wait_for_locks(conn, self.busy_timeout_ms)
            conn.execute("pragma foreign_keys = on")
            if writer:
                if not self._memory:
                    self._enable_wal(conn)
                conn.execute(f"pragma synchronous = {self.synchronous}")
            else:
                conn.execute("pragma query_only = on")
        except BaseException as exc:
            conn.close()
            raise _translate(exc, self.busy_timeout_ms, self._file) from exc
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Changing the journal mode bypasses the busy handler, so retry by hand.
        deadline = time.monotonic() + max(self.busy_timeout_ms, 50) / 1000
        while True:
            try:
                mode = conn.execute("pragma journal_mode = wal").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                continue
            if str(mode).lower() != "wal":
                raise DatabaseError(f"SQLite refused WAL mode for {self.path!r} (got {mode})")
            return

    def _migrate(self, conn: sqlite3.Connection) -> None:
        def run(step: _steps.SetupStep) -> Any:
            try:
                if step.write:
                    conn.execute("begin immediate")
                value, _ = drive(step.op, lambda call: self._execute(conn, call))
                if step.write:
                    conn.execute("commit")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("rollback")
                raise _translate(exc, self.busy_timeout_ms, self._file) from exc
            return value

        setup = opening().setup("sqlite", migrate=self.migrate, repair=self.repair)
        self.migrations_applied = _steps.run_setup(setup, run)


def _wait_for_locks(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Set how long ``conn``'s statements wait for another connection's lock."""
    conn.execute(f"pragma busy_timeout = {int(busy_timeout_ms)}")


def _open(url: str, **options: Any) -> SQLiteBackend:
    return SQLiteBackend(_path(url), **options)


@contextlib.contextmanager
def scratch_file_backend(url: str, clock: Clock | None = None) -> Iterator[SQLiteBackend]:
    """A backend on a new file in a temporary folder, removed afterwards (``url`` unused)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cairnq-scratch-") as folder:
        backend = SQLiteBackend(os.path.join(folder, "scratch.db"), clock=clock)
        try:
            yield backend
        finally:
            backend.close()


register_backend(
    ["sqlite", ""], _open, dialect="sqlite", location=_path, scratch=scratch_file_backend
)


def _kind_of_connection(conn: Any) -> str:
    """A connection's kind in words, for errors about the wrong one."""
    kind = type(conn)
    return f"a {kind.__module__.split('.')[0]} {kind.__name__}"
