"""The SQLite backend's one translation of ``sqlite3`` errors into ``cairnq.errors``."""

from __future__ import annotations

import sqlite3

from ..errors import CairnQError, DatabaseBusy, DatabaseError, DatabaseUnavailable
from ._sqlite_files import _permission_problem
from .base import missing_table


def _busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite reporting the write lock held by another connection."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    return name.startswith("SQLITE_BUSY") or "database is locked" in str(exc)


def _out_of_space(exc: BaseException) -> bool:
    """A ``sqlite3`` error that may mean the disk is full (``SQLITE_FULL``, an I/O error)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    name = str(getattr(exc, "sqlite_errorname", ""))
    text = str(exc)
    return (
        name.startswith(("SQLITE_FULL", "SQLITE_IOERR"))
        or "database or disk is full" in text
        or "disk I/O error" in text
    )


def _translate(exc: BaseException, busy_timeout_ms: int, path: str | None = None) -> BaseException:
    """Turn a ``sqlite3`` error into a ``cairnq.errors`` one; anything else passes through.

    ``path`` is the database file: an error opening or writing it names the file
    and, when permissions are the cause, what this process may not do.
    """
    if isinstance(exc, CairnQError) or not isinstance(exc, sqlite3.Error):
        return exc
    name = str(getattr(exc, "sqlite_errorname", ""))
    text = str(exc)
    where = f" {path!r}" if path else ""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return DatabaseBusy(
            f"SQLite database is locked: another connection held the write lock for longer "
            f"than busy_timeout_ms={busy_timeout_ms}"
        )
    if name.startswith("SQLITE_FULL") or "database or disk is full" in text:
        return DatabaseError(f"SQLite database or disk is full: {text}", retryable=True)
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return DatabaseError(
            f"SQLite could not read or write the disk ({name or text}); is it full or failing?",
            retryable=True,
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        problem = _permission_problem(path) if path else None
        because = f": {problem}" if problem else ""
        return DatabaseError(
            f"SQLite database{where} is read-only for this process ({text}){because}"
        )
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        problem = _permission_problem(path) if path else None
        if problem:
            return DatabaseUnavailable(f"cannot open SQLite database{where}: {problem}")
        return DatabaseUnavailable(f"cannot open SQLite database{where}: {text}")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in text:
        return DatabaseError(f"file is not a usable SQLite database: {text}")
    if "no such table: cairnq_" in text:
        return missing_table(text.rsplit(":", 1)[-1].strip())
    if isinstance(exc, sqlite3.IntegrityError):
        return DatabaseError(f"SQLite rejected the write: {text}")
    return DatabaseError(f"SQLite error: {text}")
