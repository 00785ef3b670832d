"""``PostgresStore``: a store on PostgreSQL."""

from __future__ import annotations

from typing import Any

from ..backends import Backend, PgExecutorBackend, is_executor, registration
from ..errors import UnsupportedBackend
from .base import TaskStore

__all__ = ["PostgresStore"]


class PostgresStore(TaskStore):
    """A store on PostgreSQL, through a DSN or the application's psycopg pool or connection.

    Args:
        source: A DSN (``postgresql://user@host/db``), a psycopg pool or connection
            (used, never closed).
        min_size, max_size: Pool size when the store makes the pool.
        schema: The schema holding cairnq's tables (see ``PostgresBackend``).
        **options: Further ``PostgresBackend`` options (``migrate``, ``listen``, ...).

    Raises:
        InvalidArgument: ``source`` is none of these.

    Example::

        store = PostgresStore("postgresql://localhost/app", max_size=4)
        await store.connect()
    """

    def __init__(
        self,
        source: Any,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(
            _postgres_backend(
                source, min_size=min_size, max_size=max_size, schema=schema, **options
            ),
            owns_backend=True,
        )


def _postgres_backend(source: Any, **options: Any) -> Backend:
    """The backend a ``PostgresStore`` runs on, for every kind of ``source`` it accepts.

    A ``PgExecutor`` (``create_pool_executor``, or one's own) runs on the executor
    backend, which sizes no pool; anything else is opened through the backend
    registry: the ``postgresql`` opener takes a DSN, a psycopg pool or a connection.
    """
    if is_executor(source):
        options.pop("min_size", None)
        options.pop("max_size", None)
        return PgExecutorBackend(source, **options)
    entry = registration("postgresql")
    if entry is None:  # pragma: no cover - registered when cairnq.backends loads
        raise UnsupportedBackend("no PostgreSQL backend is registered")
    return entry.opener(source, **options)
