"""The test suite's PostgreSQL schema pool: one migrated schema per test process, emptied
between tests, and thrown away when a test leaves a session that could reach it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._db import SchemaPool, admin_connect

pytestmark = pytest.mark.postgres


@pytest.fixture
def pool(pg_dsn: str) -> Iterator[SchemaPool]:
    pool = SchemaPool(pg_dsn)
    try:
        yield pool
    finally:
        pool.close()


def _schemas(dsn: str) -> set[str]:
    with admin_connect(dsn) as conn:
        return {name for (name,) in conn.execute("select nspname from pg_namespace")}


def _write_a_task(dsn: str, schema: str) -> None:
    with admin_connect(dsn) as conn:
        conn.execute(f'set search_path to "{schema}"')
        conn.execute(
            "insert into cairnq_tasks (id, name, queue, status, payload, metadata,"
            " created_at_ms, updated_at_ms, run_at_ms) values"
            " ('task_x', 'job', 'default', 'queued', '{}', '{}', 0, 0, 0)"
        )


def _tasks(dsn: str, schema: str) -> int:
    with admin_connect(dsn) as conn:
        conn.execute(f'set search_path to "{schema}"')
        return int(conn.execute("select count(*) from cairnq_tasks").fetchone()[0])


def test_the_next_test_gets_the_schema_emptied_under_a_new_name(
    pool: SchemaPool, pg_dsn: str
) -> None:
    first = pool.checkout()
    kept = pool._seed
    _write_a_task(pg_dsn, first)
    pool.checkin()
    second = pool.checkout()
    assert second != first and first not in _schemas(pg_dsn) and pool._seed == kept
    assert _tasks(pg_dsn, second) == 0


def test_a_session_the_test_left_open_throws_the_schema_away(pool: SchemaPool, pg_dsn: str) -> None:
    first = pool.checkout()
    leaked = admin_connect(pg_dsn)
    try:
        pool.checkin()
        assert pool._schema is None and first not in _schemas(pg_dsn)
    finally:
        leaked.close()


def test_a_session_left_by_an_earlier_test_does_not_throw_away_the_next_schema(
    pool: SchemaPool, pg_dsn: str
) -> None:
    pool.checkout()
    leaked = admin_connect(pg_dsn)
    try:
        pool.checkin()  # thrown away: the leak could reach it
        second = pool.checkout()  # built after the leak: out of its reach
        pool.checkin()
        assert pool._schema == second
    finally:
        leaked.close()


def test_a_session_opened_between_two_tests_throws_the_schema_away(
    pool: SchemaPool, pg_dsn: str
) -> None:
    pool.checkout()
    pool.checkin()
    kept = pool._seed
    late = admin_connect(pg_dsn)
    try:
        pool.checkout()
        # A new schema was migrated (its rows' side schema is new), not the old one renamed.
        assert pool._seed != kept and kept not in _schemas(pg_dsn)
    finally:
        late.close()
