"""cairnq's pytest plugin: a fresh, migrated database per test.

Installed with cairnq (entry point ``pytest11``), so the fixtures need no
``conftest.py``:

- ``cairnq_sqlite``: the path of a new SQLite file, copied from a template
  migrated once per session.
- ``cairnq_postgres``: the DSN of a new PostgreSQL database, made with
  ``CREATE DATABASE ... TEMPLATE`` from a template migrated once per session,
  dropped after the test. The server is ``$CAIRNQ_TEST_POSTGRES_URL``; without it,
  or when it cannot be reached, the test is skipped with the reason
  (``CAIRNQ_REQUIRE_POSTGRES=1`` fails it instead).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

POSTGRES_URL_VARIABLE = "CAIRNQ_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def cairnq_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with cairnq's schema, made once per session (copied by ``cairnq_sqlite``)."""
    from cairnq.backends import SQLiteBackend

    path = tmp_path_factory.mktemp("cairnq-template") / "template.db"
    backend = SQLiteBackend(str(path))
    backend.open()
    backend.close()
    return path


@pytest.fixture
def cairnq_sqlite(cairnq_sqlite_template: Path, tmp_path: Path) -> str:
    """The path of a fresh SQLite database with cairnq's schema, for this test alone.

    Example::

        async def test_submit(cairnq_sqlite):
            async with CairnQ.sqlite(cairnq_sqlite) as cq:
                await cq.submit("job", {})
    """
    target = tmp_path / "cairnq.db"
    shutil.copyfile(cairnq_sqlite_template, target)
    os.chmod(target, 0o600)
    return str(target)


class _Server:
    """The test server and the session's template database."""

    def __init__(self, url: str) -> None:
        import cairnq.backends as postgres

        self.url = url
        self.template = f"cairnq_template_{os.getpid()}_{secrets.token_hex(3)}"
        self._backends: Any = postgres
        postgres.create_database(url, self.template)

    def dsn(self, name: str) -> str:
        return str(self._backends.make_dsn(self.url, dbname=name))

    def create(self, name: str) -> None:
        self._backends.create_database(self.url, name, template=self.template)

    def drop(self, name: str) -> None:
        self._backends.drop_database(self.url, name)


@pytest.fixture(scope="session")
def cairnq_postgres_template() -> Iterator[_Server]:
    """A PostgreSQL database with cairnq's schema, made once per session, and the admin link."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    required = os.environ.get("CAIRNQ_REQUIRE_POSTGRES") == "1"
    problem = None
    server = None
    if not url:
        problem = f"set {POSTGRES_URL_VARIABLE} to a PostgreSQL server for cairnq_postgres"
    else:
        try:
            server = _Server(url)
        except Exception as exc:
            problem = f"PostgreSQL not reachable at {url}: {exc}"
    if server is None:
        if required:
            pytest.fail(f"{problem} (CAIRNQ_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(problem or "no PostgreSQL")
    from cairnq.backends import PostgresBackend

    try:
        backend = PostgresBackend(server.dsn(server.template), min_size=1, max_size=1)
        backend.open()
        backend.close()
        yield server
    finally:
        server.drop(server.template)


@pytest.fixture
def cairnq_postgres(cairnq_postgres_template: _Server) -> Iterator[str]:
    """The DSN of a fresh PostgreSQL database with cairnq's schema, dropped after the test.

    Example::

        async def test_submit(cairnq_postgres):
            async with CairnQ.postgres(cairnq_postgres) as cq:
                await cq.submit("job", {})
    """
    server = cairnq_postgres_template
    name = f"cairnq_test_{secrets.token_hex(6)}"
    server.create(name)
    try:
        yield server.dsn(name)
    finally:
        server.drop(name)
