"""The driver suite (``cairnq.drivertest``) on every backend cairnq ships.

This module is what a backend's own tests look like: one ``driver`` fixture,
then the suite's tests imported by name. Here the fixture wraps the shared
test ``Database`` (``tests/_db.py``), and the transition log is the chaos
checker's (``tests/chaos/dbtools.py``).
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairnq._clock import Clock
from cairnq.backends import Backend
from cairnq.drivertest import *  # noqa: F403
from cairnq.protocol.statements import Dialect

from ._db import Database, admin_connect, drop_schema
from .chaos import dbtools

WIPE = ("delete from cairnq_task_keys", "delete from cairnq_tasks")


@dataclass
class DatabaseDriver:
    """A ``cairnq.drivertest.Driver`` over one test ``Database``."""

    database: Database
    label: str
    dialect: Dialect

    def open(self, *, clock: Clock | None = None) -> Backend:
        backend = self.database.backend(clock=clock)
        backend.open()
        return backend

    def wipe(self) -> None:
        if self.database.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self.database.path or "")) as conn:
                for statement in WIPE:
                    conn.execute(statement)
                conn.commit()
            return
        with admin_connect(self.database.url) as conn:
            conn.execute(f'set search_path to "{self.database.schema}"')
            for statement in WIPE:
                conn.execute(statement)

    def install_transition_log(self) -> None:
        dbtools.install_transition_log(self.database)

    def transitions(self) -> list[dict[str, Any]]:
        return dbtools.transitions(self.database)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseDriver]:
    """A fresh database of each backend cairnq ships."""
    if request.param == "sqlite":
        database = Database.sqlite(tmp_path / "cairnq.db")
        yield DatabaseDriver(database, "sqlite", "sqlite")
        database.close_all()
        return
    dsn = request.getfixturevalue("pg_dsn")
    database = Database.postgres(dsn, f"t_{secrets.token_hex(5)}")
    try:
        yield DatabaseDriver(database, "postgres", "postgres")
    finally:
        database.close_all()
        drop_schema(dsn, database.schema or "")
