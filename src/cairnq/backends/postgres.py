"""The multi-host backend: PostgreSQL through psycopg 3 and its connection pool.

Requires the ``postgres`` extra (``pip install ".[postgres]"``). A write
operation runs in one transaction on one pooled connection; a read runs in
autocommit. ``now_ms`` is left to the database clock unless a clock is given,
so every host shares one timeline. A dedicated LISTEN connection turns the
protocol's NOTIFY trigger into in-process wake-ups; it is only an accelerator,
polling stays the fallback.

The backend can also run on the application's own pool or connection, so a
task can be submitted, or settled, inside the application's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar

from .._extras import missing_extra

try:
    import psycopg
    import psycopg_pool
    from psycopg import sql
    from psycopg.rows import dict_row
    from psycopg.types.string import TextLoader
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("PostgreSQL support", "postgres", "psycopg, psycopg-pool") from exc

from .._clock import Clock
from .._crashpoints import ARMED, PAUSE_ARMED, around_commit, pausepoint
from .._wakeups import WakeHub, hub_for
from ..errors import (
    CairnQError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    LostLease,
    StoreClosed,
    UnsupportedBackend,
)
from ..protocol import ops as _ops
from ..protocol.setup import Setup, arun_setup, check_repair, missing_table, run_setup, setup_steps
from ..protocol.statements import Dialect, statements
from ..protocol.steps import NOW, Call, Emit, Op, Rows, Script, adrive, drive, is_single_statement
from ._postgres_inspect import PostgresDescription
from .base import LoopBinding, bind

log = logging.getLogger("cairnq.postgres")

T = TypeVar("T")

SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_UNDEFINED_RELATION = re.compile(r'relation "(?:[^".]+\.)?([^".]+)" does not exist')
MAX_IDENTIFIER_BYTES = 63
LISTEN_CHANNELS = ("cairnq_queued", "cairnq_done")
# A dead peer is noticed within about 20 s instead of the kernel's two hours.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 2,
}
LISTEN_HEALTH_S = 10.0

AsyncSource = psycopg_pool.AsyncConnectionPool | psycopg.AsyncConnection
SyncSource = psycopg_pool.ConnectionPool | psycopg.Connection
Source = str | AsyncSource | SyncSource


def check_schema(schema: str | None) -> str | None:
    """Validate a schema name: an identifier of at most 63 bytes (PostgreSQL truncates),
    not one of PostgreSQL's own (``information_schema``, ``pg_*``)."""
    if schema is None:
        return None
    # fullmatch: with match, "$" would also accept a name ending in a newline.
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(
            f"schema {schema!r} is not a valid name: letters, digits, _ and $, "
            "not starting with a digit"
        )
    if len(schema.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise InvalidArgument(f"schema {schema!r} is longer than {MAX_IDENTIFIER_BYTES} bytes")
    if _ops.system_schema(schema):
        raise InvalidArgument(f"schema {schema!r} is refused: {_ops.SYSTEM_SCHEMA_REASON}")
    return schema


def _translate(exc: BaseException) -> BaseException:
    """Turn a psycopg error into a ``cairnq.errors`` one; anything else passes through."""
    if isinstance(exc, CairnQError) or not isinstance(
        exc, (psycopg.Error, psycopg_pool.PoolTimeout)
    ):
        return exc
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return DatabaseUnavailable(f"no PostgreSQL connection became available: {exc}")
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseUnavailable(f"PostgreSQL connection failed: {exc}")
    if isinstance(exc, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)):
        return DatabaseError(f"PostgreSQL aborted the transaction: {exc}", retryable=True)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        # SQLSTATE 42P01. Only cairnq's own relations: a table a handler's own
        # statements name (succeed_in) is the application's business.
        relation = _UNDEFINED_RELATION.search(exc.diag.message_primary or "")
        if relation and relation.group(1).startswith("cairnq_"):
            return missing_table(relation.group(1))
        return DatabaseError(f"PostgreSQL error: {exc}")
    return DatabaseError(f"PostgreSQL error: {exc}")


