"""PostgreSQL's driver errors as ``cairnq.errors``: the one place the psycopg backend
translates them."""

from __future__ import annotations

import re

from .._extras import missing_extra

try:
    import psycopg
    import psycopg_pool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("PostgreSQL support", "postgres", "psycopg, psycopg-pool") from exc

from ..errors import CairnQError, DatabaseError, DatabaseUnavailable, StoreClosed
from .base import missing_table

_UNDEFINED_RELATION = re.compile(r'relation "(?:[^".]+\.)?([^".]+)" does not exist')


def translate(exc: BaseException) -> BaseException:
    """Turn a psycopg error into a ``cairnq.errors`` one; anything else passes through."""
    if isinstance(exc, CairnQError) or not isinstance(
        exc, (psycopg.Error, psycopg_pool.PoolTimeout)
    ):
        return exc
    if isinstance(exc, psycopg_pool.PoolClosed):
        # Closed under its user (the event loop it belongs to ended): no retry reopens it.
        return StoreClosed(f"this PostgreSQL backend's connection pool was closed: {exc}")
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
