"""The rules every registered extension keeps, checked over ``cairnq.extensions.builtins()``.

- its tables are named ``cairnq_*``, and exist on a migrated database;
- none of its tables has a foreign key to a protocol table (read from the catalog of
  a real migrated database: SQLite's ``pragma foreign_key_list``, PostgreSQL's
  ``pg_constraint``), so the reference SDK's purge and truncate work;
- each migration it owns ships in both dialects and is x-numbered; each one it needs
  is owned by another extension;
- no two extensions share a name, a migration or a table, and every x-migration and
  every ``cairnq_*`` table is owned by one extension or by the kernel;
- the folder an extension ships (``extensions/<name>/``) belongs to the extension of
  that name: the migrations in it are ones it owns, and each statement in it is named
  ``<name>_*`` (today's names grandfathered in ``UNPREFIXED``);
- no statement of an extension's folder (shipped, or added by an extension outside
  cairnq) inserts into, updates, deletes from or truncates a table of cairnq's own
  (the protocol's, the ledger, the kernel's): it changes tasks through the kernel's
  operations, whose statements are the protocol's and the kernel's; the one exception
  is a settling variant (``Hooks.settling``: the attempt history's, listed in
  ``SETTLING_VARIANTS``), which the kernel runs in place of its own settling statement
  and which settles exactly as that one does (``tests/test_settling_variants.py``), and
  a claiming variant (the limits' one-statement page, in ``CLAIMING_VARIANTS``), which
  claims the tasks it admits exactly as the kernel's ``claim_ids`` does
  (``tests/test_limits.py``);
- no module under ``cairnq/extensions/`` imports or reads a private name (``_x``) of
  ``cairnq.kernel``, nor runs a statement of the protocol's or the kernel's that
  writes a table of cairnq's own: an extension uses the kernel's public names alone.

Each rule is shown catching a synthetic bad extension.
"""

from __future__ import annotations

import ast
import contextlib
import re
import sqlite3
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import ClassVar

import pytest

import cairnq
from cairnq.errors import InvalidArgument
from cairnq.extensions import Extension, TaskRows, builtins, check, install
from cairnq.extensions.history._hooks import SETTLING as HISTORY_SETTLING
from cairnq.protocol.statements import (
    DIALECTS,
    bundled_root,
    core_tables,
    drop_folder,
    extension_roots,
    gather_statements,
    kernel_root,
    migrations,
    roots,
    written_tables,
)

from ._db import Database, admin_connect
from .audit_ext import Audit as GuideAudit
from .test_migrate_repair import outside

SRC = Path(cairnq.__file__).parent

# The kernel's own x-migrations and tables (named leases, lease tokens).
KERNEL_MIGRATIONS = ("x0001_locks.sql", "x0003_leases.sql", "x0011_leases_forget.sql")
KERNEL_TABLES = ("cairnq_locks", "cairnq_leases")
X_NAME = re.compile(r"x\d{4}_[a-z0-9_]+\.sql")
CREATED = re.compile(r"create table (?:if not exists )?(\w+)", re.IGNORECASE)


# Statements that an extension's folder holds under a name without its prefix, from
# before the rule; the list only shrinks.
UNPREFIXED = {
    "schedules": frozenset(
        f"schedule_{what}"
        for what in (
            "advance",
            "define",
            "delete",
            "due",
            "get",
            "insert",
            "last_slots",
            "list",
            "lock",
            "next",
            "pause",
            "slot_insert",
            "slot_task",
            "slots",
            "slots_delete",
            "slots_trim",
        )
    ),
}


def protocol_tables() -> set[str]:
    """The tables the protocol's own (numbered, not x-) migrations create."""
    return {
        table
        for dialect in DIALECTS
        for migration in migrations(dialect)
        if not migration.name.startswith("x")
        for table in CREATED.findall(migration.source)
    }


def shipped(dialect: str) -> set[str]:
    return {m.name for m in migrations(dialect)}  # type: ignore[arg-type]