def _joins_callers_transaction(conn: Any) -> bool:
    """Whether statements on ``conn`` become part of a transaction the caller will end.

    A non-autocommit connection with no transaction open yet starts one implicitly
    at the first statement, and the caller commits or rolls it back. Wrapping the
    work in ``conn.transaction()`` there would commit it on its own.
    """
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return not conn.autocommit and idle


def _op_name(op: Op[Any]) -> str:
    return str(getattr(op, "__name__", ""))


def _autocommits(op: Op[Any], conn: Any) -> bool:
    """Whether write ``op`` runs as one statement that commits as it runs (no transaction).

    Not when its ``before_commit`` crash point is armed: that point needs a commit
    still to come, so the armed operation runs in a transaction of its own.
    """
    if not (is_single_statement(op) and conn.autocommit):
        return False
    return ARMED is None or f"before_commit:{_op_name(op)}" != ARMED


def _json_as_text(adapters: Any) -> None:
    """Read json/jsonb as text: the domain parses JSON itself, the same way on every backend."""
    adapters.register_loader("jsonb", TextLoader)
    adapters.register_loader("json", TextLoader)


def _has_columns(cur: Any) -> bool:
    """Whether the statement returned a row set (cheaper than ``cur.description``)."""
    result = cur.pgresult
    return result is not None and result.nfields > 0


