"""The multi-host backend: PostgreSQL through psycopg 3 and its connection pool.

Requires the ``postgres`` extra (``pip install ".[postgres]"``). A write
operation runs in one transaction on one pooled connection; a read runs in
autocommit. ``now_ms`` is left to the database clock unless a clock is given,
so every host shares one timeline. A dedicated LISTEN connection turns the
protocol's NOTIFY trigger into in-process wake-ups; it is only an accelerator,
polling stays the fallback.

The backend can also run on the application's own pool or connection, so a
task can be submitted, or settled, inside the application's transaction.

The async paths are written in ``_pg_async.py`` and the blocking ones
generated from them (``_pg_sync.py``); ``PostgresBackend``
mixes both in and adds what only one half has: closing, the heartbeat's
reserved connection and completing inside a handler's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from .._clock import Clock
from .._crashpoints import ARMED, around_commit
from ..errors import DatabaseUnavailable, LostLease
from ..protocol.steps import Op
from ._pg_async import AsyncPostgresPaths
from ._pg_errors import translate as _translate
from ._pg_sync import SyncPostgresPaths
from ._postgres_core import KEEPALIVES as KEEPALIVES
from ._postgres_core import LISTEN_CHANNELS as LISTEN_CHANNELS
from ._postgres_core import LISTEN_HEALTH_S as LISTEN_HEALTH_S
from ._postgres_core import MAX_IDENTIFIER_BYTES as MAX_IDENTIFIER_BYTES
from ._postgres_core import SCHEMA_NAME as SCHEMA_NAME
from ._postgres_core import Source as Source
from ._postgres_core import _op_name, log, psycopg, psycopg_pool, sql
from ._postgres_core import check_schema as check_schema
from ._postgres_inspect import PostgresDescription

T = TypeVar("T")
V = TypeVar("V")


class PostgresBackend(PostgresDescription, AsyncPostgresPaths, SyncPostgresPaths):
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
        listen_health: After this long without a notification, the LISTEN
            connection is probed; a probe unanswered this long means it is dead
            (a half-open socket) and it is replaced. A duration (``"10s"``,
            seconds as a number, a ``timedelta``), at most an hour (10 s).
        op_timeout: An operation still unanswered after this long fails with
            ``DatabaseUnavailable`` and its connection is discarded (a server or
            network that went silent); ``None`` waits forever. A blocking
            operation's connection is shut down under it when the time is up. A
            duration, at most a day (60 s).
        connect_timeout: With a DSN, how long opening keeps trying to reach the
            server before ``DatabaseUnavailable``: a duration, 1 s to an hour
            (30 s). Nothing listening or a server starting is tried again until
            then, with one warning per 5 s; a refusal no wait can fix (no such
            database, role or password) fails at the first attempt.
        **old: ``listen_health_s``, ``op_timeout_s``: the old spellings (seconds),
            kept for one release; each warns once.
    """

    async def aclose(self) -> None:
        own_loop = self._loops.check_close()
        self._state = "closed"
        if self._release_pool_guard is not None:
            self._release_pool_guard()
            self._release_pool_guard = None
        if not own_loop:
            # The loop these async connections belong to is closed: nothing can await
            # them any more. The sync pool is closed; the rest is left as close() does.
            if self._listener is not None:
                self.hub.remove_tap(self._listener)
            self._reserved = self._listener = None
            if self._owns_pools and isinstance(self._sync_source, psycopg_pool.ConnectionPool):
                await asyncio.get_running_loop().run_in_executor(None, self._sync_source.close)
            pool = self._async_source
            if self._owns_pools and pool is not None and not pool.closed:
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
                reserved = self._reserved
                value, emits = await self._abounded(
                    lambda: self._adrive_on(reserved, op, write=write)
                )
            except BaseException as exc:
                broken = isinstance(exc, (psycopg.OperationalError, DatabaseUnavailable))
                if broken and self._reserved is not None:
                    with contextlib.suppress(psycopg.Error):
                        await self._reserved.close()
                    self._reserved = None
                raise _translate(exc) from exc
        self.hub.publish(emits)
        return value

    async def arun_around_write(
        self,
        before: Op[bool],
        write: Callable[[psycopg.AsyncConnection[Any]], Awaitable[V]],
        after: Callable[[V | None], Op[T]],
    ) -> T:
        """Run ``before``, ``await write(conn)`` (unless ``before`` returned true) and
        ``after(its value)`` in one transaction on a pooled connection.

        ``before`` runs first, so whatever it locks (the attempt's row, in
        ``ctx.succeed_in``) stays locked until the commit, however long ``write``
        takes; whatever raises rolls back ``write``'s changes with the rest.
        """
        self._loops.check()
        try:
            async with self._async_connection() as conn:
                async with conn.transaction():
                    skip, _ = await self._adrive_on(conn, before, write=False)
                    value = None if skip else await write(conn)
                    op = after(value)
                    result, emits = await self._adrive_on(conn, op, write=True, commits=False)
                    if ARMED is not None:
                        around_commit("before_commit", _op_name(op))
                if ARMED is not None:
                    around_commit("after_commit", _op_name(op))
        except LostLease:
            raise
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return result

    async def arun_around(
        self,
        work: Callable[[psycopg.AsyncConnection[Any]], Any],
        after: Callable[[Any], Op[T]],
    ) -> T:
        """Run ``work(conn)`` and then ``after(value)`` in one transaction (transactional steps).

        ``work`` gets the transaction's async connection and may be a coroutine
        function; it must not commit or roll back. Whatever raises (``work``, or
        ``after``: a lost lease, a result that is not JSON) rolls back ``work``'s
        changes with the rest.
        """
        self._loops.check()
        if self._state != "open":
            await self.aopen()
        try:
            async with self._async_connection() as conn, conn.transaction():
                value = work(conn)
                if inspect.isawaitable(value):
                    value = await value
                result, emits = await self._adrive_on(conn, after(value), write=True, commits=False)
        except LostLease:
            raise
        except BaseException as exc:
            raise _translate(exc) from exc
        self.hub.publish(emits)
        return result


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


def make_dsn(base: str, **params: Any) -> str:
    """``base`` (a DSN) with ``params`` (libpq keywords) set; empty values are left out.

    Example::

        make_dsn("postgresql://app@db/app", dbname="app_test")
    """
    from psycopg.conninfo import make_conninfo

    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return make_conninfo(base, **kept)


def create_database(url: str, name: str, *, template: str | None = None) -> None:
    """``CREATE DATABASE name [TEMPLATE template]`` through the server at ``url``.

    Raises:
        DatabaseError: the server refused (a name taken, a template in use).
    """
    statement = sql.SQL("create database {}").format(sql.Identifier(name))
    if template is not None:
        statement += sql.SQL(" template {}").format(sql.Identifier(template))
    try:
        with psycopg.Connection.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)
    except BaseException as exc:
        raise _translate(exc) from exc


def drop_database(url: str, name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)`` through the server at ``url``."""
    statement = sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    try:
        with psycopg.Connection.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)
    except BaseException as exc:
        raise _translate(exc) from exc
