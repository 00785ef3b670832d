"""What both halves of the PostgreSQL backend share: settings, helpers and per-half hooks.

``_pg_async.py`` holds the async paths (the source); the blocking ones in
``_pg_sync.py`` are generated from them; ``PostgresBackend`` in
``backends/postgres.py`` mixes both in. The hooks here are where the two halves
genuinely differ (locks, the event-loop check, the LISTEN task, the op timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import os
import re
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from .._extras import missing_extra

try:
    import psycopg as psycopg
    import psycopg_pool as psycopg_pool
    from psycopg import sql as sql
    from psycopg.rows import dict_row as dict_row
    from psycopg.types.string import TextLoader
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("PostgreSQL support", "postgres", "psycopg, psycopg-pool") from exc

from .. import _checks
from .._checks import MAX_IDENTIFIER_BYTES as MAX_IDENTIFIER_BYTES
from .._checks import SCHEMA_NAME as SCHEMA_NAME
from .._checks import check_schema as check_schema
from .._clock import Clock
from .._crashpoints import ARMED
from .._loop_end import close_at_loop_end
from .._wakeups import LISTEN_LINGER_S, WakeHub, hub_for
from ..durations import Duration
from ..errors import (
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    UnsupportedBackend,
)
from ..protocol.statements import Dialect, statements
from ..protocol.steps import NOW, Call, Emit, Op, Setup, is_single_statement
from . import _pg_timeouts
from ._pg_errors import translate as _translate
from ._pg_timeouts import LISTEN_HEALTH, OP_TIMEOUT, LoopDeadlines, timeouts
from ._pg_timeouts import LISTEN_HEALTH_S as LISTEN_HEALTH_S
from ._registry import opening
from .base import PLAIN_VALUES, LoopBinding, bind

log = logging.getLogger("cairnq.postgres")

T = TypeVar("T")

LISTEN_CHANNELS = ("cairnq_queued", "cairnq_done")
# A dead peer is noticed within about 20 s instead of the kernel's two hours.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 2,
}
# How long the LISTEN connection waits for its own probe notification before
# concluding that notifications are not delivered (a module constant so tests can shorten it).
LISTEN_PROBE_TIMEOUT_S = 5.0

AsyncSource = psycopg_pool.AsyncConnectionPool | psycopg.AsyncConnection
SyncSource = psycopg_pool.ConnectionPool | psycopg.Connection
Source = str | AsyncSource | SyncSource


def _joins_callers_transaction(conn: Any) -> bool:
    """Whether statements on ``conn`` become part of a transaction the caller will end.

    A non-autocommit connection with no transaction open yet starts one implicitly
    at the first statement, and the caller commits or rolls it back. Wrapping the
    work in ``conn.transaction()`` there would commit it on its own.
    """
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return not conn.autocommit and idle


def _require_psycopg_connection(conn: Any) -> None:
    """Refuse ``submit(conn=...)`` with anything but a psycopg connection, naming what it got.

    Raises:
        UnsupportedBackend: ``conn`` is a ``sqlite3`` connection or anything else.
    """
    if isinstance(conn, (psycopg.Connection, psycopg.AsyncConnection)):
        return
    kind = type(conn)
    hint = (
        "; a SQLite database needs the SQLite backend (CairnQ.sqlite on the same file)"
        if kind.__module__ == "sqlite3"
        else ""
    )
    raise UnsupportedBackend(
        f"the PostgreSQL backend runs submit(conn=...) on a psycopg connection, not on "
        f"a {kind.__module__.split('.')[0]} {kind.__name__}{hint}"
    )


def _op_name(op: Op[Any]) -> str:
    return str(getattr(op, "__name__", ""))


def _autocommits(op: Op[Any], conn: Any) -> bool:
    """Whether write ``op`` runs as one statement that commits as it runs (no transaction)."""
    return is_single_statement(op) and _runs_apart(op, conn)


def _runs_apart(op: Op[Any], conn: Any) -> bool:
    """Whether write ``op`` may commit statements as they run on ``conn`` (``Call.apart``):
    on autocommit, unless its ``before_commit`` crash point (a commit to come) is armed."""
    return bool(conn.autocommit) and (ARMED is None or f"before_commit:{_op_name(op)}" != ARMED)


def _json_as_text(adapters: Any) -> None:
    """Read json/jsonb as text: the domain parses JSON itself, the same way on every backend."""
    adapters.register_loader("jsonb", TextLoader)
    adapters.register_loader("json", TextLoader)


# Connections whose own adapters read json as text (cairnq's pools): their cursors
# need no adapters of their own, which psycopg would copy from the connection's.
_JSON_AS_TEXT: weakref.WeakSet[Any] = weakref.WeakSet()


def _configure_json(conn: Any) -> None:
    _json_as_text(conn.adapters)
    _JSON_AS_TEXT.add(conn)


def _cursor_json_as_text(conn: Any, cur: Any) -> None:
    """Read json as text on ``cur``, unless its connection already does."""
    if conn not in _JSON_AS_TEXT:
        _json_as_text(cur.adapters)


def _has_columns(cur: Any) -> bool:
    """Whether the statement returned a row set (cheaper than ``cur.description``)."""
    result = cur.pgresult
    return result is not None and result.nfields > 0


ASYNC_POOL_NAME = "cairnq"
SYNC_POOL_NAME = "cairnq-sync"
# While a pool cannot connect, cairnq looks why every CONNECT_POLL_S (a refusal for good
# ends the wait), warns once per CONNECT_RETRY_S, and gives up after connect_timeout.
CONNECT_POLL_S = 0.25
CONNECT_RETRY_S = 5.0
OPEN_TIMEOUT_S = 30.0
_POOL_SERIAL = itertools.count(1)
_CONNECT_FAILED = "error connecting in %r: %s"
_SERVER_FAILED = re.compile(r"connection to server (?:at|on) .*? failed: (.*)$")


# Connection failures no wait mends: the server answered and refused this database,
# role or credential. A worker stops on them instead of retrying.
_REFUSED_FOR_GOOD = re.compile(
    r"does not exist|authentication failed|no pg_hba\.conf entry|no password supplied"
    r"|permission denied",
    re.IGNORECASE,
)


def refused_for_good(reason: str) -> bool:
    """Whether a connection failure's ``reason`` is a misconfiguration, not an outage."""
    return bool(_REFUSED_FOR_GOOD.search(reason))


