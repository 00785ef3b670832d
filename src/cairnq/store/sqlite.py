"""``SQLiteStore``: a store on a SQLite file."""

from __future__ import annotations

import os
from typing import Any

from ..backends import SQLiteBackend
from .base import TaskStore

__all__ = ["SQLiteStore"]


class SQLiteStore(TaskStore):
    """A store on a SQLite file, created and migrated on ``connect()``.

    Args:
        path: The database file (its directory must exist).
        busy_timeout_ms: How long a write waits for another process's lock.
        **options: Further ``SQLiteBackend`` options (``clock``, ``migrate``, ...).

    Example::

        store = SQLiteStore("tasks.db")
        await store.connect()
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000, **options: Any
    ) -> None:
        super().__init__(
            SQLiteBackend(path, busy_timeout_ms=busy_timeout_ms, **options), owns_backend=True
        )
