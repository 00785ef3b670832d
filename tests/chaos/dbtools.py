"""Test-only database instruments: the transition log, exports, integrity checks.

The transition log is written by triggers in the same transaction as every
change to ``cairnq_tasks``, ``cairnq_task_keys`` and ``cairnq_leases``, and
every dependency edge and parked row the workflow tables record, so it is
complete even when processes are killed mid-write (and keeps the edges of
purged tasks). Its ``seq`` follows
commit order per row and every dependency between transactions (see
``checker``); on SQLite, one writer at a time, it is commit order outright.
The effects table receives the rows handlers write with ``succeed_in``. Both
are test scaffolding, never part of cairnq's schema.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .._db import Database, admin_connect

_COLUMNS = (
    "seq, tbl, op, task_id, key, old_status, new_status, old_attempt, new_attempt, "
    "old_worker, new_worker, old_lease, new_lease, new_updated, new_cancel, old_completed, "
    "new_completed, max_attempts, new_error_code, new_result, old_queue, token, db_time, txid"
)
# What the workflow invariants read besides (``cairnq.drivertest.TRANSITION_COLUMNS`` is the
# part every backend's driver logs): a task's due time before and after each change (a parked
# task is due at ``PARKED_RUN_AT_MS``), and for the workflow tables' rows the other task of a
# dependency edge (``ref``) and its policy, or a parked row's reason (``detail``).
_WORKFLOW_COLUMNS = "old_run_at, new_run_at, ref, detail"

SQLITE_LOG = """
create table if not exists cairnq_test_transitions (
    seq integer primary key autoincrement,
    tbl text not null, op text not null, task_id text, key text,
    old_status text, new_status text, old_attempt integer, new_attempt integer,
    old_worker text, new_worker text, old_lease integer, new_lease integer,
    new_updated integer, new_cancel integer, old_completed integer, new_completed integer,
    max_attempts integer, new_error_code text, new_result text, old_queue text, token integer,
    db_time real, txid integer, old_run_at integer, new_run_at integer, ref text, detail text
);
create trigger if not exists cairnq_test_tasks_insert after insert on cairnq_tasks begin
    insert into cairnq_test_transitions (tbl, op, task_id, new_status, new_attempt, new_worker,
        new_lease, new_updated, new_cancel, new_completed, max_attempts, db_time, new_run_at)
    values ('task', 'insert', new.id, new.status, new.attempt, new.worker_id, new.lease_until_ms,
        new.updated_at_ms, new.cancel_requested_at_ms, new.completed_at_ms, new.max_attempts,
        (julianday('now') - 2440587.5) * 86400000.0, new.run_at_ms);
end;
create trigger if not exists cairnq_test_tasks_update after update on cairnq_tasks begin
    insert into cairnq_test_transitions (tbl, op, task_id, old_status, new_status, old_attempt,
        new_attempt, old_worker, new_worker, old_lease, new_lease, new_updated, new_cancel,
        old_completed, new_completed, max_attempts, new_error_code, new_result, db_time,
        old_run_at, new_run_at)
    values ('task', 'update', new.id, old.status, new.status, old.attempt, new.attempt,
        old.worker_id, new.worker_id, old.lease_until_ms, new.lease_until_ms, new.updated_at_ms,
        new.cancel_requested_at_ms, old.completed_at_ms, new.completed_at_ms, new.max_attempts,
        json_extract(new.error, '$.code'), new.result,
        (julianday('now') - 2440587.5) * 86400000.0, old.run_at_ms, new.run_at_ms);
