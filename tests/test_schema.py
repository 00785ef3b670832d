"""The schema cairnq creates is exactly the protocol's (PROTOCOL.md, "Tables"), on both dialects.

Two checks: the facts of the protocol written out below (what the reference SDKs
rely on), and a committed snapshot of the whole schema as the database reports
it, so any change to a migration shows up in review. Set
``CAIRNQ_UPDATE_SNAPSHOTS=1`` to rewrite the snapshots.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cairnq.protocol.statements import migrations

from ._db import Database, admin_connect

SNAPSHOTS = Path(__file__).parent / "snapshots"

# (column, sqlite type, postgres type, not null, default)
TASK_COLUMNS = [
    ("id", "TEXT", "text", True, None),
    ("name", "TEXT", "text", True, None),
    ("queue", "TEXT", "text", True, "'default'"),
    ("status", "TEXT", "text", True, None),
    ("payload", "TEXT", "jsonb", True, None),
    ("result", "TEXT", "jsonb", False, None),
    ("error", "TEXT", "jsonb", False, None),
    ("metadata", "TEXT", "jsonb", True, "'{}'"),
    ("progress", "REAL", "double precision", False, None),
    ("message", "TEXT", "text", False, None),
    ("attempt", "INTEGER", "integer", True, "0"),
    ("max_attempts", "INTEGER", "integer", True, "3"),
    ("priority", "INTEGER", "integer", True, "0"),
    ("worker_id", "TEXT", "text", False, None),
    ("lease_until_ms", "INTEGER", "bigint", False, None),
    ("run_at_ms", "INTEGER", "bigint", True, None),
    ("cancel_requested_at_ms", "INTEGER", "bigint", False, None),
    ("parent_id", "TEXT", "text", False, None),
    ("root_id", "TEXT", "text", False, None),
    ("correlation_id", "TEXT", "text", False, None),
    ("created_at_ms", "INTEGER", "bigint", True, None),
    ("updated_at_ms", "INTEGER", "bigint", True, None),
    ("completed_at_ms", "INTEGER", "bigint", False, None),
]
KEY_COLUMNS = [
    ("key", "TEXT", "text", True, None),
    ("task_id", "TEXT", "text", True, None),
    ("created_at_ms", "INTEGER", "bigint", True, None),
    ("updated_at_ms", "INTEGER", "bigint", True, None),
]
META_COLUMNS = [("key", "TEXT", "text", True, None), ("value", "TEXT", "text", True, None)]
LEDGER_COLUMNS = [
    ("name", "TEXT", "text", True, None),
    ("applied_at_ms", "INTEGER", "bigint", True, None),
]

# cairnq's extensions: their own tables, their own ledger names (x-numbered migrations).
LOCK_COLUMNS = [
    ("name", "TEXT", "text", True, None),
    ("holder", "TEXT", "text", True, None),
    ("until_ms", "INTEGER", "bigint", True, None),
]
LEASE_TOKEN_COLUMNS = [
    ("task_id", "TEXT", "text", True, None),
    ("token", "INTEGER", "bigint", True, None),
]
WORKER_COLUMNS = [
    ("worker_id", "TEXT", "text", True, None),
    ("queues", "TEXT", "jsonb", True, "'[]'"),
    ("host", "TEXT", "text", False, None),
    ("pid", "INTEGER", "integer", False, None),
    ("concurrency", "INTEGER", "integer", False, None),
    ("started_at_ms", "INTEGER", "bigint", True, None),
    ("last_seen_ms", "INTEGER", "bigint", True, None),
]
WORKER_NAME_COLUMNS = [
    ("worker_id", "TEXT", "text", True, None),
    ("names", "TEXT", "jsonb", True, "'[]'"),
]
EXTENSION_MIGRATIONS = [
    "x0001_locks.sql",
    "x0002_workers.sql",
    "x0003_leases.sql",
    "x0004_worker_names.sql",
    "x0005_schedules.sql",
    "x0006_limits.sql",
    "x0007_flow.sql",
    "x0008_workflows.sql",
    "x0009_steps.sql",
    "x0010_dependencies_satisfied.sql",
    "x0011_leases_forget.sql",
    "x0012_snoozes_forget.sql",
    "x0013_workflows_forget.sql",
    "x0014_steps_forget.sql",
    "x0015_limit_keys_unbound.sql",
    "x0016_workflows_keep_success.sql",
    "x0017_batches.sql",
    "x0018_uniqueness.sql",
    "x0019_waits.sql",
    "x0020_policies.sql",
    "x0021_pauses_until.sql",
    "x0022_fair_share.sql",
    "x0023_logs.sql",
    "x0024_search.sql",
    "x0025_waits_send_ids.sql",
    "x0026_search_errors.sql",
    "x0027_fair_index.sql",
    "x0028_attempt_rollups.sql",
    "x0029_fair_rekey.sql",
]

# index -> (columns with direction, partial predicate)
INDEXES = {
    "cairnq_tasks_claim_idx": (
        ["queue", "status", "priority DESC", "run_at_ms", "id"],
        None,
    ),
    "cairnq_tasks_claim_name_idx": (
        ["queue", "status", "name", "priority DESC", "run_at_ms", "id"],
        None,
    ),
    "cairnq_tasks_name_idx": (["name"], None),
    "cairnq_tasks_root_idx": (["root_id"], None),
    "cairnq_tasks_correlation_idx": (["correlation_id"], None),
    "cairnq_tasks_completed_idx": (["completed_at_ms"], None),
    "cairnq_tasks_lease_idx": (
        ["lease_until_ms"],
        "status = 'running' and lease_until_ms is not null",
    ),
    "cairnq_tasks_status_completed_idx": (["status", "completed_at_ms"], None),
    "cairnq_tasks_queue_completed_idx": (
        ["queue", "completed_at_ms"],
        "status in ('succeeded', 'failed', 'canceled')",
    ),
    "cairnq_schedules_next_idx": (["next_ms"], None),
    "cairnq_limit_keys_limit_idx": (["limit_name", "key_value"], None),
    "cairnq_dependencies_depends_on_idx": (["depends_on_id"], None),
    "cairnq_batches_undone": (["state"], "state <> 'done'"),
    "cairnq_batch_members_task": (["task_id"], "outcome is null"),
    "cairnq_batch_members_live": (["batch_id"], "outcome is null"),
    "cairnq_uniqueness_periods_until": (["until_ms"], None),
    "cairnq_uniqueness_throttle_until": (["until_ms"], None),
    "cairnq_waits_waiting": (["event_key", "created_at_ms"], "state = 'waiting'"),
    "cairnq_waits_mailbox_key": (["event_key", "seq"], None),
    "cairnq_waits_mailbox_expiry": (["expires_at_ms"], None),
    "cairnq_waits_sends_expiry": (["expires_at_ms"], None),
    "cairnq_policies_tasks_expiry": (
        ["expires_at_ms"],
        "expires_at_ms is not null and reason is null",
    ),
    "cairnq_fair_tasks_walk": (
        ["queue", "key_value", "priority DESC", "run_at_ms", "task_id"],
        None,
    ),
    "cairnq_search_terms_task": (["task_id"], None),
    "cairnq_task_attempts_ended_idx": (["ended_at_ms"], None),
}
# PostgreSQL's alone: SQLite's error search scans its table, with no index beyond the key.
POSTGRES_INDEXES = {"cairnq_search_errors_words": (["words"], None)}
STATUSES = ("queued", "running", "succeeded", "failed", "canceled")
MIGRATIONS = [
    "0001_init.sql",
    "0002_purge_index.sql",
    "0003_notify.sql",
    "0004_lease_index.sql",
    "0005_clear_terminal_lease.sql",
    "0006_claim_name_index.sql",
    "0007_purge_status_index.sql",
    "0008_claim_due_index.sql",
    "0009_purge_queue_index.sql",
    "0010_drop_status_index.sql",
]


def _norm(sql: str | None) -> str | None:
    """A predicate without casts, parentheses, case or spacing differences, for comparison."""
    if sql is None:
        return None
    text = re.sub(r"::[a-z ]+(\[\])?", "", sql.lower())
    text = text.replace("= any (array[", "in (").replace("])", ")")
    text = text.replace("(", " ").replace(")", " ")
    return re.sub(r"\s+", " ", text).strip()


# --- reading the schema back --------------------------------------------------------------


def sqlite_schema(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        tables = {}
        for (table,) in conn.execute(
            "select name from sqlite_master where type = 'table' and name like 'cairnq%'"
        ):
            cols = conn.execute(f"pragma table_info({table})").fetchall()
            tables[table] = [(c[1], c[2].upper(), bool(c[3]) or bool(c[5]), c[4]) for c in cols]
        indexes = {}
        for name, sql in conn.execute(
            "select name, sql from sqlite_master where type = 'index' and sql is not null"
        ):
            cols = [
                f"{r[2]} DESC" if r[3] else r[2]
                for r in conn.execute(f"pragma index_xinfo({name})")
                if r[5]
            ]
            where = re.search(r"\bwhere\b(.*)$", sql, re.I | re.S)
            indexes[name] = (cols, _norm(where.group(1)) if where else None)
        checks = {
            table: sorted(re.findall(r"check\s*\((.*?)\)\s*[,\n]", sql, re.I))
            for table, sql in conn.execute(
                "select name, sql from sqlite_master where type = 'table' and name like 'cairnq%'"
            )
        }
        fks = [
            (table, *fk)
            for table in (
                "cairnq_task_keys",
                "cairnq_leases",
                "cairnq_limit_keys",
                "cairnq_task_snoozes",
                "cairnq_task_steps",
                "cairnq_task_attempts",
                "cairnq_task_logs",
                "cairnq_dependencies",
                "cairnq_parked",
                "cairnq_dependencies_satisfied",
            )
            for fk in conn.execute(f"pragma foreign_key_list({table})").fetchall()
        ]
        meta = dict(conn.execute("select key, value from cairnq_meta").fetchall())
        ledger = [r[0] for r in conn.execute("select name from cairnq_migrations order by name")]
        triggers = conn.execute(
            "select name, sql from sqlite_master where type = 'trigger' order by name"
        ).fetchall()
        return {
            "tables": tables,
            "indexes": indexes,
            "checks": checks,
            "fks": [(f[0], f[3], f[4], f[5], f[7]) for f in fks],
            "meta": meta,
            "ledger": ledger,
            "triggers": triggers,
        }
    finally:
        conn.close()


def postgres_schema(dsn: str, schema: str) -> dict[str, Any]:
    with admin_connect(dsn) as conn:
        tables: dict[str, list[tuple[Any, ...]]] = {}
        for table, column, data_type, nullable, default in conn.execute(
            "select table_name, column_name, data_type, is_nullable, column_default "
            "from information_schema.columns where table_schema = %s order by table_name, "
            "ordinal_position",
            (schema,),
        ):
            default = re.sub(r"::[a-z ]+$", "", default) if default else None
            tables.setdefault(table, []).append((column, data_type, nullable == "NO", default))
        indexes = {}
        for name, definition in conn.execute(
            "select indexname, indexdef from pg_indexes where schemaname = %s", (schema,)
        ):
            if name.endswith("_pkey"):
                continue
            cols = re.search(r"\((.*?)\)(?: WHERE|$)", definition).group(1)  # type: ignore[union-attr]
            where = re.search(r" WHERE (.*)$", definition)
            indexes[name] = (
                [c.strip() for c in cols.split(",")],
                _norm(where.group(1)) if where else None,
            )
        checks = {}
        for table, definition in conn.execute(
            "select c.relname, pg_get_constraintdef(k.oid) from pg_constraint k "
            "join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = %s and k.contype = 'c'",
            (schema,),
        ):
            checks.setdefault(table, []).append(definition)
        fks = conn.execute(
            "select c.relname, pg_get_constraintdef(k.oid) from pg_constraint k "
            "join pg_class c on c.oid = k.conrelid join pg_namespace n "
            "on n.oid = k.connamespace where n.nspname = %s and k.contype = 'f' "
            "order by c.relname",
            (schema,),
        ).fetchall()
        meta = dict(conn.execute(f'select key, value from "{schema}".cairnq_meta').fetchall())
        ledger = [
            r[0]
            for r in conn.execute(f'select name from "{schema}".cairnq_migrations order by name')
        ]
        trigger = conn.execute(
            "select tgname, pg_get_triggerdef(t.oid) from pg_trigger t join pg_class c "
            "on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = %s and not t.tgisinternal order by t.tgname",
            (schema,),
        ).fetchall()
        return {
            "tables": tables,
            "indexes": indexes,
            "checks": {k: sorted(v) for k, v in checks.items()},
            "fks": [(f[0], f[1].replace(f"{schema}.", "")) for f in fks],
            "meta": meta,
            "ledger": ledger,
            "triggers": trigger,
        }


def read_schema(db: Database) -> dict[str, Any]:
    with db.sync_client() as client:
        client.stats()
    if db.kind == "sqlite":
        assert db.path is not None
        return sqlite_schema(db.path)
    return postgres_schema(db.url, db.schema or "")


def snapshot_text(schema: dict[str, Any]) -> str:
    lines = []
    for table, columns in sorted(schema["tables"].items()):
        lines.append(f"table {table}")
        lines.extend(f"  column {c!r}" for c in columns)
    for name, (cols, where) in sorted(schema["indexes"].items()):
        lines.append(f"index {name} ({', '.join(cols)})" + (f" where {where}" if where else ""))
    for table, checks in sorted(schema["checks"].items()):
        lines.extend(f"check {table}: {c}" for c in checks)
    lines.extend(f"foreign key {fk}" for fk in schema["fks"])
    lines.extend(f"meta {k}={v}" for k, v in sorted(schema["meta"].items()))
    lines.extend(f"ledger {name}" for name in schema["ledger"])
    lines.extend(f"trigger {t!r}" for t in schema.get("triggers", []))
    return re.sub(r'"?t_[0-9a-f]{10}"?\.', "", "\n".join(lines)) + "\n"


# --- the tests ------------------------------------------------------------------------------


def _columns(db: Database, spec: list[tuple[str, str, str, bool, str | None]]) -> list[Any]:
    index = 1 if db.kind == "sqlite" else 2
    return [(c[0], c[index], c[3], c[4]) for c in spec]


@pytest.mark.parametrize(
    ("table", "spec"),
    [
        ("cairnq_tasks", TASK_COLUMNS),
        ("cairnq_task_keys", KEY_COLUMNS),
        ("cairnq_meta", META_COLUMNS),
        ("cairnq_migrations", LEDGER_COLUMNS),
    ],
)
def test_table_columns_match_the_protocol(db: Database, table: str, spec: list[Any]) -> None:
    schema = read_schema(db)
    assert schema["tables"][table] == _columns(db, spec)


def test_only_the_protocol_tables_and_the_extension_tables_exist(db: Database) -> None:
    assert sorted(read_schema(db)["tables"]) == sorted(
        [
            "cairnq_attempt_rollup_marks",
            "cairnq_attempt_rollups",
            "cairnq_batch_members",
            "cairnq_batches",
            "cairnq_dependencies",
            "cairnq_dependencies_satisfied",
            "cairnq_fair_shares",
            "cairnq_fair_tasks",
            "cairnq_leases",
            "cairnq_limit_keys",
            "cairnq_limits",
            "cairnq_locks",
            "cairnq_meta",
            "cairnq_migrations",
            "cairnq_parked",
            "cairnq_pause_ends",
            "cairnq_pauses",
            "cairnq_policies_tasks",
            "cairnq_policies_use",
            "cairnq_rate_buckets",
            "cairnq_schedule_slots",
            "cairnq_schedules",
            "cairnq_search_errors",
            "cairnq_search_terms",
            "cairnq_task_attempts",
            "cairnq_task_keys",
            "cairnq_task_logs",
            "cairnq_task_snoozes",
            "cairnq_task_steps",
            "cairnq_tasks",
            "cairnq_uniqueness_periods",
            "cairnq_uniqueness_throttle",
            "cairnq_waits",
            "cairnq_waits_mailbox",
            "cairnq_waits_sends",
            "cairnq_worker_names",
            "cairnq_workers",
        ]
    )


def test_the_extension_table_holds_named_leases(db: Database) -> None:
    assert read_schema(db)["tables"]["cairnq_locks"] == _columns(db, LOCK_COLUMNS)


def test_the_legacy_lease_token_extension_table_keeps_its_columns(db: Database) -> None:
    assert read_schema(db)["tables"]["cairnq_leases"] == _columns(db, LEASE_TOKEN_COLUMNS)


def test_the_workers_extension_table_holds_one_row_per_worker(db: Database) -> None:
    assert read_schema(db)["tables"]["cairnq_workers"] == _columns(db, WORKER_COLUMNS)


def test_the_worker_names_extension_table_holds_the_names_each_worker_serves(
    db: Database,
) -> None:
    assert read_schema(db)["tables"]["cairnq_worker_names"] == _columns(db, WORKER_NAME_COLUMNS)


def test_indexes_match_the_protocol_with_column_order_and_predicates(db: Database) -> None:
    indexes = read_schema(db)["indexes"]
    found = {name: value for name, value in indexes.items() if not name.startswith("sqlite_")}
    every = {**INDEXES, **(POSTGRES_INDEXES if db.kind == "postgres" else {})}
    expected = {name: (cols, _norm(where)) for name, (cols, where) in every.items()}
    assert found == expected


def test_status_check_lists_the_five_statuses(db: Database) -> None:
    checks = " ".join(read_schema(db)["checks"]["cairnq_tasks"])
    listed = re.findall(r"'(\w+)'", checks.split("status")[1])
    assert tuple(listed[:5]) == STATUSES


def test_sqlite_json_columns_are_checked_with_json_valid(sqlite_db: Database) -> None:
    checks = " ".join(read_schema(sqlite_db)["checks"]["cairnq_tasks"])
    for column in ("payload", "result", "error", "metadata"):
        assert f"json_valid({column})" in checks


def test_only_key_rows_cascade_from_their_task(db: Database) -> None:
    fks = [fk for fk in read_schema(db)["fks"] if "cairnq_tasks" in fk[1]]
    if db.kind == "sqlite":
        assert fks == [("cairnq_task_keys", "cairnq_tasks", "task_id", "id", "CASCADE")]
    else:
        cascade = "FOREIGN KEY (task_id) REFERENCES cairnq_tasks(id) ON DELETE CASCADE"
        assert fks == [("cairnq_task_keys", cascade)]


def test_satisfied_dependency_rows_cascade_from_their_edge(db: Database) -> None:
    fks = [fk for fk in read_schema(db)["fks"] if fk[0] == "cairnq_dependencies_satisfied"]
    if db.kind == "sqlite":
        assert fks == [
            ("cairnq_dependencies_satisfied", "cairnq_dependencies", c, c, "CASCADE")
            for c in ("task_id", "depends_on_id")
        ]
    else:
        assert fks == [
            (
                "cairnq_dependencies_satisfied",
                "FOREIGN KEY (task_id, depends_on_id) REFERENCES "
                "cairnq_dependencies(task_id, depends_on_id) ON DELETE CASCADE",
            )
        ]


def test_postgres_extension_rows_go_with_their_task_through_statement_triggers(
    pg_db: Database,
) -> None:
    schema = f"{pg_db.schema}."
    triggers = {name: d.replace(schema, "") for name, d in read_schema(pg_db)["triggers"]}
    owners = (
        "leases",
        "snoozes",
        "workflows",
        "steps",
        "waits",
        "policies",
        "fair",
        "logs",
        "search",
        "search_errors",
    )
    for owner in owners:
        on_delete = triggers.pop(f"cairnq_{owner}_forget")
        assert "AFTER DELETE ON cairnq_tasks REFERENCING OLD TABLE AS gone" in on_delete
        assert "FOR EACH STATEMENT" in on_delete
        on_truncate = triggers.pop(f"cairnq_{owner}_forget_all")
        assert "AFTER TRUNCATE ON cairnq_tasks FOR EACH STATEMENT" in on_truncate
    # The batches' triggers record a member's outcome as its row goes (its row stays).
    on_delete = triggers.pop("cairnq_batches_keep_outcome")
    assert "AFTER DELETE ON cairnq_tasks REFERENCING OLD TABLE AS gone" in on_delete
    on_truncate = triggers.pop("cairnq_batches_keep_outcome_all")
    assert "AFTER TRUNCATE ON cairnq_tasks FOR EACH STATEMENT" in on_truncate
    # The fair share records each inserted task's key, once per insert statement.
    on_insert = triggers.pop("cairnq_fair_index")
    assert "AFTER INSERT ON cairnq_tasks REFERENCING NEW TABLE AS added" in on_insert
    assert "FOR EACH STATEMENT" in on_insert
    # The error index writes a task's words as a statement sets its error (or clears it).
    on_error = triggers.pop("cairnq_search_errors_set")
    assert "AFTER UPDATE OF error ON cairnq_tasks FOR EACH ROW" in on_error
    assert "WHEN ((new.error IS DISTINCT FROM old.error))" in on_error
    # The fair share re-keys a queued task whose payload or metadata a statement sets.
    on_revise = triggers.pop("cairnq_fair_rekey")
    assert "AFTER UPDATE OF payload, metadata ON cairnq_tasks FOR EACH ROW" in on_revise
    assert "WHEN ((new.status = 'queued'::text))" in on_revise
    assert list(triggers) == ["cairnq_tasks_notify"]


def test_postgres_forget_functions_resolve_nothing_through_the_search_path(
    pg_db: Database,
) -> None:
    with pg_db.sync_client() as client:
        client.stats()
    with admin_connect(pg_db.url) as conn:
        rows = conn.execute(
            "select proname::text, proconfig from pg_proc "
            "where pronamespace = %s::regnamespace and proname like 'cairnq%%' order by 1",
            (pg_db.schema,),
        ).fetchall()
    assert rows == [
        (name, ["search_path=pg_catalog"])
        for name in (
            "cairnq_batches_keep_outcome",
            "cairnq_fair_forget",
            "cairnq_fair_index",
            "cairnq_fair_rekey",
            "cairnq_leases_forget",
            "cairnq_logs_forget",
            "cairnq_notify",
            "cairnq_policies_forget",
            "cairnq_search_errors_forget",
            "cairnq_search_errors_set",
            "cairnq_search_forget",
            "cairnq_snoozes_forget",
            "cairnq_steps_forget",
            "cairnq_waits_forget",
            "cairnq_workflows_forget",
        )
    ]


def test_meta_holds_exactly_protocol_and_schema_version(db: Database) -> None:
    assert read_schema(db)["meta"] == {"protocol_version": "1", "schema_version": "10"}


def test_ledger_records_each_migration_by_file_name(db: Database) -> None:
    protocol = [m for m in MIGRATIONS if db.kind == "postgres" or m != "0003_notify.sql"]
    expected = protocol + EXTENSION_MIGRATIONS
    assert read_schema(db)["ledger"] == expected
    assert [m.name for m in migrations(db.kind)] == expected  # type: ignore[arg-type]


def test_postgres_notify_trigger_skips_running(pg_db: Database) -> None:
    triggers = dict(read_schema(pg_db)["triggers"])
    definition = triggers["cairnq_tasks_notify"]
    assert "AFTER INSERT OR UPDATE OF status" in definition
    assert "FOR EACH ROW" in definition
    assert "'running'" in definition and "IS DISTINCT FROM" in definition


def test_schema_matches_the_committed_snapshot(db: Database) -> None:
    text = snapshot_text(read_schema(db))
    path = SNAPSHOTS / f"schema_{db.kind}.txt"
    if os.environ.get("CAIRNQ_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_a_second_open_applies_nothing(db: Database) -> None:
    with db.sync_client() as client:
        client.stats()
    backend = db.backend()
    backend.open()
    assert backend.migrations_applied == []  # type: ignore[attr-defined]


def _set_protocol_version(db: Database, value: str) -> None:
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path)  # type: ignore[arg-type]
        conn.execute("update cairnq_meta set value = ? where key = 'protocol_version'", (value,))
        conn.commit()
        conn.close()
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute("update cairnq_meta set value = %s where key = 'protocol_version'", (value,))


def test_another_protocol_version_is_refused_at_open(db: Database) -> None:
    from cairnq import ProtocolVersionMismatch

    with db.sync_client() as client:
        client.stats()
    _set_protocol_version(db, "2")
    with pytest.raises(ProtocolVersionMismatch, match="protocol_version=2"):
        db.backend().open()
