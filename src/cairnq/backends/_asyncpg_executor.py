"""A ``PgExecutor`` on an asyncpg pool: ``create_pool_executor`` and ``PoolExecutor``.

The pool opens on first use (or when the executor is awaited), in the schema it
names when it names one (created if missing, under an advisory lock). A
transaction runs on one pooled connection; LISTEN runs on a dedicated
connection, after a probe notification proves that notifications arrive.
``PgExecutorBackend`` (``backends/pg_executor.py``) runs cairnq's operations
through it, or through any other ``PgExecutor``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from .. import _checks
from .._checks import check_schema
from .._extras import missing_extra
from ..errors import InvalidArgument, ListenUnavailable, StoreClosed


class _ConnectionSession:
    """A ``PgSession`` on one asyncpg connection (inside a transaction)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def query(self, text: str, values: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        rows: Sequence[Mapping[str, Any]] = await self._conn.fetch(text, *values)
        return rows

    async def execute(self, sql: str) -> Any:
        return await self._conn.execute(sql)


async def _keep_session(conn: Any) -> None:
    """A released pooled connection keeps its session: cairnq's statements leave none behind."""


class PoolExecutor:
    """A ``PgExecutor`` on an asyncpg pool; see ``create_pool_executor``."""

    def __init__(self, dsn: str, *, min_size: int, max_size: int, schema: str | None) -> None:
        try:
            import asyncpg
        except ImportError as exc:
            raise missing_extra("The PostgreSQL executor", "asyncpg", "asyncpg") from exc
        self._asyncpg = asyncpg
        if not isinstance(dsn, str) or not dsn:
            raise InvalidArgument(f"create_pool_executor needs a PostgreSQL DSN, got {dsn!r}")
        self.dsn = dsn
        self.min_size = _checks.check_int(min_size, "min_size", low=0, high=10_000)
        self.max_size = _checks.check_int(max_size, "max_size", low=max(1, self.min_size))
        self.schema = check_schema(schema)
        self._pool: Any = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<PoolExecutor schema={self.schema!r} max_size={self.max_size}>"

    def __await__(self) -> Any:
        return self._opened().__await__()

    async def _opened(self) -> PoolExecutor:
        await self.pool()
        return self

    def _server_settings(self) -> dict[str, str]:
        return {"search_path": f'"{self.schema}"'} if self.schema else {}

    async def pool(self) -> Any:
        """The asyncpg pool, created on first use (with the schema, when one is named).

        Raises:
            StoreClosed: the executor was closed.
        """
        if self._closed:
            raise StoreClosed("this PgExecutor was closed")
        if self._pool is not None:
            return self._pool
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._pool is None:
                if self.schema is not None:
                    await self._create_schema()
                options: dict[str, Any] = {}
                if "reset" in inspect.signature(self._asyncpg.create_pool).parameters:
                    # asyncpg >= 0.30: a released connection's open transaction is still
                    # rolled back, without the extra round trip of its default reset query.
                    options["reset"] = _keep_session
                self._pool = await self._asyncpg.create_pool(
                    self.dsn,
                    min_size=self.min_size,
                    max_size=self.max_size,
                    server_settings=self._server_settings(),
                    **options,
                )
        return self._pool

    async def _create_schema(self) -> None:
        # Concurrent CREATE SCHEMA IF NOT EXISTS can collide in the catalog: creators
        # take a transaction-scoped advisory lock on the name first.
        conn = await self._asyncpg.connect(self.dsn)
        try:
            async with conn.transaction():
                await conn.execute(
                    "select pg_advisory_xact_lock(hashtextextended($1, 0))",
                    "cairnq_schema:" + str(self.schema),
                )
                await conn.execute(f'create schema if not exists "{self.schema}"')
        finally:
            await conn.close()

    async def query(self, text: str, values: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        """Run ``text`` with ``$n`` parameters on a pooled connection; the rows."""
        pool = await self.pool()
        rows: Sequence[Mapping[str, Any]] = await pool.fetch(text, *values)
        return rows

    async def execute(self, sql: str) -> Any:
        """Run parameterless ``sql`` (several statements allowed) on a pooled connection."""
        pool = await self.pool()
        return await pool.execute(sql)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_ConnectionSession]:
        """A transaction on one pooled connection; commits on exit, rolls back on an error."""
        pool = await self.pool()
        async with pool.acquire() as conn, conn.transaction():
            yield _ConnectionSession(conn)

    async def listen(
        self,
        channels: Sequence[str],
        on_notify: Callable[[str, str], None],
        on_close: Callable[[], None],
    ) -> Callable[[], Awaitable[None]]:
        """LISTEN on a dedicated connection (not from the pool); returns ``stop``.

        Delivery is proved first with a notification on a private channel.

        Raises:
            ListenUnavailable: LISTEN is refused, or a notification never arrives
                (a transaction pooler).
        """
        conn = await self._asyncpg.connect(self.dsn, server_settings=self._server_settings())
        import secrets

        probe = f"cairnq_probe_{secrets.token_hex(6)}"
        arrived = asyncio.Event()

        def deliver(_conn: Any, _pid: int, channel: str, payload: str) -> None:
            if channel == probe:
                arrived.set()
            else:
                on_notify(channel, payload)

        try:
            for channel in (*channels, probe):
                await conn.add_listener(channel, deliver)
            await (await self.pool()).execute("select pg_notify($1, '')", probe)
            await asyncio.wait_for(arrived.wait(), 5.0)
        except (asyncio.TimeoutError, self._asyncpg.FeatureNotSupportedError) as exc:
            await conn.close()
            raise ListenUnavailable(
                "notifications never arrive on this connection (a transaction pooler?): "
                + repr(exc)
            ) from exc
        except BaseException:
            await conn.close()
            raise
        await conn.remove_listener(probe, deliver)
        conn.add_termination_listener(lambda _conn: on_close())

        async def stop() -> None:
            with contextlib.suppress(Exception):
                await conn.close()

        return stop

    async def close(self) -> None:
        """Close the pool; later use raises ``StoreClosed``."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def create_pool_executor(
    dsn: str, *, min_size: int = 1, max_size: int = 10, schema: str | None = None
) -> PoolExecutor:
    """A ``PgExecutor`` on an asyncpg pool (needs the ``asyncpg`` extra).

    The pool opens on first use, or when the executor is awaited
    (``executor = await create_pool_executor(dsn)`` works too). LISTEN uses a
    dedicated connection of its own. A pooled connection is not reset when
    released (a transaction left open is rolled back): session settings made
    with ``execute`` stay on that connection. The caller closes the executor.

    Args:
        dsn: The database (``postgresql://user@host/db``).
        min_size, max_size: The pool's size.
        schema: Schema for cairnq's tables: created if missing and pinned first in
            every connection's ``search_path``.

    Returns:
        The executor, for ``CairnQ.postgres(executor)`` and ``Worker.postgres(executor)``.

    Raises:
        ImportError: asyncpg is not installed.
        InvalidArgument: a bad DSN, size or schema name.

    Example::

        executor = create_pool_executor("postgresql://localhost/app", max_size=20)
        async with CairnQ.postgres(executor) as cq:
            await cq.submit("email.send", {"to": "a@example.com"})
        await executor.close()
    """
    return PoolExecutor(dsn, min_size=min_size, max_size=max_size, schema=schema)
