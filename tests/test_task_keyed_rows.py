"""Extension tables keyed by task hold no foreign key to a protocol table.

Their rows go with their task through triggers on ``cairnq_tasks`` (x0011-x0014), so
``truncate cairnq_tasks, cairnq_task_keys`` (the reference SDK's test reset) works on a
database cairnq migrated, and a purge leaves no rows behind. ``cairnq_limit_keys`` has no
trigger (x0015): a row of a task that is gone counts for nothing and is pruned by limited
claims. Both backends, real databases, rows made through cairnq's public API.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import pytest

from cairnq import CairnQ, Limit, Task
from cairnq.extensions import Limits
from cairnq.kernel.setup import expected_objects
from cairnq.protocol.statements import DIALECTS, Dialect, migrations
from cairnq.testing import FakeClock

from ._db import Database, admin_connect
from .test_migrate_repair import outside
from .test_without_extensions import migrate_only

START = 1_800_000_000_000

# Every extension table with a task_id column, and the protocol tables none may reference.
TASK_KEYED = (
    "cairnq_dependencies",
    "cairnq_dependencies_satisfied",
    "cairnq_leases",
    "cairnq_limit_keys",
    "cairnq_parked",
    "cairnq_task_attempts",
    "cairnq_task_snoozes",
    "cairnq_task_steps",
)
# Rows of a task that is gone count for nothing here, and limited claims prune them.
HARMLESS = ("cairnq_limit_keys",)
FORGOTTEN = tuple(t for t in TASK_KEYED if t not in HARMLESS)
PROTOCOL_TABLES = ("cairnq_tasks", "cairnq_task_keys")
FORGET_MIGRATIONS = [
    "x0011_leases_forget.sql",
    "x0012_snoozes_forget.sql",
    "x0013_workflows_forget.sql",
    "x0014_steps_forget.sql",
    "x0015_limit_keys_unbound.sql",
]


def references_to_protocol_tables(db: Database) -> list[tuple[str, str]]:
    """``(table, referenced table)`` for every foreign key onto ``cairnq_tasks`` or
    ``cairnq_task_keys``, read from the catalog (PostgreSQL: from any schema)."""
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            tables = [
                r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")
            ]
            found = {
                (table, fk[2])
                for table in tables
                for fk in conn.execute("select * from pragma_foreign_key_list(?)", (table,))
                if fk[2] in PROTOCOL_TABLES
            }
        return sorted(found)
    with admin_connect(db.url) as conn:
        rows = conn.execute(
            "select distinct c.relname::text, p.relname::text from pg_constraint k "
            "join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid "
            "where k.contype = 'f' and p.relnamespace = %s::regnamespace "
            "and p.relname = any(%s) order by 1, 2",
            (db.schema, list(PROTOCOL_TABLES)),
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def row_counts(db: Database) -> dict[str, int]:
    return {t: int(outside(db, f"select count(*) from {t}")[0][0]) for t in TASK_KEYED}


def orphans(db: Database) -> dict[str, int]:
    """Rows per task-keyed table whose task is not in ``cairnq_tasks``."""
    return {
        t: int(
            outside(
                db, f"select count(*) from {t} where task_id not in (select id from cairnq_tasks)"
            )[0][0]
        )
        for t in TASK_KEYED
    }


async def fill_every_task_keyed_table(
    db: Database, cq: CairnQ, clock: FakeClock, *, migrate: bool = True
) -> None:
    """Through the public API: keyed tasks that a limited worker runs to the end, one with a
    step, one snoozed once; a dependent released by its dependency; and a dependent still
    parked on a dependency that succeeded and one that never runs."""
    worker = db.worker(
        clock=clock,
        migrate=migrate,
        poll_interval_ms=20,
        extensions=[Limits([_LIMIT])],
    )
    snoozed: list[str] = []

    @worker.task
    async def stepped(ctx: Any, payload: Any) -> int:
        return int(await ctx.step("one", lambda: 1))

    @worker.task
    async def napper(ctx: Any, payload: Any) -> str:
        if not snoozed:
            snoozed.append(ctx.task_id)
            await ctx.snooze(0)
        return "awake"

    first = await cq.submit("stepped", {"customer": "a"}, key="stepped-a")
    await cq.submit("napper", {"customer": "b"}, key="napper-b")
    await cq.submit("stepped", {"customer": "c"}, depends_on=[first])
    never = await cq.submit("stepped", {"customer": "d"}, queue="unserved")
    await worker.run(until_idle=True)
    await cq.submit("stepped", {"customer": "e"}, depends_on=[first, never])
    await worker.close()
    assert snoozed
    # The lease tokens an older cairnq's claims wrote (x0003), which this one no longer
    # writes: a database may still hold them, and they go with their tasks all the same.
    outside(db, "insert into cairnq_leases (task_id, token) select id, 1 from cairnq_tasks")


def _customer(task: Task) -> str:
    return str(task.payload["customer"])


# A function key, whose keys a claim records (a path key's are read from the task); only
# a worker that declares it can compute them.
_LIMIT = Limit.concurrency(5, queue="default", key=_customer)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


async def test_truncating_the_protocol_tables_empties_every_task_keyed_extension_table(
    pg_db: Database, clock: FakeClock
) -> None:
    async with pg_db.client(clock=clock) as cq:
        await fill_every_task_keyed_table(pg_db, cq, clock)
        assert all(row_counts(pg_db).values()), row_counts(pg_db)
        outside(pg_db, "truncate cairnq_tasks, cairnq_task_keys")
        counts = row_counts(pg_db)
        assert {t: counts[t] for t in FORGOTTEN} == dict.fromkeys(FORGOTTEN, 0)
        # The limit keys left behind count against nothing.
        [usage] = await cq.limits.usage()
        assert usage.running == {}


async def test_a_purge_leaves_no_rows_of_purged_tasks_and_a_full_drain_runs_after_it(
    db: Database, clock: FakeClock
) -> None:
    async with db.client(clock=clock) as cq:
        await fill_every_task_keyed_table(db, cq, clock)
        before = row_counts(db)
        clock.advance(1)
        purged = await cq.purge(older_than_ms=0)
        assert len(purged) == 3
        after = row_counts(db)
        for table in ("cairnq_leases", "cairnq_task_snoozes", "cairnq_task_steps"):
            assert after[table] < before[table], table
        assert {t: n for t, n in orphans(db).items() if t not in HARMLESS} == dict.fromkeys(
            FORGOTTEN, 0
        )
        [usage] = await cq.limits.usage()
        assert usage.running == {}
        again = [await cq.submit("stepped", {"customer": c}, key=f"stepped-{c}") for c in "ab"]
        worker = db.worker(clock=clock, poll_interval_ms=20, extensions=[Limits([_LIMIT])])
        worker.register("stepped", lambda ctx, payload: payload["customer"])
        await worker.run(until_idle=True)
        await worker.close()
        done = [await cq.get(task.id) for task in again]
    assert [(t.status, t.result) for t in done if t is not None] == [
        ("succeeded", "a"),
        ("succeeded", "b"),
    ]


def test_no_table_references_a_protocol_table_but_the_key_table(db: Database) -> None:
    with db.sync_client() as client:
        client.stats()
    assert references_to_protocol_tables(db) == [("cairnq_task_keys", "cairnq_tasks")]


def test_the_reference_check_reports_a_table_that_references_the_task_table(
    db: Database,
) -> None:
    with db.sync_client() as client:
        client.stats()
    outside(db, "create table cairnq_audit (task_id text references cairnq_tasks (id))")
    assert ("cairnq_audit", "cairnq_tasks") in references_to_protocol_tables(db)


async def test_a_database_migrated_before_the_forget_migrations_keeps_its_rows_and_loses_its_keys(
    db: Database, clock: FakeClock
) -> None:
    migrate_only(db, lambda name: name not in FORGET_MIGRATIONS)
    async with db.client(clock=clock, migrate=False) as cq:
        await fill_every_task_keyed_table(db, cq, clock, migrate=False)
    before = row_counts(db)
    assert all(before.values()), before
    assert references_to_protocol_tables(db) == sorted(
        (t, "cairnq_tasks")
        for t in ("cairnq_task_keys", *TASK_KEYED)
        if t != "cairnq_dependencies_satisfied"
    )
    backend = db.backend()
    await backend.aopen()
    assert backend.migrations_applied == FORGET_MIGRATIONS  # type: ignore[attr-defined]
    await backend.aclose()
    assert row_counts(db) == before
    assert references_to_protocol_tables(db) == [("cairnq_task_keys", "cairnq_tasks")]


@pytest.mark.parametrize("table", TASK_KEYED)
def test_a_repair_that_recreates_a_dropped_task_keyed_table_leaves_no_key_to_the_task_table(
    db: Database, table: str
) -> None:
    with db.sync_client() as client:
        client.submit("kept", key="kept")
    # The migration that first made the table makes it again, with its foreign key; the
    # forget migration after it drops the key again.
    outside(db, f"drop table {table}" + (" cascade" if db.kind == "postgres" else ""))
    repaired = db.backend(repair=True)
    repaired.open()
    assert "x0015_limit_keys_unbound.sql" in repaired.migrations_applied  # type: ignore[attr-defined]
    assert references_to_protocol_tables(db) == [("cairnq_task_keys", "cairnq_tasks")]
    healthy = db.backend()
    healthy.open()
    assert healthy.migrations_applied == []  # type: ignore[attr-defined]
    with db.sync_client() as client:
        assert client.get_by_key("kept") is not None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_damage_detection_expects_each_forget_trigger_from_its_migration(dialect: Dialect) -> None:
    expected = expected_objects(dialect, {m.name for m in migrations(dialect)})
    # x0016 creates the workflows' delete trigger (SQLite) and function (PostgreSQL) again.
    latest = {"workflows": "x0016_workflows_keep_success.sql"}
    for owner, migration in zip(
        ("leases", "snoozes", "workflows", "steps"), FORGET_MIGRATIONS, strict=False
    ):
        if dialect == "postgres":
            assert expected[("function", f"cairnq_{owner}_forget")] == latest.get(owner, migration)
            assert expected[("trigger", f"cairnq_{owner}_forget")] == migration
            assert expected[("trigger", f"cairnq_{owner}_forget_all")] == migration
        else:
            assert expected[("trigger", f"cairnq_{owner}_forget")] == latest.get(owner, migration)
    assert not [name for _, name in expected if name.endswith("_old")]
