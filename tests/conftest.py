"""Shared fixtures: one test body runs on every backend.

``db`` is a fresh, empty database for one test: a SQLite file in ``tmp_path``,
or a new schema in a PostgreSQL test database. PostgreSQL is found at
``CAIRNQ_TEST_POSTGRES_URL`` (default ``postgresql://127.0.0.1:5432/postgres``);
when it cannot be reached its tests are skipped with the reason, unless
``CAIRNQ_REQUIRE_POSTGRES=1`` (set by CI), which turns that into a failure.
"""

from __future__ import annotations

import inspect
import os
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from ._db import Database, PluginDatabase, admin_connect, drop_schema

PG_URL = os.environ.get("CAIRNQ_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("CAIRNQ_REQUIRE_POSTGRES") == "1"


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL database created for this test session, dropped afterwards."""
    try:
        import psycopg  # noqa: F401

        admin = admin_connect(PG_URL)
    except Exception as exc:
        message = f"PostgreSQL not reachable at {PG_URL}: {exc}"
        if REQUIRE_PG:
            pytest.fail(f"{message} (CAIRNQ_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(message)
    name = f"cairnq_test_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'create database "{name}"')
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(PG_URL, dbname=name)
    try:
        yield dsn
    finally:
        with admin_connect(PG_URL) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Database]:
    """A fresh database on each backend."""
    if request.param == "sqlite":
        database = Database.sqlite(tmp_path / "cairnq.db")  # type: ignore[operator]
        yield database
        database.close_all()
        return
    dsn = request.getfixturevalue("pg_dsn")
    database = Database.postgres(dsn, f"t_{secrets.token_hex(5)}")
    try:
        yield database
    finally:
        database.close_all()
        drop_schema(dsn, database.schema or "")


@pytest.fixture(autouse=True)
def _pools_closed_on_the_test_loop(request: pytest.FixtureRequest) -> None:
    """In an async test on ``db``, close its PostgreSQL backends on the test's own loop.

    Left open, their async pools would be cancelled mid-flight when the loop ends.
    """
    if "db" in request.fixturenames and inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_db_backends_aclosed")


@pytest.fixture
async def _db_backends_aclosed(db: Database) -> AsyncIterator[None]:
    yield
    if db.kind == "postgres":
        await db.aclose_all()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh(request: pytest.FixtureRequest) -> PluginDatabase:
    """A fresh, migrated database on each backend, from cairnq's own pytest plugin.

    The plugin's ``cairnq_sqlite`` copies a template file and ``cairnq_postgres``
    creates a database from a template (``$CAIRNQ_TEST_POSTGRES_URL``).
    """
    fixture = "cairnq_sqlite" if request.param == "sqlite" else "cairnq_postgres"
    return PluginDatabase(request.param, str(request.getfixturevalue(fixture)))


@pytest.fixture
def sqlite_db(tmp_path: object) -> Iterator[Database]:
    """A fresh SQLite database (for SQLite-only behaviour)."""
    database = Database.sqlite(tmp_path / "cairnq.db")  # type: ignore[operator]
    yield database
    database.close_all()


@pytest.fixture
def pg_db(pg_dsn: str) -> Iterator[Database]:
    """A fresh PostgreSQL schema (for PostgreSQL-only behaviour)."""
    database = Database.postgres(pg_dsn, f"t_{secrets.token_hex(5)}")
    try:
        yield database
    finally:
        database.close_all()
        drop_schema(pg_dsn, database.schema or "")