def _reason(error: object) -> str:
    """The first line of a connection error, without psycopg's preamble."""
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    line = line.removeprefix("connection failed: ")
    found = _SERVER_FAILED.search(line)
    return found.group(1) if found else line


class _PoolConnectErrors(logging.Filter):
    """Takes psycopg.pool's warnings about cairnq's own pools failing to connect.

    psycopg_pool logs each failed attempt, several lines long, as a warning; cairnq
    keeps the last reason per pool and reports it once per ``CONNECT_RETRY_S``
    instead. Pools of the application's own are left alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.msg != _CONNECT_FAILED or not isinstance(args, tuple) or len(args) != 2:
            return True
        name = str(args[0])
        if not name.startswith((ASYNC_POOL_NAME + "#", SYNC_POOL_NAME + "#")):
            return True
        self.last[name] = _reason(args[1])
        return False

    def forget(self, name: str) -> None:
        """Drop what pool ``name`` met: it connected, or it is closed."""
        self.last.pop(name, None)


POOL_CONNECT_ERRORS = _PoolConnectErrors()
logging.getLogger("psycopg.pool").addFilter(POOL_CONNECT_ERRORS)
ASYNC_WRAPS_OTHER = (
    "this backend wraps a synchronous psycopg pool or connection; "
    "use the sync client, or pass an async pool"
)
SYNC_WRAPS_OTHER = (
    "this backend wraps an async psycopg pool or connection; "
    "use the async client, or pass a sync pool"
)
ASYNC_NO_CONNECTION = "no async PostgreSQL connection is available"
SYNC_NO_CONNECTION = "no PostgreSQL connection is available"


class _Deadline:
    """The op timeout of one blocking operation, shared by the connections it drives on.

    A blocking psycopg call cannot be abandoned the way an awaited one is. When
    the time is up, a connection from cairnq's own pool (or the application's
    pool, which replaces it) has its socket shut down: the call fails at once,
    and the connection is closed so the pool discards it. A single connection
    the application handed over is never broken: its query is cancelled on the
    server instead.
    """

    def __init__(self, seconds: float, *, may_sever: bool) -> None:
        self.expires_at = time.monotonic() + seconds
        self.may_sever = may_sever
        self.fired = False

    def watching(self, conn: psycopg.Connection[Any]) -> _Watch:
        """A context in which ``conn`` is watched (armed on entry; closed at its end if severed)."""
        return _Watch(self, conn)


class _Watch:
    """One connection watched until its operation ends or its deadline passes."""

    __slots__ = ("_conn", "_lock", "deadline", "done", "fired")

    def __init__(self, deadline: _Deadline, conn: psycopg.Connection[Any]) -> None:
        self.deadline = deadline
        self._conn = conn
        self._lock = threading.Lock()
        self.done = False
        self.fired = False

    def __enter__(self) -> None:
        _WATCHDOG.arm(self)

    def __exit__(self, *exc: object) -> None:
        if self.end() and self.deadline.may_sever:
            with contextlib.suppress(Exception):
                self._conn.close()

    def end(self) -> bool:
        """Stop watching; whether the deadline fired on this connection."""
        with self._lock:
            self.done = True
            return self.fired

    def fire(self) -> None:
        """Called by the watchdog once the deadline passed."""
        with self._lock:
            if self.done:
                return
            self.fired = self.deadline.fired = True
            conn = self._conn
            if self.deadline.may_sever:
                with contextlib.suppress(OSError, psycopg.Error):
                    sock = socket.socket(fileno=os.dup(conn.fileno()))
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.close()
                return
        with contextlib.suppress(Exception):
            if hasattr(conn, "cancel_safe"):
                conn.cancel_safe(timeout=CANCEL_TIMEOUT_S)
            else:  # psycopg 3.1, which the postgres extra still admits
                conn.cancel()


class _Watchdog:
    """One daemon thread for every blocking operation's deadline in the process.

    Arming costs a heap push, not a thread. Ended watches stay in the heap until
    they come to the top, or until they are most of it and the heap is rebuilt.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, watch: _Watch) -> None:
        with self._cond:
            heap = self._heap
            if len(heap) > 1024 and heap[0][2].done:
                heap[:] = [entry for entry in heap if not entry[2].done]
                heapq.heapify(heap)
            heapq.heappush(heap, (watch.deadline.expires_at, next(self._seq), watch))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cairnq-pg-deadlines", daemon=True
                )
                self._thread.start()
            elif heap[0][2] is watch:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].done:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        watch = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(wait)
            watch.fire()