def declaration_faults(extensions: Sequence[Extension]) -> list[str]:
    """What breaks the rules in the extensions' declarations (no database needed)."""
    faults = []
    owners: dict[str, str] = {}
    for ext in extensions:
        for table in ext.tables:
            if not table.startswith("cairnq_"):
                faults.append(f"{ext.name}: table {table} is not named cairnq_*")
        for name in ext.migrations:
            if not X_NAME.fullmatch(name):
                faults.append(f"{ext.name}: migration {name} is not x-numbered")
            for dialect in DIALECTS:
                if name not in shipped(dialect):
                    faults.append(f"{ext.name}: migration {name} is not shipped for {dialect}")
        for name in ext.optional:
            if name not in ext.migrations:
                faults.append(f"{ext.name}: optional {name} is not one of its migrations")
        for owned in (*ext.migrations, *ext.tables):
            owner = owners.setdefault(owned, ext.name)
            if owner != ext.name:
                faults.append(f"{ext.name}: {owned} is owned by {owner} too")
    owned_migrations = {m for ext in extensions for m in ext.migrations}
    for ext in extensions:
        for name in ext.needs:
            if name not in owned_migrations - set(ext.migrations):
                faults.append(f"{ext.name}: needs {name}, which no other extension owns")
    return faults


def unowned(extensions: Sequence[Extension]) -> list[str]:
    """Shipped x-migrations and created ``cairnq_*`` tables no extension nor the kernel owns."""
    migrations_owned = {m for ext in extensions for m in ext.migrations} | set(KERNEL_MIGRATIONS)
    tables_owned = {t for ext in extensions for t in ext.tables} | set(KERNEL_TABLES)
    found = []
    for dialect in DIALECTS:
        for migration in migrations(dialect):
            if not migration.name.startswith("x"):
                continue
            if migration.name not in migrations_owned:
                found.append(f"migration {migration.name}")
            created = set(CREATED.findall(migration.source)) - tables_owned
            found.extend(f"table {t}" for t in sorted(created))
    return sorted(set(found))


def folder_faults(extensions: Sequence[Extension], folders: Sequence[Path]) -> list[str]:
    """What breaks the rules in the extensions' shipped folders: a folder no extension
    of its name declares, a migration in it the extension does not own, a statement
    in it not named with the extension's prefix (``UNPREFIXED`` aside)."""
    by_name = {ext.name: ext for ext in extensions}
    faults = []
    for folder in folders:
        ext = by_name.get(folder.name)
        if ext is None:
            faults.append(f"{folder.name}: a folder with statements or migrations, no extension")
            continue
        for dialect in DIALECTS:
            for path in sorted((folder / "migrations" / dialect).glob("*.sql")):
                if path.name not in ext.migrations:
                    faults.append(f"{ext.name}: ships {path.name} ({dialect}), not its own")
            for path in sorted((folder / "sql" / dialect).glob("*.sql")):
                name = path.name.removesuffix(".sql")
                grandfathered = UNPREFIXED.get(ext.name, frozenset())
                if not name.startswith(ext.name + "_") and name not in grandfathered:
                    faults.append(f"{ext.name}: statement {name} ({dialect}) is not {ext.name}_*")
    return faults


def shipped_folders() -> list[Path]:
    return [Path(str(root)) for root in extension_roots()]


# Statements run in place of a kernel settling statement: each may update cairnq_tasks.
SETTLING_VARIANTS = frozenset(HISTORY_SETTLING.values())
# Statements that claim the tasks a draw claimer admits as ``claim_ids`` claims them.
CLAIMING_VARIANTS = frozenset({"limits_claim_keyed", "limits_claim_fitting", "limits_fair_claim"})


def core_writes(folders: Sequence[Path]) -> list[str]:
    """Each statement of ``folders`` that writes a table of cairnq's own, with the tables
    (a settling or claiming variant's update of ``cairnq_tasks`` aside)."""
    faults = []
    for folder in folders:
        for dialect in DIALECTS:
            for path in sorted((folder / "sql" / dialect).glob("*.sql")):
                written = written_tables(path.read_text(encoding="utf-8")) & core_tables()
                if path.stem in SETTLING_VARIANTS | CLAIMING_VARIANTS:
                    written -= {"cairnq_tasks"}
                if written:
                    faults.append(f"{path.stem} ({dialect}) writes {', '.join(sorted(written))}")
    return faults


