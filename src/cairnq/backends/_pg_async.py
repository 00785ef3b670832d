"""The PostgreSQL backend's async paths: the source its blocking paths are generated from.

``scripts/generate_sync.py`` turns this file into ``_pg_sync.py`` beside it
(``aopen`` -> ``open``, ``arun`` -> ``run``, ``AsyncConnection`` -> ``Connection``, ...).
Where the halves differ, this file calls a hook of ``PostgresCore`` whose name
maps to the blocking half's own (``_acheck_loop`` -> ``_check_loop``, ...).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from .._crashpoints import (
    ARMED,
    PAUSE_ARMED,
    apausepoint_when_quiet,
    around_commit,
    write_began,
    write_ended,
)
from ..errors import StoreClosed, UnsupportedBackend
from ..protocol.steps import (
    Call,
    Emit,
    Op,
    Rows,
    Script,
    adrive,
    arun_setup,
    is_pipelined,
    is_single_statement,
    read_ahead,
)
from ._pg_errors import translate as _translate
from ._pg_pool import hand_out_most_recent_first
from ._postgres_core import (
    ASYNC_NO_CONNECTION,
    ASYNC_POOL_NAME,
    ASYNC_WRAPS_OTHER,
    CONNECT_POLL_S,
    POOL_CONNECT_ERRORS,
    PostgresCore,
    _autocommits,
    _configure_json,
    _cursor_json_as_text,
    _has_columns,
    _joins_callers_transaction,
    _op_name,
    _require_psycopg_connection,
    _runs_apart,
    dict_row,
    psycopg,
    psycopg_pool,
    sql,
)
from ._registry import opening

T = TypeVar("T")


class AsyncPostgresPaths(PostgresCore):
    """Opening, running operations and the application's transaction: one half of the backend."""

    async def _configure_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        _configure_json(conn)
        if self.schema is not None:
            await conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(self.schema)))

    async def aopen(self) -> None:
        """Connect and migrate now rather than on first use."""
        self._acheck_loop()
        if self._state == "closed":
            raise StoreClosed("this PostgreSQL backend was closed")
        async with self._async_setup_guard():
            if self._async_source is None:
                if self._dsn is None:
                    raise UnsupportedBackend(ASYNC_WRAPS_OTHER)
                pool = psycopg_pool.AsyncConnectionPool(
                    self._conninfo(self.role),
                    min_size=self.min_size,
                    max_size=self.max_size,
                    kwargs={"autocommit": True},
                    configure=self._configure_async,
                    open=False,
                    name=ASYNC_POOL_NAME + self._pool_suffix,
                )
                hand_out_most_recent_first(pool)
                try:
                    if self.schema is not None and self.migrate:
                        await self._create_schema_async()
                    await pool.open(wait=False)
                    started = time.monotonic()
                    while True:
                        try:
                            async with pool.connection(timeout=CONNECT_POLL_S):
                                break
                        except psycopg_pool.PoolTimeout:
                            self._still_unreachable(ASYNC_POOL_NAME + self._pool_suffix, started)
                except BaseException as exc:
                    await pool.close()
                    raise _translate(exc) from exc
                finally:
                    POOL_CONNECT_ERRORS.forget(ASYNC_POOL_NAME + self._pool_suffix)
                self._async_source = pool
                self._aguard_pool(pool)
            if not self._setup_done:
                self.migrations_applied = await arun_setup(
                    self._setup(), lambda step: self._arun_now(step.op, write=step.write)
                )
                self._setup_done = True
            if self._state == "new":
                self._state = "open"
            self._astart_listening()

    async def _create_schema_async(self) -> None:
        try:
            async with await psycopg.AsyncConnection.connect(
                self._conninfo("migrate"), autocommit=True
            ) as conn:
                await conn.execute(self._create_schema_sql())
        except psycopg.Error as exc:
            raise self._connect_failed(exc) from exc

    async def arun(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` (in one transaction when ``write``), opening the backend if needed."""
        self._acheck_loop()
        if self._state != "open" or self._async_source is None:
            await self.aopen()
        return await self._arun_now(op, write=write)

    async def _arun_now(self, op: Op[T], *, write: bool) -> T:
        counted = PAUSE_ARMED is not None and write
        if counted:
            await apausepoint_when_quiet(f"before_write:{_op_name(op)}")
            write_began()

        async def attempt() -> tuple[T, list[Emit]]:
            async with self._async_connection() as conn:
                return await self._adrive_on(conn, op, write=write)

        source = self._async_source
        try:
            if (
                ARMED is None
                and is_single_statement(op)
                and isinstance(source, psycopg_pool.AsyncConnectionPool)
            ):
                value, emits = await self._abounded(
                    lambda: self._arun_alone(source, op, write=write)
                )
            else:
                value, emits = await self._abounded(attempt)
        except BaseException as exc:
            raise _translate(exc) from exc
        finally:
            if counted:
                write_ended()
        self.hub.publish(emits)
        return value

    async def _arun_alone(
        self, pool: psycopg_pool.AsyncConnectionPool[Any], op: Op[T], *, write: bool
    ) -> tuple[T, list[Emit]]:
        """Run one-statement ``op`` on a connection of ``pool``, taken and given back directly.

        On an autocommit connection the statement commits as it runs, so the
        connection's own context (a commit, or a rollback after an error) has
        nothing to do; the pool still discards a connection returned broken.
        Any other connection runs ``op`` as ``_adrive_on`` does.
        """
        conn = await pool.getconn()
        if not conn.autocommit:
            # Not a connection of cairnq's own pool: the pool's context commits or rolls
            # back what the op leaves open (``async with conn`` would close it).
            await pool.putconn(conn)
            async with self._async_connection() as held:
                return await self._adrive_on(held, op, write=write)
        try:

            async def execute(step: Call | Script) -> Rows:
                return await self._execute_async(conn, step)

            with self._watch(conn):
                return await adrive(op, execute)
        finally:
            await pool.putconn(conn)

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

        with self._watch(conn):
            if not write:
                return await adrive(op, execute)
            # Inside the caller's transaction a single statement needs no savepoint.
            alone = (
                _autocommits(op, conn) if commits else is_single_statement(op) and conn.autocommit
            )
            if alone:
                result = await adrive(op, execute)
                if ARMED is not None and commits:
                    around_commit("after_commit", _op_name(op))
                return result
            if commits and is_pipelined(op):
                return await self._adrive_pipelined(conn, op)
            async with conn.transaction():
                result = await adrive(op, execute)
                if ARMED is not None and commits:
                    around_commit("before_commit", _op_name(op))
            if ARMED is not None and commits:
                around_commit("after_commit", _op_name(op))
            return result

    async def _adrive_pipelined(
        self, conn: psycopg.AsyncConnection[Any], op: Op[T]
    ) -> tuple[T, list[Emit]]:
        """Run write ``op`` in pipeline mode, in a transaction (see ``Pipelined``).

        The begin, each ``discard`` step and the commit are queued on the
        connection; the client waits for the server only at a step whose rows
        the operation reads, and at the end. Calls that may commit apart
        (``Call.apart``) at the start of what is left of the operation are queued
        outside a transaction block, as long as they come: the server runs each run
        of them as an implicit transaction, committed at the sync after its last
        statement, each statement with a snapshot taken as it starts. What follows
        them, if anything, runs in a transaction as above.
        """
        name = _op_name(op)
        emits: list[Emit] = []
        apart = _runs_apart(op, conn)
        async with conn.pipeline() as pipeline:

            async def execute(step: Call | Script) -> Rows:
                if isinstance(step, Script):
                    await pipeline.sync()
                    return await self._execute_async(conn, step)
                text, params = self._params(step)
                cur = conn.cursor(row_factory=dict_row)
                _cursor_json_as_text(conn, cur)
                await cur.execute(text, params)
                if step.discard:
                    return []
                await pipeline.sync()
                return await cur.fetchall() if _has_columns(cur) else []

            while apart:
                ahead = read_ahead(op)
                if not ahead.apart:
                    op = ahead.whole()
                    break
                for call in ahead.apart:
                    rows = await execute(call)
                emits += ahead.emits
                op = ahead.rest(rows)
                if ahead.ended:
                    if ARMED is not None:
                        around_commit("after_commit", name)
                    return ahead.value, emits
            async with conn.transaction():
                value, later = await adrive(op, execute)
                if ARMED is not None:
                    around_commit("before_commit", name)
        if ARMED is not None:
            around_commit("after_commit", name)
        return value, emits + later

    @contextlib.asynccontextmanager
    async def _async_connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        source = self._async_source
        if isinstance(source, psycopg_pool.AsyncConnectionPool):
            async with source.connection() as conn:
                yield conn
        elif isinstance(source, psycopg.AsyncConnection):
            async with self._async_conn_guard():
                yield source
        else:
            raise StoreClosed(ASYNC_NO_CONNECTION)

    async def _execute_async(self, conn: psycopg.AsyncConnection[Any], step: Call | Script) -> Rows:
        if isinstance(step, Script):
            await conn.execute(step.source.encode())
            return []
        text, params = self._params(step)
        cur = conn.cursor(row_factory=dict_row)
        _cursor_json_as_text(conn, cur)
        await cur.execute(text, params)
        return await cur.fetchall() if _has_columns(cur) else []

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
            UnsupportedBackend: ``conn`` is no psycopg connection (a ``sqlite3`` one).
            EventLoopMismatch: called from an event loop other than this backend's.
        """
        _require_psycopg_connection(conn)
        self._acheck_loop()
        if not self._setup_done:
            await self.aopen()
        try:
            if self.schema is not None:
                await adrive(
                    opening().installation_check(self.schema),
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
