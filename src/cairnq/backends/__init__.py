"""Database backends behind one seam (see ``base``), opened by URL scheme.

SQLite registers ``sqlite://`` and plain file paths; PostgreSQL registers
``postgresql://`` and ``postgres://`` here, importing its driver only when
such a URL is opened. ``PgExecutorBackend`` runs PostgreSQL through a
``PgExecutor`` (asyncpg's pool from ``create_pool_executor``, or the
application's own); it has no URL scheme.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .._clock import Clock
from ._asyncpg_executor import create_pool_executor
from ._postgres_inspect import tool_options as _postgres_tool_options
from ._registry import (
    Opening,
    Registration,
    open_backend,
    opening,
    register_backend,
    register_opening,
    registration,
    url_scheme,
)
from ._sqlite_files import sqlite_path_from_url
from .base import (
    AroundRunner,
    Backend,
    Clocked,
    Described,
    FileBound,
    Inspection,
    Inspector,
    InTransactionCompleter,
    Migrating,
    OneStatementClaims,
    ReservedRunner,
    StreamedBatches,
    TransactionalRunner,
    clock_of,
    description_of,
    label_of,
    migration_settings,
)
from .pg_executor import SYNC_REFUSED as EXECUTOR_SYNC_REFUSED
from .pg_executor import (
    PgExecutor,
    PgExecutorBackend,
    PgSession,
    is_executor,
)
from .sqlite import SQLiteBackend, Synchronous

if TYPE_CHECKING:
    from .postgres import (
        PostgresBackend,
        create_database,
        drop_database,
        make_dsn,
        scratch_schema_backend,
    )

__all__ = [
    "AroundRunner",
    "Backend",
    "Clocked",
    "Described",
    "Migrating",
    "clock_of",
    "description_of",
    "label_of",
    "migration_settings",
    "FileBound",
    "OneStatementClaims",
    "StreamedBatches",
    "InTransactionCompleter",
    "Inspection",
    "Inspector",
    "PgExecutor",
    "PgExecutorBackend",
    "PgSession",
    "PostgresBackend",
    "create_database",
    "create_pool_executor",
    "drop_database",
    "make_dsn",
    "EXECUTOR_SYNC_REFUSED",
    "is_executor",
    "Opening",
    "Registration",
    "ReservedRunner",
    "SQLiteBackend",
    "Synchronous",
    "TransactionalRunner",
    "open_backend",
    "opening",
    "register_backend",
    "register_opening",
    "registration",
    "scratch_schema_backend",
    "sqlite_path_from_url",
    "url_scheme",
]


def __getattr__(name: str) -> Any:
    # PostgreSQL's names load psycopg, an optional extra: only when asked for.
    if name in (
        "PostgresBackend",
        "scratch_schema_backend",
        "create_database",
        "drop_database",
        "make_dsn",
    ):
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _open_postgres(url: str, **options: Any) -> Backend:
    from .postgres import PostgresBackend

    return PostgresBackend(url, **options)


def _scratch_postgres(url: str, clock: Clock | None) -> AbstractContextManager[Backend]:
    from .postgres import scratch_schema_backend

    return scratch_schema_backend(url, clock=clock)


register_backend(
    ["postgresql", "postgres"],
    _open_postgres,
    dialect="postgres",
    has_schemas=True,
    tool_options=_postgres_tool_options,
    scratch=_scratch_postgres,
)
