"""A migration ledger that disagrees with the tables (objects dropped from outside).

Opening, ``cairnq.migrate`` and ``cairnq migrate`` refuse it in one line naming what
is missing; ``--status`` marks the damaged migrations; ``repair`` applies the
earliest damaged migration and every later one again. A statement that meets a
missing cairnq table raises ``SchemaIncomplete``, and a worker that meets one stops
with it instead of retrying forever. Both backends, real databases.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

import pytest

import cairnq
from cairnq import InvalidArgument, SchemaIncomplete, SyncCairnQ
from cairnq.cli._schema import gap_note
from cairnq.protocol.statements import migrations

from ._db import Database, admin_connect
from .test_cli import cli_url, one_error_line, run_on
from .test_schema import read_schema

RECORDED_AND_MISSING = "the migration ledger records 0001_init.sql"


def outside(db: Database, statement: str) -> list[tuple[Any, ...]]:
    """Run SQL the way another program would: SQLite without foreign keys, PostgreSQL as admin."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(str(db.path))) as conn, conn:
            return conn.execute(statement).fetchall()
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def drop_task_table(db: Database) -> None:
    # PostgreSQL refuses without cascade: the key table's foreign key depends on it.
    outside(db, "drop table cairnq_tasks" + (" cascade" if db.kind == "postgres" else ""))


def exists(db: Database, name: str) -> bool:
    """Whether a table or index called ``name`` exists, read without cairnq."""
    if db.kind == "sqlite":
        query = f"select count(*) from sqlite_master where name = '{name}'"
    else:
        query = f"select count(*) from pg_class where relname = '{name}'"
        query += f" and relnamespace = '{db.schema}'::regnamespace"
    return bool(outside(db, query)[0][0])


def task_table_exists(db: Database) -> bool:
    return exists(db, "cairnq_tasks")


def ledger(db: Database) -> list[str]:
    return [row[0] for row in outside(db, "select name from cairnq_migrations order by name")]


@pytest.fixture
def cq(db: Database) -> SyncCairnQ:
    """A client on ``db``, which it creates and migrates."""
    return db.sync_client().open()


def migrate_db(db: Database, **options: Any) -> list[str]:
    """``cairnq.migrate`` on ``db``, given as a URL."""
    if db.kind == "postgres":
        options.update(schema=db.schema, listen=False)
    return cairnq.migrate(cli_url(db), **options)


def comparable(schema: dict[str, Any]) -> dict[str, Any]:
    # `drop table ... cascade` also drops the key table's foreign key on PostgreSQL; the
    # key table survives, so no migration (create table if not exists) re-creates it.
    return {k: v for k, v in schema.items() if k != "fks"}


# --- opening and cairnq.migrate --------------------------------------------------------------


def test_opening_a_database_whose_task_table_was_dropped_refuses_naming_it(
    db: Database, cq: SyncCairnQ
) -> None:
    drop_task_table(db)
    with pytest.raises(SchemaIncomplete) as caught:
        db.backend().open()
    message = str(caught.value)
    assert message.startswith(RECORDED_AND_MISSING)
    assert "table cairnq_tasks" in message and "cairnq migrate --repair" in message
    assert "\n" not in message
    assert "table cairnq_tasks" in caught.value.missing
    assert caught.value.retryable is False


def test_migrate_refuses_a_ledger_that_records_a_dropped_table_and_changes_nothing(
    db: Database, cq: SyncCairnQ
) -> None:
    before = ledger(db)
    drop_task_table(db)
    with pytest.raises(SchemaIncomplete, match="table cairnq_tasks"):
        migrate_db(db)
    assert ledger(db) == before
    assert not task_table_exists(db)


def test_migrate_with_repair_restores_the_schema_the_migrations_make(
    db: Database, cq: SyncCairnQ
) -> None:
    fresh = comparable(read_schema(db))
    drop_task_table(db)
    applied = migrate_db(db, repair=True)
    assert applied == [m.name for m in migrations(db.kind)]  # type: ignore[arg-type]
    assert comparable(read_schema(db)) == fresh


