"""The protocol files as shipped; each dialect's parity is in the driver suite."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from cairnq.backends.sqlite import split_script
from cairnq.drivertest.test_parity import (
    DIALECT_EXTRAS,
    check_one_statement_per_file,
    check_statement_headers,
)
from cairnq.protocol.statements import DIALECTS, Dialect, migrations, statements

from ._db import Database


def test_both_dialects_ship_the_same_statements() -> None:
    sqlite_only, postgres_only = DIALECT_EXTRAS["sqlite"], DIALECT_EXTRAS["postgres"]
    assert set(statements("sqlite")) - sqlite_only == set(statements("postgres")) - postgres_only


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_statement_file_of_every_dialect_holds_one_statement(dialect: Dialect) -> None:
    check_one_statement_per_file(dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_statement_file_of_every_dialect_has_its_header(dialect: Dialect) -> None:
    check_statement_headers(dialect)


def test_postgres_text_has_no_leftover_named_parameters() -> None:
    for statement in statements("postgres").values():
        leftover = re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", statement.text)
        assert leftover == [], statement.name
        assert set(re.findall(r"%\((\w+)\)s", statement.text)) == statement.params


def test_sqlite_migrations_split_into_complete_statements() -> None:
    for migration in migrations("sqlite"):
        for part in split_script(migration.source):
            assert sqlite3.complete_statement(part), migration.name


def test_the_protocol_ships_as_package_data() -> None:
    import cairnq

    root = Path(cairnq.__file__).parent / "protocol"
    assert (root / "PROTOCOL.md").is_file()
    assert len(list((root / "sql" / "sqlite").glob("*.sql"))) == len(statements("sqlite"))


def _plan(db: Database, name: str, params: dict[str, object]) -> str:
    assert db.path is not None
    conn = sqlite3.connect(db.path)
    try:
        text = statements("sqlite")[name].text
        rows = conn.execute("explain query plan " + text, params).fetchall()
        return " | ".join(r[3] for r in rows)
    finally:
        conn.close()


def test_sqlite_single_queue_claim_reads_the_claim_index_in_order(sqlite_db: Database) -> None:
    with sqlite_db.sync_client() as client:
        client.stats()
    plan = _plan(
        sqlite_db,
        "claim_one_queue",
        {"queue": "q", "names": None, "now_ms": 0, "worker_id": "w", "lease_ms": 1, "limit": 1},
    )
    assert "cairnq_tasks_claim_idx" in plan
    assert "TEMP B-TREE" not in plan


def test_sqlite_single_queue_single_name_claim_needs_no_sort(sqlite_db: Database) -> None:
    with sqlite_db.sync_client() as client:
        client.stats()
    plan = _plan(
        sqlite_db,
        "claim_one_queue_one_name",
        {"queue": "q", "name": "n", "now_ms": 0, "worker_id": "w", "lease_ms": 1, "limit": 1},
    )
    assert "cairnq_tasks_claim_name_idx" in plan
    assert "TEMP B-TREE" not in plan