end;
create trigger if not exists cairnq_test_tasks_delete after delete on cairnq_tasks begin
    insert into cairnq_test_transitions (tbl, op, task_id, old_status, old_attempt, old_worker,
        old_lease, old_completed, max_attempts, old_queue, db_time)
    values ('task', 'delete', old.id, old.status, old.attempt, old.worker_id,
        old.lease_until_ms, old.completed_at_ms, old.max_attempts, old.queue,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_keys_insert after insert on cairnq_task_keys begin
    insert into cairnq_test_transitions (tbl, op, task_id, key, db_time)
    values ('key', 'insert', new.task_id, new.key, (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_keys_update after update on cairnq_task_keys begin
    insert into cairnq_test_transitions (tbl, op, task_id, key, db_time)
    values ('key', 'update', new.task_id, new.key, (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_keys_delete after delete on cairnq_task_keys begin
    insert into cairnq_test_transitions (tbl, op, task_id, key, db_time)
    values ('key', 'delete', old.task_id, old.key, (julianday('now') - 2440587.5) * 86400000.0);
end;
"""

SQLITE_LEASE_LOG = """
create trigger if not exists cairnq_test_leases_insert after insert on cairnq_leases begin
    insert into cairnq_test_transitions (tbl, op, task_id, token, db_time)
    values ('lease', 'insert', new.task_id, new.token,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_leases_update after update on cairnq_leases begin
    insert into cairnq_test_transitions (tbl, op, task_id, token, db_time)
    values ('lease', 'update', new.task_id, new.token,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
"""

SQLITE_WORKFLOW_LOG = """
create trigger if not exists cairnq_test_dependencies_insert after insert on cairnq_dependencies
begin
    insert into cairnq_test_transitions (tbl, op, task_id, ref, detail, db_time)
    values ('dependency', 'insert', new.task_id, new.depends_on_id, new.policy,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_parked_insert after insert on cairnq_parked begin
    insert into cairnq_test_transitions (tbl, op, task_id, detail, db_time)
    values ('parked', 'insert', new.task_id, new.reason,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_parked_update after update on cairnq_parked begin
    insert into cairnq_test_transitions (tbl, op, task_id, detail, db_time)
    values ('parked', 'update', new.task_id, new.reason,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_parked_delete after delete on cairnq_parked begin
    insert into cairnq_test_transitions (tbl, op, task_id, detail, db_time)
    values ('parked', 'delete', old.task_id, old.reason,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
"""

POSTGRES_LOG = """
create table if not exists cairnq_test_transitions (
    seq bigserial primary key,
    tbl text not null, op text not null, task_id text, key text,
    old_status text, new_status text, old_attempt integer, new_attempt integer,
    old_worker text, new_worker text, old_lease bigint, new_lease bigint,
    new_updated bigint, new_cancel bigint, old_completed bigint, new_completed bigint,
    max_attempts integer, new_error_code text, new_result text, old_queue text, token bigint,
    db_time double precision, txid bigint default txid_current(),
    old_run_at bigint, new_run_at bigint, ref text, detail text
);
create or replace function cairnq_test_log_task() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into cairnq_test_transitions (tbl, op, task_id, new_status, new_attempt,
            new_worker, new_lease, new_updated, new_cancel, new_completed, max_attempts, db_time,
            new_run_at)
        values ('task', 'insert', new.id, new.status, new.attempt, new.worker_id,
            new.lease_until_ms, new.updated_at_ms, new.cancel_requested_at_ms,
            new.completed_at_ms, new.max_attempts,
            extract(epoch from clock_timestamp()) * 1000, new.run_at_ms);
    elsif tg_op = 'UPDATE' then
        insert into cairnq_test_transitions (tbl, op, task_id, old_status, new_status,
            old_attempt, new_attempt, old_worker, new_worker, old_lease, new_lease, new_updated,
            new_cancel, old_completed, new_completed, max_attempts, new_error_code, new_result,
            db_time, old_run_at, new_run_at)
        values ('task', 'update', new.id, old.status, new.status, old.attempt, new.attempt,
            old.worker_id, new.worker_id, old.lease_until_ms, new.lease_until_ms,
            new.updated_at_ms, new.cancel_requested_at_ms, old.completed_at_ms,
            new.completed_at_ms, new.max_attempts, new.error ->> 'code', new.result::text,
            extract(epoch from clock_timestamp()) * 1000, old.run_at_ms, new.run_at_ms);
    else
        insert into cairnq_test_transitions (tbl, op, task_id, old_status, old_attempt,
            old_worker, old_lease, old_completed, max_attempts, old_queue, db_time)
        values ('task', 'delete', old.id, old.status, old.attempt, old.worker_id,
            old.lease_until_ms, old.completed_at_ms, old.max_attempts, old.queue,
            extract(epoch from clock_timestamp()) * 1000);
    end if;
    return null;
end $$;
create or replace function cairnq_test_log_key() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        insert into cairnq_test_transitions (tbl, op, task_id, key, db_time)
        values ('key', 'delete', old.task_id, old.key,
            extract(epoch from clock_timestamp()) * 1000);
    else
        insert into cairnq_test_transitions (tbl, op, task_id, key, db_time)
        values ('key', lower(tg_op), new.task_id, new.key,
            extract(epoch from clock_timestamp()) * 1000);
    end if;
    return null;
end $$;
drop trigger if exists cairnq_test_tasks on cairnq_tasks;
create trigger cairnq_test_tasks after insert or update or delete on cairnq_tasks
    for each row execute function cairnq_test_log_task();
drop trigger if exists cairnq_test_keys on cairnq_task_keys;
create trigger cairnq_test_keys after insert or update or delete on cairnq_task_keys
    for each row execute function cairnq_test_log_key();
"""

POSTGRES_LEASE_LOG = """
create or replace function cairnq_test_log_lease() returns trigger language plpgsql as $$
begin
    insert into cairnq_test_transitions (tbl, op, task_id, token, db_time)
    values ('lease', lower(tg_op), new.task_id, new.token,
        extract(epoch from clock_timestamp()) * 1000);
    return null;
end $$;
drop trigger if exists cairnq_test_leases on cairnq_leases;
create trigger cairnq_test_leases after insert or update on cairnq_leases
    for each row execute function cairnq_test_log_lease();
"""

POSTGRES_WORKFLOW_LOG = """
create or replace function cairnq_test_log_dependency() returns trigger language plpgsql as $$
begin
    insert into cairnq_test_transitions (tbl, op, task_id, ref, detail, db_time)
    values ('dependency', 'insert', new.task_id, new.depends_on_id, new.policy,
        extract(epoch from clock_timestamp()) * 1000);
    return null;
end $$;
create or replace function cairnq_test_log_parked() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        insert into cairnq_test_transitions (tbl, op, task_id, detail, db_time)
        values ('parked', 'delete', old.task_id, old.reason,
            extract(epoch from clock_timestamp()) * 1000);
    else
        insert into cairnq_test_transitions (tbl, op, task_id, detail, db_time)
        values ('parked', lower(tg_op), new.task_id, new.reason,
            extract(epoch from clock_timestamp()) * 1000);
    end if;
    return null;
end $$;
drop trigger if exists cairnq_test_dependencies on cairnq_dependencies;
create trigger cairnq_test_dependencies after insert on cairnq_dependencies
    for each row execute function cairnq_test_log_dependency();
drop trigger if exists cairnq_test_parked on cairnq_parked;
create trigger cairnq_test_parked after insert or update or delete on cairnq_parked
    for each row execute function cairnq_test_log_parked();
"""

# Each task policy a submit stores (its expiry, database clock, in ``new_run_at``),
# each reason a policy ends a task with, and its first start (``detail = 'started'``).
SQLITE_POLICY_LOG = """
create trigger if not exists cairnq_test_policies_insert after insert on cairnq_policies_tasks
begin
    insert into cairnq_test_transitions (tbl, op, task_id, new_run_at, db_time)
    values ('policy', 'insert', new.task_id, new.expires_at_ms,
        (julianday('now') - 2440587.5) * 86400000.0);
end;
create trigger if not exists cairnq_test_policies_update after update on cairnq_policies_tasks
begin
    insert into cairnq_test_transitions (tbl, op, task_id, new_run_at, detail, db_time)
    values ('policy', 'update', new.task_id, new.expires_at_ms,
        coalesce(new.reason, case when old.started_at_ms is null
            and new.started_at_ms is not null then 'started' end),
        (julianday('now') - 2440587.5) * 86400000.0);
end;
"""

POSTGRES_POLICY_LOG = """
create or replace function cairnq_test_log_policy() returns trigger language plpgsql as $$
declare
    detail text := new.reason;
begin
    if tg_op = 'UPDATE' and detail is null then
        if old.started_at_ms is null and new.started_at_ms is not null then
            detail := 'started';
        end if;
    end if;
    insert into cairnq_test_transitions (tbl, op, task_id, new_run_at, detail, db_time)
    values ('policy', lower(tg_op), new.task_id, new.expires_at_ms, detail,
        extract(epoch from clock_timestamp()) * 1000);
    return null;
end $$;
drop trigger if exists cairnq_test_policies on cairnq_policies_tasks;
create trigger cairnq_test_policies after insert or update on cairnq_policies_tasks
    for each row execute function cairnq_test_log_policy();
"""

# The rows handlers write inside succeed_in, with the claim (its nonce) that wrote them.
EFFECTS_TABLE = """
create table if not exists cairnq_test_effects (task_id text not null, token bigint not null)
"""


def install_transition_log(db: Database) -> None:
    """Migrate ``db`` and add the transition-log triggers (lease tokens, the workflow
    tables' edges and parked rows, and the task policies too, when it has them)."""
    with db.sync_client() as client:
        client.stats()
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path)  # type: ignore[arg-type]
        conn.executescript(SQLITE_LOG)
        tables = _names(conn.execute("select name from sqlite_master where type = 'table'"))
        if "cairnq_leases" in tables:
            conn.executescript(SQLITE_LEASE_LOG)
        if tables >= WORKFLOW_TABLES:
            conn.executescript(SQLITE_WORKFLOW_LOG)
        if "cairnq_policies_tasks" in tables:
            conn.executescript(SQLITE_POLICY_LOG)
        conn.close()
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute(POSTGRES_LOG)
        conn.execute(EFFECTS_TABLE)
        found = _names(
            conn.execute(
                "select table_name from information_schema.tables where table_schema = %s",
                (db.schema,),
            )
        )
        if "cairnq_leases" in found:
            conn.execute(POSTGRES_LEASE_LOG)
        if found >= WORKFLOW_TABLES:
            conn.execute(POSTGRES_WORKFLOW_LOG)
        if "cairnq_policies_tasks" in found:
            conn.execute(POSTGRES_POLICY_LOG)


WORKFLOW_TABLES = {"cairnq_dependencies", "cairnq_parked"}


def _names(tables: Any) -> set[str]:
    return {str(row[0]) for row in tables}


def effects(db: Database) -> list[dict[str, Any]]:
    """The rows handlers committed with ``succeed_in`` (PostgreSQL)."""
    return _rows(db, "select task_id, token from cairnq_test_effects")


def _rows(db: Database, query: str) -> list[dict[str, Any]]:
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path)  # type: ignore[arg-type]
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(query)]
        finally:
            conn.close()
    from psycopg.rows import dict_row

    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query)  # type: ignore[arg-type]
            return list(cur.fetchall())


def transitions(db: Database, *, workflows: bool = False) -> list[dict[str, Any]]:
    """The log, oldest first: the driver's columns, and with ``workflows`` the columns the
    workflow invariants read too."""
    columns = f"{_COLUMNS}, {_WORKFLOW_COLUMNS}" if workflows else _COLUMNS
    return _rows(db, f"select {columns} from cairnq_test_transitions order by seq")


def snapshot(db: Database) -> list[dict[str, Any]]:
    return _rows(
        db,
        "select id, status, attempt, max_attempts, worker_id, lease_until_ms, "
        "cancel_requested_at_ms, completed_at_ms, payload from cairnq_tasks",
    )


def integrity(db: Database) -> str:
    """``ok`` when the storage checks out (SQLite integrity_check; PostgreSQL amcheck)."""
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path)  # type: ignore[arg-type]
        try:
            return str(conn.execute("pragma integrity_check").fetchone()[0])
        finally:
            conn.close()
    with admin_connect(db.url) as conn:
        conn.execute("create extension if not exists amcheck schema public")
        conn.execute(f'set search_path to "{db.schema}", public')
        for (index,) in conn.execute(
            "select indexrelid::regclass::text from pg_index i join pg_class c "
            "on c.oid = i.indrelid where c.relname = 'cairnq_tasks'"
        ).fetchall():
            conn.execute("select bt_index_check(%s::regclass)", (index,))
    return "ok"


def _tables(db: Database) -> set[str]:
    if db.kind == "sqlite":
        return {r["name"] for r in _rows(db, "select name from sqlite_master")}
    return {
        r["table_name"]
        for r in _rows(
            db,
            "select table_name from information_schema.tables "
            "where table_schema = current_schema()",
        )
    }


def schedules(db: Database) -> dict[str, list[dict[str, Any]]] | None:
    """The schedules, their slot records and the tasks their slots submitted (by metadata);
    ``None`` on a database without the schedules tables."""
    if "cairnq_schedule_slots" not in _tables(db):
        return None
    tasks = _rows(db, "select id, metadata from cairnq_tasks")
    for task in tasks:
        if isinstance(task["metadata"], str):
            task["metadata"] = json.loads(task["metadata"])
    return {
        "schedules": _rows(
            db,
            "select name, cron, every_ms, catch_up_ms, catch_up_policy, overlap, cursor_ms, "
            "created_at_ms from cairnq_schedules",
        ),
        "slots": _rows(
            db,
            "select schedule, slot_ms, through_ms, slots, outcome, task_id, recorded_at_ms "
            "from cairnq_schedule_slots",
        ),
        "tasks": [
            {"id": t["id"], **t["metadata"]["cairnq.schedule"]}
            for t in tasks
            if isinstance(t["metadata"], dict) and "cairnq.schedule" in t["metadata"]
        ],
    }


def undone_batches(db: Database) -> int:
    """How many batches are closed but not done (0 on a database without the tables)."""
    if "cairnq_batches" not in _tables(db):
        return 0
    return len(_rows(db, "select id from cairnq_batches where state = 'closed'"))


def batches(db: Database) -> dict[str, list[dict[str, Any]]] | None:
    """The batches (their state and the task id of each callback they have) and their
    members with the outcome recorded; ``None`` on a database without the batch tables."""
    if "cairnq_batches" not in _tables(db):
        return None
    rows = _rows(db, "select id, state, callbacks from cairnq_batches")
    for row in rows:
        stored = json.loads(row.pop("callbacks"))
        row["callbacks"] = {kind: spec["id"] for kind, spec in stored.items()}
    return {
        "batches": rows,
        "members": _rows(db, "select batch_id, task_id, outcome from cairnq_batch_members"),
    }