def foreign_keys_to(db: Database, tables: Sequence[str], targets: set[str]) -> list[str]:
    """``table -> referenced`` for each foreign key from ``tables`` onto ``targets``,
    read from the migrated database's catalog."""
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            found = {
                f"{table} -> {fk[2]}"
                for table in tables
                for fk in conn.execute("select * from pragma_foreign_key_list(?)", (table,))
                if fk[2] in targets
            }
        return sorted(found)
    with admin_connect(db.url) as conn:
        rows = conn.execute(
            "select distinct c.relname::text, p.relname::text from pg_constraint k "
            "join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid "
            "where k.contype = 'f' and c.relnamespace = %s::regnamespace "
            "and c.relname = any(%s) and p.relname = any(%s)",
            (db.schema, list(tables), sorted(targets)),
        ).fetchall()
    return sorted(f"{r[0]} -> {r[1]}" for r in rows)


def existing_tables(db: Database) -> set[str]:
    if db.kind == "sqlite":
        rows = outside(db, "select name from sqlite_master where type = 'table'")
    else:
        rows = outside(
            db,
            "select tablename from pg_tables where schemaname = current_schema()",
        )
    return {str(r[0]) for r in rows}


def migrated(db: Database) -> None:
    with db.sync_client() as client:
        client.stats()


class Audit(Extension):
    """A well-formed extension a test adds its faults to."""

    name = "audit"
    migrations = ("x0099_audit.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_audit_log": "trigger"}


def test_the_builtin_declarations_keep_the_rules() -> None:
    assert declaration_faults(builtins()) == []


def test_each_shipped_extension_folder_keeps_the_rules() -> None:
    assert [f.name for f in shipped_folders()] == [
        "batches",
        "history",
        "limits",
        "logs",
        "pauses",
        "policies",
        "presence",
        "schedules",
        "search",
        "snooze",
        "steps",
        "uniqueness",
        "waits",
        "workflows",
    ]
    assert folder_faults(builtins(), shipped_folders()) == []


def test_the_grandfathered_statement_names_are_all_still_shipped() -> None:
    shipped = {f.name: {p.stem for p in f.glob("sql/*/*.sql")} for f in shipped_folders()}
    assert {ext: set(names) - shipped.get(ext, set()) for ext, names in UNPREFIXED.items()} == {
        ext: set() for ext in UNPREFIXED
    }