def test_a_repaired_database_takes_tasks_again(db: Database, cq: SyncCairnQ) -> None:
    drop_task_table(db)
    db.backend(repair=True).open()
    with db.sync_client() as client:
        task = client.submit("after.repair", {"n": 1})
        assert client.get(task.id) == task


def test_a_dropped_index_alone_is_named_and_repair_keeps_the_rows(
    db: Database, cq: SyncCairnQ
) -> None:
    task = cq.submit("kept", {"n": 1})
    outside(db, "drop index cairnq_tasks_lease_idx")
    with pytest.raises(SchemaIncomplete) as caught:
        db.backend().open()
    assert caught.value.missing == ("index cairnq_tasks_lease_idx",)
    assert "0004_lease_index.sql as applied, but index cairnq_tasks_lease_idx is missing" in str(
        caught.value
    )
    db.backend(repair=True).open()
    with db.sync_client() as client:
        assert client.get(task.id) == cq.get(task.id) is not None
    assert exists(db, "cairnq_tasks_lease_idx")


def test_after_a_newer_sdks_migration_a_missing_index_is_not_damage_but_a_table_is(
    db: Database, cq: SyncCairnQ
) -> None:
    # A migration this version does not ship may have dropped the index on purpose.
    outside(db, "insert into cairnq_migrations (name, applied_at_ms) values ('0011_future.sql', 1)")
    outside(db, "drop index cairnq_tasks_name_idx")
    db.backend().open()
    drop_task_table(db)
    with pytest.raises(SchemaIncomplete, match="table cairnq_tasks"):
        db.backend().open()


def test_repair_refuses_a_ledger_naming_a_migration_this_version_does_not_ship(
    db: Database, cq: SyncCairnQ
) -> None:
    outside(db, "insert into cairnq_migrations (name, applied_at_ms) values ('0011_future.sql', 1)")
    drop_task_table(db)
    with pytest.raises(
        SchemaIncomplete, match=r"cannot repair it: the ledger also records 0011_future\.sql"
    ):
        db.backend(repair=True).open()
    assert not task_table_exists(db)


def test_a_healthy_database_opens_without_applying_anything_even_with_repair(
    db: Database, cq: SyncCairnQ
) -> None:
    backend = db.backend(repair=True)
    backend.open()
    assert backend.migrations_applied == []  # type: ignore[attr-defined]


def test_repair_without_migrate_is_refused(db: Database) -> None:
    with pytest.raises(InvalidArgument, match="repair=True needs migrate=True"):
        db.backend(repair=True, migrate=False)


def test_migrate_with_repair_refuses_a_backend_opened_without_it(
    db: Database, cq: SyncCairnQ
) -> None:
    with pytest.raises(InvalidArgument, match="repair=True"):
        cairnq.migrate(db.backend(), repair=True)


# --- statements and workers that meet a missing table ----------------------------------------


def test_a_statement_on_a_dropped_table_raises_schema_incomplete(
    db: Database, cq: SyncCairnQ
) -> None:
    drop_task_table(db)
    with pytest.raises(SchemaIncomplete, match="cairnq table cairnq_tasks is missing") as caught:
        cq.submit("lost")
    assert caught.value.retryable is False
    assert caught.value.missing == ("table cairnq_tasks",)


async def run_until_it_stops(worker: cairnq.Worker) -> BaseException | None:
    """Run ``worker``; what ``run`` raised, or None. Bounded only against a hang."""
    try:
        await asyncio.wait_for(worker.run(), timeout=30)
    except asyncio.TimeoutError:
        worker.stop()
        raise AssertionError("the worker kept running") from None
    except BaseException as exc:
        return exc
    finally:
        await worker.close()
    return None


