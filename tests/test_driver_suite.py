"""The driver suite (``cairnq.drivertest``) on every backend cairnq ships.

This module is what a backend's own tests look like: one ``driver`` fixture,
then the suite's tests imported by name. Here the fixture wraps the shared
test ``Database`` (``tests/_db.py``), and the transition log is the chaos
checker's (``tests/chaos/dbtools.py``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest

from cairnq._clock import Clock
from cairnq.backends import Backend
from cairnq.drivertest import *  # noqa: F403
from cairnq.protocol.statements import Dialect

from ._db import Database, admin_connect
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
def driver(request: pytest.FixtureRequest) -> DatabaseDriver:
    """An empty, migrated database of each backend cairnq ships (the ``db`` fixtures';
    not yet migrated for a test marked ``fresh_schema``)."""
    if request.param == "sqlite":
        return DatabaseDriver(request.getfixturevalue("sqlite_db"), "sqlite", "sqlite")
    return DatabaseDriver(request.getfixturevalue("pg_db"), "postgres", "postgres")