class PostgresBackend(PostgresDescription):
    """A PostgreSQL database, reached through a DSN, a psycopg pool or a connection.

    Args:
        source: A DSN (``postgresql://user@host/db``), a psycopg
            ``AsyncConnectionPool`` / ``ConnectionPool``, or a psycopg connection.
            Given a pool or connection, cairnq uses it and never closes it.
        schema: The schema holding cairnq's tables. With a DSN it is created if
            missing and pinned in ``search_path``; with a pool or connection it is
            only checked.
        min_size, max_size: Pool size when cairnq makes the pool.
        clock: Supply ``now_ms`` from this clock instead of the database's.
        migrate: Apply pending migrations on open (default); otherwise only check.
        repair: With ``migrate``, apply again the recorded migrations whose
            tables, indexes or triggers are missing, instead of refusing to
            open with ``SchemaIncomplete`` (see ``cairnq.migrate``).
        listen: Open a LISTEN connection for push wake-ups (default, DSN only).
        application_name: Prefix of ``application_name`` on every connection; the
            suffix names the connection's role (``-client``, ``-worker``,
            ``-heartbeat``, ``-listen``, ``-migrate``).
        role: The role of this backend's pooled connections (``"client"``).
        listen_health_s: After this long without a notification, the LISTEN
            connection is probed; a probe unanswered this long means it is dead
            (a half-open socket) and it is replaced.
        op_timeout_s: An async operation still unanswered after this long fails with
            ``DatabaseUnavailable`` and its connection is discarded (a server or
            network that went silent); ``None`` waits forever.
    """

    dialect: Dialect = "postgres"

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
        listen_health_s: float = LISTEN_HEALTH_S,
        op_timeout_s: float | None = 60.0,
    ) -> None:
        self.schema = check_schema(schema)
        self.min_size = _ops.check_int(min_size, "min_size", low=0, high=10_000)
        self.max_size = _ops.check_int(max_size, "max_size", low=max(1, self.min_size))
        self.clock = clock
        self.migrate = migrate
        self.repair = check_repair(repair, migrate)
        self.application_name = _ops.check_text(application_name, "application_name") or ""
        self.role = _ops.check_text(role, "role") or ""
        if not 0 < listen_health_s <= 3600:
            raise InvalidArgument("listen_health_s must be between 0 and 3600 seconds")
        self.listen_health_s = float(listen_health_s)
        if op_timeout_s is not None and not 0 < op_timeout_s <= 86_400:
            raise InvalidArgument("op_timeout_s must be positive (seconds), or None")
        self.op_timeout_s = op_timeout_s
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
        self._setup_lock = threading.Lock()
        self._async_setup_lock: asyncio.Lock | None = None
        self._conn_lock: asyncio.Lock | None = None
        self._sync_conn_lock = threading.Lock()
        self._listener: _Listener | None = None
        self._reserved: psycopg.AsyncConnection[Any] | None = None
        self._reserved_lock: asyncio.Lock | None = None
        # The pools, locks and LISTEN task above belong to one event loop.
        self._loops = LoopBinding()
        self.migrations_applied: list[str] = []

    def __repr__(self) -> str:
        where = "dsn" if self._dsn else "external"
        return f"<PostgresBackend {where} schema={self.schema!r} {self._state}>"

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (wake-ups are pushed, not only polled)."""
        return self._listener is not None and self._listener.connected.is_set()

    # --- connection parameters ----------------------------------------------------

    def _conninfo(self, role: str) -> str:
        """The DSN with this connection's role, and TCP keepalives unless the DSN sets them."""
        assert self._dsn is not None
        given = psycopg.conninfo.conninfo_to_dict(self._dsn)
        extra = {k: v for k, v in KEEPALIVES.items() if k not in given}
        return psycopg.conninfo.make_conninfo(
            self._dsn, application_name=f"{self.application_name}-{role}", **extra
        )

    def _configure_sync(self, conn: psycopg.Connection[Any]) -> None:
        _json_as_text(conn.adapters)
        if self.schema is not None:
            conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(self.schema)))

    async def _configure_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        _json_as_text(conn.adapters)
        if self.schema is not None:
            await conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(self.schema)))

    def _create_schema_sql(self) -> sql.Composed:
        # Concurrent CREATE SCHEMA IF NOT EXISTS can still collide in the catalog, so
        # creators take a transaction-scoped advisory lock on the name first.
        assert self.schema is not None
        return sql.SQL(
            "begin; select pg_advisory_xact_lock(hashtextextended({}, 0)); "
            "create schema if not exists {}; commit"
        ).format(sql.Literal("cairnq_schema:" + self.schema), sql.Identifier(self.schema))

    def _setup(self) -> Setup:
        return setup_steps(
            "postgres",
            migrate=self.migrate,
            repair=self.repair,
            installation_check=_ops.check_installation(self.schema),
        )

    # --- lifecycle ------------------------------------------------------------------

    async def aopen(self) -> None:
        self._loops.check()
        if self._state == "closed":
            raise StoreClosed("this PostgreSQL backend was closed")
        if self._async_setup_lock is None:
            self._async_setup_lock = asyncio.Lock()
        async with self._async_setup_lock:
            if self._async_source is None:
                if self._dsn is None:
                    raise UnsupportedBackend(
                        "this backend wraps a synchronous psycopg pool or connection; "
                        "use the sync client, or pass an async pool"
                    )
                pool = psycopg_pool.AsyncConnectionPool(
                    self._conninfo(self.role),
                    min_size=self.min_size,
                    max_size=self.max_size,
                    kwargs={"autocommit": True},
                    configure=self._configure_async,
                    open=False,
                    name="cairnq",
                )
                try:
                    if self.schema is not None and self.migrate:
                        await self._create_schema_async()
                    await pool.open(wait=True, timeout=30)
                except BaseException as exc:
                    await pool.close()
                    raise _translate(exc) from exc
                self._async_source = pool
            if not self._setup_done:
                self.migrations_applied = await arun_setup(
                    self._setup(), lambda step: self._arun_now(step.op, write=step.write)
                )
                self._setup_done = True
            self._state = "open"
            if self._listen_enabled and self._listener is None:
                self._listener = _Listener(
                    self._conninfo("listen"), self.hub, health_s=self.listen_health_s
                )
                self._listener.start()

    async def _create_schema_async(self) -> None:
        try:
            async with await psycopg.AsyncConnection.connect(
                self._conninfo("migrate"), autocommit=True
            ) as conn:
                await conn.execute(self._create_schema_sql())
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    def open(self) -> None:
        if self._state == "closed":
            raise StoreClosed("this PostgreSQL backend was closed")
        with self._setup_lock:
            if self._sync_source is None:
                if self._dsn is None:
                    raise UnsupportedBackend(
                        "this backend wraps an async psycopg pool or connection; "
                        "use the async client, or pass a sync pool"
                    )
                pool = psycopg_pool.ConnectionPool(
                    self._conninfo(self.role),
                    min_size=self.min_size,
                    max_size=self.max_size,
                    kwargs={"autocommit": True},
                    configure=self._configure_sync,
                    open=False,
                    name="cairnq-sync",
                )
                try:
                    if self.schema is not None and self.migrate:
                        with psycopg.Connection.connect(
                            self._conninfo("migrate"), autocommit=True
                        ) as conn:
                            conn.execute(self._create_schema_sql())
                    pool.open(wait=True, timeout=30)
                except BaseException as exc:
                    pool.close()
                    raise _translate(exc) from exc
                self._sync_source = pool
            if not self._setup_done:
                self.migrations_applied = run_setup(
                    self._setup(), lambda step: self._run_now(step.op, write=step.write)
                )
                self._setup_done = True
            if self._state == "new":
                self._state = "open"

    async def aclose(self) -> None:
        own_loop = self._loops.check_close()
        self._state = "closed"
        if not own_loop:
            # The loop these async connections belong to is closed: nothing can await
            # them any more. The sync pool is closed; the rest is left as close() does.
            self._reserved = self._listener = None
            if self._owns_pools and isinstance(self._sync_source, psycopg_pool.ConnectionPool):
                await asyncio.get_running_loop().run_in_executor(None, self._sync_source.close)
            if self._owns_pools and self._async_source is not None:
                log.warning(
                    "the event loop this backend was opened on is closed, so its async "
                    "connections cannot be closed; close it on that loop before it ends"
                )
            return
        if self._reserved is not None:
            with contextlib.suppress(psycopg.Error):
                await self._reserved.close()
            self._reserved = None
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        if self._owns_pools:
            if isinstance(self._async_source, psycopg_pool.AsyncConnectionPool):
                await self._async_source.close()
            if isinstance(self._sync_source, psycopg_pool.ConnectionPool):
                await asyncio.get_running_loop().run_in_executor(None, self._sync_source.close)

    def close(self) -> None:
        self._state = "closed"
        if self._owns_pools and isinstance(self._sync_source, psycopg_pool.ConnectionPool):
            self._sync_source.close()
        pool = self._async_source
        open_async_pool = (
            self._owns_pools
            and isinstance(pool, psycopg_pool.AsyncConnectionPool)
            and not pool.closed
        )
        if self._listener is not None or open_async_pool:
            log.warning(
                "close() cannot close async connections; use 'await backend.aclose()' "
                "(or 'await client.close()') from the event loop"
            )

    # --- running operations -----------------------------------------------------------

    async def arun(self, op: Op[T], *, write: bool) -> T:
        self._loops.check()
        if self._state != "open" or self._async_source is None:
            await self.aopen()
        return await self._arun_now(op, write=write)

    def run(self, op: Op[T], *, write: bool) -> T:
        if self._state != "open" or self._sync_source is None:
            self.open()
        return self._run_now(op, write=write)

    async def _arun_now(self, op: Op[T], *, write: bool) -> T:
        if PAUSE_ARMED is not None and write:
            pausepoint(f"before_write:{_op_name(op)}")

        async def attempt() -> tuple[T, list[Emit]]:
            async with self._async_connection() as conn:
                return await self._adrive_on(conn, op, write=write)

        try:
            value, emits = await self._bounded(attempt())
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return value

    async def _bounded(self, work: Awaitable[T]) -> T:
        """``work`` within ``op_timeout_s``; a silent server becomes ``DatabaseUnavailable``."""
        if self.op_timeout_s is None:
            return await work
        try:
            return await asyncio.wait_for(work, self.op_timeout_s)
        except asyncio.TimeoutError:
            raise DatabaseUnavailable(
                f"PostgreSQL did not answer within {self.op_timeout_s:g} s"
            ) from None

    def _run_now(self, op: Op[T], *, write: bool) -> T:
        if PAUSE_ARMED is not None and write:
            pausepoint(f"before_write:{_op_name(op)}")
        try:
            with self._sync_connection() as conn:
                if not write:
                    value, emits = drive(op, lambda step: self._execute_sync(conn, step))
                elif _autocommits(op, conn):
                    value, emits = drive(op, lambda step: self._execute_sync(conn, step))
                    if ARMED is not None:
                        around_commit("after_commit", _op_name(op))
                else:
                    with conn.transaction():
                        value, emits = drive(op, lambda step: self._execute_sync(conn, step))
                        if ARMED is not None:
                            around_commit("before_commit", _op_name(op))
                    if ARMED is not None:
                        around_commit("after_commit", _op_name(op))
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return value

    async def _adrive_on(
        self,
        conn: psycopg.AsyncConnection[Any],
        op: Op[T],
        *,
        write: bool,
        commits: bool = True,
    ) -> tuple[T, list[Emit]]:
        """Run ``op`` on ``conn``; a write commits here unless ``commits`` is false.

        With ``commits=False`` the caller's open transaction holds the commit, and
        the caller passes the ``before_commit``/``after_commit`` crash points.
        """

        async def execute(step: Call | Script) -> Rows:
            return await self._execute_async(conn, step)

        if not write:
            return await adrive(op, execute)
        # Inside the caller's transaction a single statement needs no savepoint.
        alone = _autocommits(op, conn) if commits else is_single_statement(op) and conn.autocommit
        if alone:
            result = await adrive(op, execute)
            if ARMED is not None and commits:
                around_commit("after_commit", _op_name(op))
            return result
        async with conn.transaction():
            result = await adrive(op, execute)
            if ARMED is not None and commits:
                around_commit("before_commit", _op_name(op))
        if ARMED is not None and commits:
            around_commit("after_commit", _op_name(op))
        return result

    @contextlib.asynccontextmanager
    async def _async_connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        source = self._async_source
        if isinstance(source, psycopg_pool.AsyncConnectionPool):
            async with source.connection() as conn:
                yield conn
        elif isinstance(source, psycopg.AsyncConnection):
            if self._conn_lock is None:
                self._conn_lock = asyncio.Lock()
            async with self._conn_lock:
                yield source
        else:
            raise StoreClosed("no async PostgreSQL connection is available")

    @contextlib.contextmanager
    def _sync_connection(self) -> Iterator[psycopg.Connection[Any]]:
        source = self._sync_source
        if isinstance(source, psycopg_pool.ConnectionPool):
            with source.connection() as conn:
                yield conn
        elif isinstance(source, psycopg.Connection):
            with self._sync_conn_lock:
                yield source
        else:
            raise StoreClosed("no PostgreSQL connection is available")

    def _params(self, step: Call) -> tuple[str, dict[str, Any]]:
        statement = self._statements[step.statement]
        return statement.text, bind(statement, step.params, self._adapt)

    def _adapt(self, name: str, value: Any) -> Any:
        if value is NOW:
            return None if self.clock is None else self.clock.now_ms()
        if isinstance(value, tuple):
            return list(value)
        return value

    async def _execute_async(self, conn: psycopg.AsyncConnection[Any], step: Call | Script) -> Rows:
        if isinstance(step, Script):
            await conn.execute(step.source.encode())
            return []
        text, params = self._params(step)
        cur = conn.cursor(row_factory=dict_row)
        _json_as_text(cur.adapters)
        await cur.execute(text.encode(), params)
        return await cur.fetchall() if _has_columns(cur) else []

    def _execute_sync(self, conn: psycopg.Connection[Any], step: Call | Script) -> Rows:
        if isinstance(step, Script):
            conn.execute(step.source.encode())
            return []
        text, params = self._params(step)
        cur = conn.cursor(row_factory=dict_row)
        _json_as_text(cur.adapters)
        cur.execute(text.encode(), params)
        return cur.fetchall() if _has_columns(cur) else []

    async def arun_reserved(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` on a connection of its own, outside the pool (the worker's heartbeat).

        However busy the pool is with handler work, this never waits for a pooled
        connection. Falls back to the pool when cairnq does not own the connections.
        """
        if self._dsn is None:
            return await self.arun(op, write=write)
        self._loops.check()
        if self._state != "open":
            await self.aopen()
        if self._reserved_lock is None:
            self._reserved_lock = asyncio.Lock()
        async with self._reserved_lock:
            try:
                if self._reserved is None or self._reserved.closed:
                    self._reserved = await psycopg.AsyncConnection.connect(
                        self._conninfo("heartbeat"), autocommit=True
                    )
                    await self._configure_async(self._reserved)
                value, emits = await self._bounded(self._adrive_on(self._reserved, op, write=write))
            except BaseException as exc:
                broken = isinstance(exc, (psycopg.OperationalError, DatabaseUnavailable))
                if broken and self._reserved is not None:
                    with contextlib.suppress(psycopg.Error):
                        await self._reserved.close()
                    self._reserved = None
                raise _translate(exc) from exc
        self.hub.publish(emits)
        return value

    # --- the application's own transaction ----------------------------------------------

    async def arun_on(self, conn: psycopg.AsyncConnection[Any], op: Op[T]) -> T:
        """Run ``op`` on the caller's connection, as part of the caller's transaction.

        Nothing is committed here: the work becomes visible when the caller
        commits and disappears if it rolls back. Inside an open transaction the
        operation runs in a savepoint, so its own failure leaves the caller's
        transaction usable. On an autocommit connection outside a transaction
        block it runs in a transaction of its own. Wake-ups come from the NOTIFY
        trigger at the caller's commit.

        Raises:
            SchemaMismatch: the connection's current schema is not this backend's.
            EventLoopMismatch: called from an event loop other than this backend's.
        """
        self._loops.check()
        if not self._setup_done:
            await self.aopen()
        try:
            if self.schema is not None:
                await adrive(
                    _ops.check_installation(self.schema),
                    lambda step: self._execute_async(conn, step),
                )
            if _joins_callers_transaction(conn):
                value, _ = await adrive(op, lambda step: self._execute_async(conn, step))
            else:
                async with conn.transaction():
                    value, _ = await adrive(op, lambda step: self._execute_async(conn, step))
        except BaseException as exc:
            raise _translate(exc) from exc
        return value

    def run_on(self, conn: psycopg.Connection[Any], op: Op[T]) -> T:
        """The blocking ``arun_on``."""
        if not self._setup_done:
            self.open()
        try:
            if self.schema is not None:
                drive(_ops.check_installation(self.schema), lambda s: self._execute_sync(conn, s))
            if _joins_callers_transaction(conn):
                value, _ = drive(op, lambda step: self._execute_sync(conn, step))
            else:
                with conn.transaction():
                    value, _ = drive(op, lambda step: self._execute_sync(conn, step))
        except BaseException as exc:
            raise _translate(exc) from exc
        return value

    async def complete_in(
        self,
        lease: _ops.Lease,
        worker_id: str,
        write: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Any]],
        encode: Callable[[Any], str | None],
    ) -> Mapping[str, Any]:
        """Run ``write(conn)`` and complete the task with its return value, in one transaction.

        The attempt's row is locked first, and the lock is the ownership until the
        commit (recovery skips the row, however long ``write`` takes): with a cancel
        already pending, ``write`` is not called and the task ends canceled; a cancel
        requested later waits for this transaction. So ``write``'s changes commit
        exactly when the task succeeds.

        Returns the completed row, undecoded.

        Raises:
            LostLease: the lease was gone; nothing was written, or ``write``'s changes
                rolled back.
        """
        self._loops.check()
        try:
            async with self._async_connection() as conn:
                async with conn.transaction():
                    canceled, _ = await self._adrive_on(
                        conn, _ops.hold(lease, worker_id), write=False
                    )
                    result = None if canceled else encode(await write(conn))
                    row, emits = await self._adrive_on(
                        conn,
                        _ops.complete_held(lease, worker_id, result),
                        write=True,
                        commits=False,
                    )
                    if ARMED is not None:
                        around_commit("before_commit", "complete_held")
                if ARMED is not None:
                    around_commit("after_commit", "complete_held")
        except LostLease:
            raise
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return row


class _Listener:
    """A dedicated LISTEN connection feeding the hub; reconnects with backoff.

    After every (re)connect it pokes the hub once, so waiters catch up on
    anything sent while it was away. Behind a transaction-mode pooler, where
    notifications never arrive, it says so once and stops: polling carries on.
    """

    def __init__(self, conninfo: str, hub: WakeHub, *, health_s: float = LISTEN_HEALTH_S) -> None:
        self._conninfo = conninfo
        self._hub = hub
        self._health_s = health_s
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = 1.0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    if not await self._listen(conn):
                        log.warning(
                            "LISTEN/NOTIFY does not work on this connection (a transaction "
                            "pooler?); cairnq falls back to polling"
                        )
                        return
                    delay = 1.0
                    self.connected.set()
                    self._hub.poke()
                    await self._pump(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.info("LISTEN connection lost (%s); reconnecting in %.0f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """LISTEN, then prove delivery: another connection notifies a private channel.

        The probe is sent from a second connection because psycopg discards
        notifications that arrive while this one runs a query.
        """
        probe = f"cairnq_probe_{secrets.token_hex(6)}"
        for channel in (*LISTEN_CHANNELS, probe):
            await conn.execute(sql.SQL("listen {}").format(sql.Identifier(channel)))
        async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as other:
            await other.execute("select pg_notify(%s, '')", (probe,))
        async for note in conn.notifies(timeout=5.0):
            if note.channel == probe:
                return True
            self._dispatch(note)
        return False

    def _dispatch(self, note: psycopg.Notify) -> None:
        if note.channel == "cairnq_queued":
            self._hub.publish([Emit("queued", note.payload)])
        elif note.channel == "cairnq_done":
            self._hub.publish([Emit("done", note.payload)])

    async def _pump(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Deliver notifications; after each quiet spell, probe the connection's health.

        A notification that lands during the probe query is consumed unseen, so
        every probe is followed by a poke: waiters look at the database once.
        """
        while True:
            async for note in conn.notifies(timeout=self._health_s):
                self._dispatch(note)
            await asyncio.wait_for(conn.execute("select 1"), self._health_s)
            self._hub.poke()


@contextlib.contextmanager
def scratch_schema_backend(dsn: str, *, clock: Clock | None = None) -> Iterator[PostgresBackend]:
    """A backend in a new, empty schema of ``dsn``'s database, dropped afterwards (tests)."""
    schema = f"cairnq_scratch_{secrets.token_hex(6)}"
    backend = PostgresBackend(dsn, schema=schema, clock=clock, listen=False, min_size=1, max_size=2)
    try:
        yield backend
    finally:
        backend.close()
        with psycopg.Connection.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))