async def test_a_worker_whose_task_table_is_dropped_while_it_runs_stops_with_the_error(
    db: Database, cq: SyncCairnQ
) -> None:
    worker = db.worker(poll_interval_ms=20)
    worker.register("t", lambda ctx, payload: None)
    running = asyncio.ensure_future(run_until_it_stops(worker))
    await asyncio.sleep(0)
    while not worker._running:
        await asyncio.sleep(0.01)
    await asyncio.to_thread(drop_task_table, db)
    stopped = await running
    assert isinstance(stopped, SchemaIncomplete)
    assert "cairnq_tasks" in str(stopped)


async def test_a_worker_that_does_not_migrate_stops_at_its_first_claim_of_a_dropped_table(
    db: Database, cq: SyncCairnQ
) -> None:
    drop_task_table(db)
    client = cairnq.CairnQ(db.backend(migrate=False))
    client._owns_backend = True
    worker = cairnq.Worker(client, poll_interval_ms=20)
    worker._owns_client = True
    worker.register("t", lambda ctx, payload: None)
    stopped = await run_until_it_stops(worker)
    assert isinstance(stopped, SchemaIncomplete)
    assert "cairnq table cairnq_tasks is missing" in str(stopped)


async def test_a_migrating_worker_refuses_to_start_on_a_dropped_table(
    db: Database, cq: SyncCairnQ
) -> None:
    drop_task_table(db)
    worker = db.worker(poll_interval_ms=20)
    worker.register("t", lambda ctx, payload: None)
    stopped = await run_until_it_stops(worker)
    assert isinstance(stopped, SchemaIncomplete)
    assert str(stopped).startswith(RECORDED_AND_MISSING)


# --- the command -----------------------------------------------------------------------------


def test_the_command_refuses_a_dropped_table_in_one_line_naming_it_and_the_repair(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    drop_task_table(db)
    result = run_on(db, capsys, "migrate")
    assert result.code == 1
    line = one_error_line(result)
    assert "table cairnq_tasks" in line and "cairnq migrate --repair" in line
    assert not task_table_exists(db)


def test_the_command_status_marks_damaged_migrations_and_says_how_to_repair(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    outside(db, "drop index cairnq_tasks_lease_idx")
    result = run_on(db, capsys, "migrate", "--status")
    assert result.code == 0
    damaged = [line for line in result.lines if line.startswith("damaged")]
    assert len(damaged) == 1
    assert damaged[0].split()[1] == "0004_lease_index.sql"
    assert damaged[0].endswith("missing index cairnq_tasks_lease_idx")
    assert "cairnq migrate --repair" in result.lines[-1]


def test_the_command_dry_run_with_repair_lists_what_it_would_apply_again(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    outside(db, "drop index cairnq_tasks_lease_idx")
    result = run_on(db, capsys, "migrate", "--dry-run", "--repair")
    names = [m.name for m in migrations(db.kind)]  # type: ignore[arg-type]
    later = names[names.index("0004_lease_index.sql") :]
    assert result.lines == [f"would apply again  {name}" for name in later]
    assert not exists(db, "cairnq_tasks_lease_idx")


def test_the_command_repair_prints_each_migration_applied_again_then_nothing_is_left(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    drop_task_table(db)
    repaired = run_on(db, capsys, "migrate", "--repair")
    again = run_on(db, capsys, "migrate")
    assert repaired.code == 0, repaired.err
    names = [m.name for m in migrations(db.kind)]  # type: ignore[arg-type]
    assert repaired.lines == [f"applied again  {name}" for name in names] + gap_note(db.kind, names)
    assert again.lines[0].startswith("nothing to apply")
    assert task_table_exists(db)


def test_read_commands_refuse_a_damaged_database_with_the_repair_line(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    drop_task_table(db)
    result = run_on(db, capsys, "ls")
    assert result.code == 1
    assert one_error_line(result).startswith(f"cairnq: error: {RECORDED_AND_MISSING}")