def test_a_bad_folder_is_caught_by_each_rule(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    for name in (
        "migrations/sqlite/x0099_audit.sql",
        "migrations/sqlite/x0098_other.sql",
        "sql/sqlite/audit_get.sql",
        "sql/postgres/get_audit.sql",
        "sql/postgres/schedule_get.sql",
    ):
        (audit / name).parent.mkdir(parents=True, exist_ok=True)
        (audit / name).write_text("select 1\n", encoding="utf-8")
    (tmp_path / "stray" / "sql").mkdir(parents=True)
    faults = folder_faults([*builtins(), Audit()], [audit, tmp_path / "stray"])
    assert faults == [
        "audit: ships x0098_other.sql (sqlite), not its own",
        "audit: statement get_audit (postgres) is not audit_*",
        "audit: statement schedule_get (postgres) is not audit_*",
        "stray: a folder with statements or migrations, no extension",
    ]


def test_every_x_migration_and_extension_table_has_one_owner() -> None:
    assert unowned(builtins()) == []


def test_the_registry_accepts_the_builtins_once_each() -> None:
    assert [ext.name for ext in check(builtins())] == [ext.name for ext in builtins()]


def test_a_bad_declaration_is_caught_by_each_rule() -> None:
    class Bad(Extension):
        name = "bad"
        migrations = ("0001_init.sql", "x0099_nowhere.sql", "x0006_limits.sql")
        needs = ("x0098_nobody.sql",)
        optional = ("x0007_flow.sql",)
        tables: ClassVar[Mapping[str, TaskRows]] = {
            "audit_log": "trigger",
            "cairnq_limits": "not_task_keyed",
        }

    faults = declaration_faults([*builtins(), Bad()])
    assert faults == [
        "bad: table audit_log is not named cairnq_*",
        "bad: migration 0001_init.sql is not x-numbered",
        "bad: migration x0099_nowhere.sql is not shipped for sqlite",
        "bad: migration x0099_nowhere.sql is not shipped for postgres",
        "bad: optional x0007_flow.sql is not one of its migrations",
        "bad: x0006_limits.sql is owned by limits too",
        "bad: cairnq_limits is owned by limits too",
        "bad: needs x0098_nobody.sql, which no other extension owns",
    ]


def test_a_migration_or_table_no_extension_owns_is_caught() -> None:
    without_limits = [ext for ext in builtins() if ext.name != "limits"]
    assert unowned(without_limits) == [
        "migration x0006_limits.sql",
        "migration x0015_limit_keys_unbound.sql",
        "migration x0022_fair_share.sql",
        "migration x0027_fair_index.sql",
        "migration x0029_fair_rekey.sql",
        "table cairnq_fair_shares",
        "table cairnq_fair_tasks",
        "table cairnq_limit_keys",
        "table cairnq_limits",
        "table cairnq_rate_buckets",
    ]


def test_an_extension_is_ready_once_its_migrations_but_the_optional_ones_are_applied() -> None:
    limits = next(ext for ext in builtins() if ext.name == "limits")
    assert limits.missing(set()) == ("x0006_limits.sql",)
    assert limits.missing({"x0006_limits.sql"}) == ()
    refusal = limits.refusal(limits.missing(set()), "2 limit(s)")
    assert refusal.missing == ("x0006_limits.sql",)
    assert str(refusal).startswith("this worker declares 2 limit(s) but the database lacks")


def test_the_registry_refuses_two_owners_of_a_table_or_one_name_twice() -> None:
    class Other(Audit):
        name = "other"
        migrations = ()

    with pytest.raises(InvalidArgument, match="table cairnq_audit_log is audit's"):
        check([Audit(), Other()])
    with pytest.raises(InvalidArgument, match="two extensions are named audit"):
        check([Audit(), Audit()])


def test_every_extension_table_exists_and_none_references_a_protocol_table(
    db: Database,
) -> None:
    migrated(db)
    tables = sorted(t for ext in builtins() for t in ext.tables)
    assert set(tables) - existing_tables(db) == set()
    assert foreign_keys_to(db, tables, protocol_tables()) == []


def test_a_foreign_key_from_an_extension_table_to_a_protocol_table_is_caught(
    db: Database,
) -> None:
    migrated(db)
    outside(db, "create table cairnq_audit_log (task_id text references cairnq_tasks (id))")
    tables = sorted(t for ext in [*builtins(), Audit()] for t in ext.tables)
    assert foreign_keys_to(db, tables, protocol_tables()) == ["cairnq_audit_log -> cairnq_tasks"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_kernel_folder_ships_the_kernel_s_migrations_alone(dialect: str) -> None:
    folder = Path(str(kernel_root())) / "migrations" / dialect
    assert sorted(f.name for f in folder.glob("*.sql")) == sorted(KERNEL_MIGRATIONS)


def test_cairnq_s_own_tables_are_the_protocol_s_the_ledger_and_the_kernel_s() -> None:
    assert protocol_tables() | set(KERNEL_TABLES) | {"cairnq_migrations"} == core_tables()


def test_no_extension_statement_writes_a_table_of_cairnq_s_own() -> None:
    installed = resources.files(GuideAudit.package)
    known = any(str(root) == str(installed) for root in roots())
    install([GuideAudit()])
    try:
        core = {str(bundled_root()), str(kernel_root())}
        folders = [Path(str(root)) for root in roots() if str(root) not in core]
        assert Path(str(installed)) in folders
        assert core_writes(folders) == []
    finally:
        if not known:
            drop_folder(installed)


def test_a_statement_writing_a_table_of_cairnq_s_own_is_caught(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    statements = {
        "sql/sqlite/audit_record.sql": "insert into cairnq_audit_log (task_id) values (:id);",
        "sql/sqlite/audit_touch.sql": "-- ends\nupdate cairnq_tasks set priority = 0 where id = 1",
        "sql/postgres/audit_forget.sql": (
            "with gone as (delete from CAIRNQ_TASK_KEYS where task_id = :id returning 1)\n"
            "insert into cairnq_audit_log (task_id) select :id from gone"
        ),
        "sql/postgres/audit_reset.sql": "truncate cairnq_audit_log, public.cairnq_leases",
        "sql/postgres/audit_note.sql": "select 'update cairnq_tasks' -- delete from cairnq_meta",
    }
    for name, text in statements.items():
        (audit / name).parent.mkdir(parents=True, exist_ok=True)
        (audit / name).write_text(text, encoding="utf-8")
    assert core_writes([audit]) == [
        "audit_touch (sqlite) writes cairnq_tasks",
        "audit_forget (postgres) writes cairnq_task_keys",
        "audit_reset (postgres) writes cairnq_leases",
    ]


def _private(dotted: str) -> bool:
    """Whether ``dotted`` reaches a private name of ``cairnq.kernel`` (a ``_x`` part after
    it; dunders are Python's own)."""
    if dotted != "cairnq.kernel" and not dotted.startswith("cairnq.kernel."):
        return False
    return any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in dotted.split(".")[2:]
    )


def private_kernel_uses(root: Path) -> list[str]:
    """``module:line name`` for each private name of ``cairnq.kernel`` that a module
    under ``root/extensions/`` imports or reads as an attribute of what it imported
    (``root`` is a ``cairnq`` package folder)."""
    found = []
    for path in sorted((root / "extensions").rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        bound: dict[str, str] = {}
        uses: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    uses.append((node.lineno, alias.name))
                    bound[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)]
                target = (
                    ".".join([*base, node.module] if node.module else base)
                    if node.level
                    else node.module or ""
                )
                for alias in node.names:
                    uses.append((node.lineno, f"{target}.{alias.name}"))
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            chain: list[str] = []
            value: ast.expr = node
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                uses.append((node.lineno, ".".join([bound[value.id], *chain])))
        found.extend(f"{module}:{line} {name}" for line, name in uses if _private(name))
    return sorted(set(found))


def test_no_extension_uses_a_private_name_of_the_kernel() -> None:
    assert private_kernel_uses(SRC) == []


def test_a_private_name_of_the_kernel_is_caught_however_it_is_reached(tmp_path: Path) -> None:
    bad = tmp_path / "cairnq" / "extensions" / "bad"
    bad.mkdir(parents=True)
    (bad / "_ops.py").write_text(
        "import cairnq.kernel.settle\n"
        "from ... import kernel\n"
        "from ...kernel import insert, list_tasks\n"
        "from ...kernel._shared import Draw\n"
        "from ...kernel.reads import _list\n"
        "from cairnq.kernel import points as p\n"
        "kernel._emit_for([])\n"
        "cairnq.kernel.settle._owned_row(None, [])\n"
        "p._gate\n"
        "kernel.insert.__name__\n",
        encoding="utf-8",
    )
    assert private_kernel_uses(tmp_path / "cairnq") == [
        "cairnq.extensions.bad._ops:4 cairnq.kernel._shared.Draw",
        "cairnq.extensions.bad._ops:5 cairnq.kernel.reads._list",
        "cairnq.extensions.bad._ops:7 cairnq.kernel._emit_for",
        "cairnq.extensions.bad._ops:8 cairnq.kernel.settle._owned_row",
        "cairnq.extensions.bad._ops:9 cairnq.kernel.points._gate",
    ]


def core_statements_called(root: Path) -> list[str]:
    """``module:line statement`` for each ``Call("<statement>", ...)`` in a module under
    ``root/extensions/`` running a statement of the protocol's or the kernel's that
    writes a table of cairnq's own (which only the kernel's operations run)."""
    writing = {
        name
        for dialect in DIALECTS
        for name, statement in gather_statements((bundled_root(), kernel_root()), dialect).items()
        if written_tables(statement.source) & core_tables()
    }
    found = []
    for path in sorted((root / "extensions").rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Call"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in writing
            ):
                found.append(f"{module}:{node.lineno} {node.args[0].value}")
    return found


def test_no_extension_runs_a_statement_writing_a_table_of_cairnq_s_own() -> None:
    assert core_statements_called(SRC) == []


def test_an_extension_running_a_statement_writing_a_table_of_cairnq_s_own_is_caught(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "cairnq" / "extensions" / "bad"
    bad.mkdir(parents=True)
    (bad / "_ops.py").write_text(
        'rows = yield Call("cancel", {"id": task_id})\n'
        'yield Call("get", {"id": task_id})\n'
        'yield Call("upsert_key", {"key": key})\n',
        encoding="utf-8",
    )
    assert core_statements_called(tmp_path / "cairnq") == [
        "cairnq.extensions.bad._ops:1 cancel",
        "cairnq.extensions.bad._ops:3 upsert_key",
    ]