CANCEL_TIMEOUT_S = 5.0
_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG._reset)


_deadlines = threading.local()
_UNWATCHED = contextlib.nullcontext()
_ENCODED: dict[str, bytes] = {}


class PostgresCore:
    """Settings and state of a ``PostgresBackend``; see that class for the arguments."""

    dialect: Dialect = "postgres"
    # A lone claim statement autocommits; pipelined statements run as they arrive.
    runs_lone_claims = streams_batches = True  # OneStatementClaims, StreamedBatches

    def __init__(
        self,
        source: Source,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        clock: Clock | None = None,
        migrate: bool = True,
        repair: bool = False,
        listen: bool = True,
        application_name: str = "cairnq",
        role: str = "client",
        listen_health: Duration = LISTEN_HEALTH,
        op_timeout: Duration | None = OP_TIMEOUT,
        connect_timeout: Duration = _pg_timeouts.CONNECT_TIMEOUT,
        **old: float | None,
    ) -> None:
        self.schema = check_schema(schema)
        self.min_size = _checks.check_int(min_size, "min_size", low=0, high=10_000)
        self.max_size = _checks.check_int(max_size, "max_size", low=max(1, self.min_size))
        self.clock = clock
        self.migrate = migrate
        self.repair = _checks.check_repair(repair, migrate)
        self.application_name = _checks.check_text(application_name, "application_name") or ""
        self.role = _checks.check_text(role, "role") or ""
        self.listen_health_s, self.op_timeout_s = timeouts(listen_health, op_timeout, old)
        self.connect_timeout_s = _pg_timeouts.connect_timeout_s(connect_timeout)
        self._warned_windows: dict[str, int] = {}  # per pool: CONNECT_RETRY_S windows told
        self._dsn: str | None = None
        self._async_source: AsyncSource | None = None
        self._sync_source: SyncSource | None = None
        if isinstance(source, str):
            self._dsn = source
        elif isinstance(source, (psycopg_pool.AsyncConnectionPool, psycopg.AsyncConnection)):
            self._async_source = source
        elif isinstance(source, (psycopg_pool.ConnectionPool, psycopg.Connection)):
            self._sync_source = source
        else:
            raise InvalidArgument(
                "expected a PostgreSQL DSN, psycopg pool or connection, "
                f"got {type(source).__name__}"
            )
        if (
            isinstance(source, (psycopg.Connection, psycopg.AsyncConnection))
            and not source.autocommit
        ):
            raise InvalidArgument(
                "a connection given as cairnq's own must have autocommit=True (cairnq commits "
                "each operation); to write inside your transaction, pass it as submit(conn=...)"
            )
        self._owns_pools = self._dsn is not None
        self._listen_enabled = listen and self._dsn is not None
        identity = self._dsn or f"external:{id(source)}"
        self.hub: WakeHub = hub_for(f"postgres:{identity}|{self.schema or ''}")
        self._statements = statements("postgres")
        self._state: Literal["new", "open", "closed"] = "new"
        self._setup_done = False
        self._sync_setup_lock = threading.Lock()
        self._async_setup_lock: asyncio.Lock | None = None
        self._async_conn_lock: asyncio.Lock | None = None
        self._sync_conn_lock = threading.Lock()
        self._listener: _Listener | None = None
        # Releases the guard closing cairnq's own async pool if its loop ends first.
        self._release_pool_guard: Callable[[], None] | None = None
        self._deadlines: LoopDeadlines | None = None
        self._reserved: psycopg.AsyncConnection[Any] | None = None
        self._reserved_lock: asyncio.Lock | None = None
        # The pools, locks and LISTEN task above belong to one event loop.
        self._loops = LoopBinding()
        self.migrations_applied: list[str] = []
        # Each backend's pools are named apart, so a connection error is told to its own.
        self._pool_suffix = f"#{next(_POOL_SERIAL)}"

    def __repr__(self) -> str:
        where = "dsn" if self._dsn else "external"
        return f"<PostgresBackend {where} schema={self.schema!r} {self._state}>"

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (wake-ups are pushed, not only polled)."""
        return self._listener is not None and self._listener.connected.is_set()

    @property
    def listening_channels(self) -> frozenset[str]:
        """The wake-up channels (``"queued"``, ``"done"``) the LISTEN connection is on now.

        ``"done"`` while something in this process waits for a task to end (and a
        moment after), ``"queued"`` while a worker here claims.
        """
        return frozenset() if self._listener is None else self._listener.channels

    # --- connection parameters ----------------------------------------------------

    # --- connection parameters ----------------------------------------------------

    def _conninfo(self, role: str) -> str:
        """The DSN with this connection's role, and TCP keepalives unless the DSN sets them."""
        assert self._dsn is not None
        given = psycopg.conninfo.conninfo_to_dict(self._dsn)
        extra = {k: v for k, v in KEEPALIVES.items() if k not in given}
        return psycopg.conninfo.make_conninfo(
            self._dsn, application_name=f"{self.application_name}-{role}", **extra
        )

    def _unreachable(self, pool_name: str, waited_s: float) -> str:
        """``cannot reach PostgreSQL HOST:PORT/DB: REASON``, the reason the pool last met."""
        reason = POOL_CONNECT_ERRORS.last.get(pool_name, f"no connection within {waited_s:.0f} s")
        where = getattr(self, "description", "PostgreSQL")
        return f"cannot reach {where}: {reason}"

    def _still_unreachable(self, pool_name: str, started: float) -> None:
        """After a ``CONNECT_POLL_S`` without a connection: give up, or warn (once a window).

        Raises:
            DatabaseUnavailable: ``connect_timeout`` has passed, or the server refused
                the database, role or credentials (``retryable`` False: no wait helps).
        """
        waited = time.monotonic() - started
        reason = POOL_CONNECT_ERRORS.last.get(pool_name, "")
        if refused_for_good(reason):
            where = getattr(self, "description", "PostgreSQL")
            raise DatabaseUnavailable(f"{where} refused the connection: {reason}", retryable=False)
        message = self._unreachable(pool_name, waited)
        limit = getattr(self, "connect_timeout_s", OPEN_TIMEOUT_S)
        if waited + CONNECT_POLL_S > limit:
            raise DatabaseUnavailable(f"{message} (no connection for {waited:.0f} s)")
        windows, told = int(waited // CONNECT_RETRY_S), self._warned_windows.get(pool_name, 0)
        self._warned_windows[pool_name] = windows  # 0 again when a new wait starts
        if windows <= told:
            return
        log.warning(
            "%s; retrying in %.0fs",
            message,
            CONNECT_RETRY_S,
            extra={"database": getattr(self, "description", "PostgreSQL")},
        )

    def _connect_failed(self, exc: BaseException) -> BaseException:
        """A direct connection's failure to connect as one line; other errors translated."""
        if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
            where = getattr(self, "description", "PostgreSQL")
            reason = _reason(exc)
            if refused_for_good(reason):
                return DatabaseUnavailable(
                    f"{where} refused the connection: {reason}", retryable=False
                )
            return DatabaseUnavailable(f"cannot reach {where}: {reason}")
        return _translate(exc)

    def _create_schema_sql(self) -> sql.Composed:
        # Concurrent CREATE SCHEMA IF NOT EXISTS can still collide in the catalog, so
        # creators take a transaction-scoped advisory lock on the name first.
        assert self.schema is not None
        return sql.SQL(
            "begin; select pg_advisory_xact_lock(hashtextextended({}, 0)); "
            "create schema if not exists {}; commit"
        ).format(sql.Literal("cairnq_schema:" + self.schema), sql.Identifier(self.schema))

    def _setup(self) -> Setup:
        steps = opening()
        return steps.setup(
            "postgres",
            migrate=self.migrate,
            repair=self.repair,
            installation_check=steps.installation_check(self.schema),
        )

    def _params(self, step: Call) -> tuple[bytes, dict[str, Any]]:
        """The statement's text, encoded once (psycopg keys its caches on it), and its params."""
        statement = self._statements[step.statement]
        text = _ENCODED.get(statement.text)
        if text is None:
            text = _ENCODED[statement.text] = statement.text.encode()
        return text, bind(statement, step.params, self._adapt, unchanged=PLAIN_VALUES)

    def _adapt(self, name: str, value: Any) -> Any:
        if value is NOW:
            return None if self.clock is None else self.clock.now_ms()
        if isinstance(value, tuple):
            return list(value)
        return value

    # --- where the halves differ ----------------------------------------------------------

    def _acheck_loop(self) -> None:
        """The async half belongs to the event loop it first ran on."""
        self._loops.check()

    def _check_loop(self) -> None:
        """The blocking half runs on any thread, with or without a loop."""

    def _async_setup_guard(self) -> asyncio.Lock:
        if self._async_setup_lock is None:
            self._async_setup_lock = asyncio.Lock()
        return self._async_setup_lock

    def _sync_setup_guard(self) -> contextlib.AbstractContextManager[bool]:
        return self._sync_setup_lock

    def _async_conn_guard(self) -> asyncio.Lock:
        """Serialises this backend's use of a single async connection it was given."""
        if self._async_conn_lock is None:
            self._async_conn_lock = asyncio.Lock()
        return self._async_conn_lock

    def _sync_conn_guard(self) -> contextlib.AbstractContextManager[bool]:
        """Serialises this backend's use of a single connection it was given."""
        return self._sync_conn_lock

    def _aguard_pool(self, pool: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        """Close cairnq's own async pool when its loop shuts down with the pool still open.

        Its maintenance workers outlive a cancellation that lands while they add a
        connection; left to themselves they would keep ``asyncio.run`` from returning.
        """
        self._release_pool_guard = close_at_loop_end(pool.close, f"{pool.name}-guard")

    def _guard_pool(self, pool: psycopg_pool.ConnectionPool[Any]) -> None:
        """The blocking half's pool runs on daemon threads: nothing keeps the process up."""

    def _astart_listening(self) -> None:
        """Start the LISTEN task (it lives on the event loop) if wanted and not yet running."""
        if self._listen_enabled and self._listener is None:
            self._listener = _Listener(
                self._conninfo("listen"), self.hub, health_s=self.listen_health_s
            )
            self._listener.start()

    def _start_listening(self) -> None:
        """The blocking half has no loop to run the LISTEN task on; it polls."""

    async def _abounded(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` within ``op_timeout_s``; a silent server becomes ``DatabaseUnavailable``."""
        seconds = self.op_timeout_s
        if seconds is None:
            return await work()
        deadlines = self._deadlines
        if deadlines is None or not deadlines.serves(seconds):
            deadlines = self._deadlines = LoopDeadlines(seconds)
        return await deadlines.run(work)

    def _bounded(self, work: Callable[[], T]) -> T:
        """``work()`` within ``op_timeout_s``; a silent server becomes ``DatabaseUnavailable``.

        The connection ``work`` drives on is watched (``_watch``) and severed when
        the time is up.
        """
        if self.op_timeout_s is None:
            return work()
        deadline = _deadlines.current = _Deadline(
            self.op_timeout_s, may_sever=not isinstance(self._sync_source, psycopg.Connection)
        )
        try:
            return work()
        except (psycopg.Error, DatabaseError):
            if deadline.fired:
                raise DatabaseUnavailable(
                    f"PostgreSQL did not answer within {self.op_timeout_s:g} s"
                ) from None
            raise
        finally:
            _deadlines.current = None

    def _watch(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """A context that severs ``conn`` if this thread's blocking operation outlives its
        deadline (none for an awaited operation, or without ``op_timeout``)."""
        deadline: _Deadline | None = getattr(_deadlines, "current", None)
        if deadline is None:
            return _UNWATCHED
        return deadline.watching(conn)


class _Listener:
    """A dedicated LISTEN connection feeding the hub; reconnects with backoff.

    It listens only on the channels the hub's subscriptions need (``cairnq_done``
    while something waits for a task to end, ``cairnq_queued`` while a claim loop
    runs), and UNLISTENs a channel ``LISTEN_LINGER_S`` after its last use.

    After every (re)connect it pokes the hub once, so waiters catch up on
    anything sent while it was away. Behind a transaction-mode pooler, where
    notifications never arrive, it says so once and stops: polling carries on.
    """

    def __init__(self, conninfo: str, hub: WakeHub, *, health_s: float = LISTEN_HEALTH_S) -> None:
        self._conninfo = conninfo
        self._hub = hub
        self._health_s = health_s
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self.connected = asyncio.Event()
        self.channels: frozenset[str] = frozenset()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._hub.add_tap(self)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._hub.remove_tap(self)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def demand_changed(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if asyncio._get_running_loop() is loop:
            self._changed.set()
        else:  # a closed loop raises RuntimeError: the listener is gone with it
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._changed.set)

    async def _run(self) -> None:
        delay = 1.0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    if not await self._probe(conn):
                        log.warning(
                            "LISTEN/NOTIFY does not work on this connection (a transaction "
                            "pooler?); cairnq falls back to polling"
                        )
                        return
                    delay = 1.0
                    try:
                        shrinks = await self._follow_demand(conn)
                        self.connected.set()
                        self._hub.poke()
                        await self._pump(conn, shrinks)
                    finally:
                        self.channels = frozenset()
                        self._hub.tap_down(self)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.info("LISTEN connection lost (%s); reconnecting in %.0f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    async def _probe(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Prove delivery: another connection notifies a private channel this one LISTENs on.

        The probe is sent from a second connection because psycopg may discard
        notifications that arrive while this one runs a query.
        """
        probe = f"cairnq_probe_{secrets.token_hex(6)}"
        await conn.execute(sql.SQL("listen {}").format(sql.Identifier(probe)))
        async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as other:
            await other.execute("select pg_notify(%s, '')", (probe,))
        delivered = False
        async with contextlib.aclosing(conn.notifies(timeout=LISTEN_PROBE_TIMEOUT_S)) as notes:
            async for note in notes:
                if note.channel == probe:
                    delivered = True
                    break
        await conn.execute(sql.SQL("unlisten {}").format(sql.Identifier(probe)))
        return delivered

    async def _follow_demand(self, conn: psycopg.AsyncConnection[Any]) -> float | None:
        """LISTEN and UNLISTEN to match the hub's demand; returns when the demand next shrinks.

        The hub learns the new set only after the statements ran, so a subscription
        goes live once its channel is listened on.
        """
        self._changed.clear()
        needed, shrinks = self._hub.channels_needed(LISTEN_LINGER_S)
        before = self.channels
        if needed != before:
            if before - needed:
                # Subscriptions arriving from now on must not count on what is dropped.
                self._hub.tap_live(self, before & needed)
            for channel in sorted(needed - before):
                await conn.execute(sql.SQL("listen {}").format(sql.Identifier(_CHANNEL[channel])))
            for channel in sorted(before - needed):
                await conn.execute(sql.SQL("unlisten {}").format(sql.Identifier(_CHANNEL[channel])))
            self.channels = needed
            if before:
                # A notification landing during those statements may have been consumed.
                self._hub.poke()
        self._hub.tap_live(self, needed)
        return shrinks

    def _dispatch(self, note: psycopg.Notify) -> None:
        if note.channel == "cairnq_queued":
            self._hub.publish([Emit("queued", note.payload)])
        elif note.channel == "cairnq_done":
            self._hub.publish([Emit("done", note.payload)])

    async def _pump(self, conn: psycopg.AsyncConnection[Any], shrinks: float | None) -> None:
        """Deliver notifications, follow the demand; after each quiet spell, probe the connection.

        A notification that lands during the probe query is consumed unseen, so
        every probe is followed by a poke: waiters look at the database once.
        """
        probe_at = time.monotonic() + self._health_s
        while True:
            until = probe_at if shrinks is None else min(probe_at, shrinks)
            await self._deliver_until(conn, until)
            if time.monotonic() >= probe_at:
                await asyncio.wait_for(conn.execute("select 1"), self._health_s)
                self._hub.poke()
                probe_at = time.monotonic() + self._health_s
            shrinks = await self._follow_demand(conn)

    async def _deliver_until(self, conn: psycopg.AsyncConnection[Any], until: float) -> None:
        """Deliver notifications until ``until`` (monotonic) or until the demand changes."""
        if self._changed.is_set():
            return
        reader = asyncio.ensure_future(self._deliver(conn, until - time.monotonic()))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait((reader, changed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, changed):
                task.cancel()
            await asyncio.wait((reader, changed))
        if not reader.cancelled() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]

    async def _deliver(self, conn: psycopg.AsyncConnection[Any], timeout: float) -> None:
        async for note in conn.notifies(timeout=max(0.0, timeout)):
            self._dispatch(note)


# The NOTIFY channel of each wake-up kind (fixed names, never built from input).
_CHANNEL = {"queued": "cairnq_queued", "done": "cairnq_done"}
