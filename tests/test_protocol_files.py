"""The protocol files as shipped; each dialect's parity is in the driver suite."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import cairnq
from cairnq._sql import find_protocol_root, load_migrations, load_statements
from cairnq.backends._sqlite_files import split_script
from cairnq.drivertest.test_parity import (
    DIALECT_EXTRAS,
    check_one_statement_per_file,
    check_statement_headers,
)
from cairnq.errors import InvalidArgument
from cairnq.protocol.statements import (
    DIALECTS,
    Dialect,
    added_roots,
    gather_migrations,
    gather_statements,
    migrations,
    statements,
)

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


def test_every_postgres_statement_is_short_enough_for_psycopgs_query_cache() -> None:
    # Past these, psycopg converts a query's placeholders again at every execution.
    from psycopg import _queries

    longest = getattr(_queries, "MAX_CACHED_STATEMENT_LENGTH", 4096)
    most = getattr(_queries, "MAX_CACHED_STATEMENT_PARAMS", 50)
    too_big = [
        name
        for name, statement in statements("postgres").items()
        if len(statement.text.encode()) > longest or len(statement.params) > most
    ]
    assert too_big == []


def test_postgres_text_keeps_quoted_whitespace_and_drops_the_indentation() -> None:
    from cairnq.protocol.statements import _load_statement

    statement = _load_statement(
        "postgres",
        "spaced",
        "select  'a  b\n  c',\n    \"odd  name\"\n  from t -- a comment\n  where x = :x;\n",
    )
    assert statement.text == "select 'a  b\n  c',\n\"odd  name\"\nfrom t\nwhere x = %(x)s"


def test_postgres_text_keeps_escaped_and_dollar_quoted_strings_and_block_comments() -> None:
    from cairnq.protocol.statements import _load_statement

    source = (
        "select  E'it\\'s  two',  $x$a   b$x$,  $$it's  here$$,  /* don't  */  'p  q',  a$x  from t"
    )
    statement = _load_statement("postgres", "quoted", source)
    assert (
        statement.text
        == "select E'it\\'s  two', $x$a   b$x$, $$it's  here$$, /* don't  */ 'p  q', a$x from t"
    )


def test_sqlite_migrations_split_into_complete_statements() -> None:
    for migration in migrations("sqlite"):
        for part in split_script(migration.source):
            assert sqlite3.complete_statement(part), migration.name


def test_the_protocol_ships_as_package_data() -> None:
    root = Path(cairnq.__file__).parent / "protocol"
    assert (root / "PROTOCOL.md").is_file()
    assert len(shipped_files("sql", "sqlite")) == len(statements("sqlite"))


def shipped_files(kind: str, dialect: str) -> list[Path]:
    """The ``kind/<dialect>/*.sql`` files of the protocol, the kernel, every
    extension's folder, and the folders of outside extensions an earlier test in this
    process installed (``cairnq._sql`` reads those too)."""
    package = Path(cairnq.__file__).parent
    added = [Path(str(root)) for root in added_roots()]
    return sorted(
        [
            *(package / "protocol" / kind / dialect).glob("*.sql"),
            *(package / "kernel" / kind / dialect).glob("*.sql"),
            *(package / "extensions").glob(f"*/{kind}/{dialect}/*.sql"),
            *(f for root in added for f in (root / kind / dialect).glob("*.sql")),
        ],
        key=lambda f: f.name,
    )


def test_every_data_file_of_the_package_matches_the_package_data_of_the_wheel() -> None:
    package = Path(cairnq.__file__).parent
    pyproject = (package.parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"\[tool\.setuptools\.package-data\]\ncairnq = \[(.*?)\]", pyproject, re.S)
    assert block is not None
    patterns = re.findall(r'"([^"]+)"', block.group(1))
    included = {path for pattern in patterns for path in package.glob(pattern)}
    data = {
        path
        for path in package.rglob("*")
        if path.is_file()
        and path.suffix in (".sql", ".html", ".md", ".json", ".css", ".js", ".typed")
    }
    assert sorted(str(p.relative_to(package)) for p in data - included) == []
    assert any(p.parts[-4:-2] == ("schedules", "sql") for p in included)
    assert any(p.parts[-4:-2] == ("kernel", "migrations") for p in included)
    assert any(p.parts[-2] == "templates" and "extensions" in p.parts for p in included)


def test_the_shipped_namespace_holds_each_extension_s_statements_and_migrations() -> None:
    package = Path(cairnq.__file__).parent / "extensions" / "schedules"
    assert statements("sqlite")["schedule_get"].source == (
        package / "sql" / "sqlite" / "schedule_get.sql"
    ).read_text(encoding="utf-8")
    names = [m.name for m in migrations("postgres")]
    assert names == sorted(names)
    assert "x0005_schedules.sql" in names
    assert {"x0005_schedules.sql"} == {
        f.name for f in (package / "migrations" / "postgres").glob("*.sql")
    }


# The reference protocol's statements and migrations (its catalogue), which the
# protocol directory holds alone; cairnq's additions are the kernel's folder's.
REFERENCE_STATEMENTS = {
    *("insert_task", "get", "get_by_key", "get_key", "get_status", "get_status_by_key"),
    *("lock_key", "upsert_key", "list", "cancel", "retry", "claimable_probe"),
    *("recover_leases", "claim", "claim_one_queue", "claim_one_name"),
    *("claim_one_queue_one_name", "heartbeat", "heartbeat_batch", "progress", "succeed"),
    *("complete", "fail", "purge", "queue_depth", "stats", "protocol_version"),
}
REFERENCE_MIGRATIONS = {
    *("0001_init", "0002_purge_index", "0004_lease_index", "0005_clear_terminal_lease"),
    *("0006_claim_name_index", "0007_purge_status_index", "0008_claim_due_index"),
    *("0009_purge_queue_index", "0010_drop_status_index"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_protocol_directory_holds_the_reference_protocol_s_files_alone(
    dialect: Dialect,
) -> None:
    root = Path(cairnq.__file__).parent / "protocol"
    only_here = {"postgres": ({"installations"}, {"0003_notify"}), "sqlite": (set(), set())}
    extra_statements, extra_migrations = only_here[dialect]
    assert {f.stem for f in (root / "sql" / dialect).glob("*.sql")} == (
        REFERENCE_STATEMENTS | extra_statements
    )
    assert {f.stem for f in (root / "migrations" / dialect).glob("*.sql")} == (
        REFERENCE_MIGRATIONS | extra_migrations
    )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_kernel_s_statements_and_migrations_load_beside_the_protocol_s(
    dialect: Dialect,
) -> None:
    kernel = Path(cairnq.__file__).parent / "kernel"
    names = [m.name for m in migrations(dialect)]
    assert {f.name for f in (kernel / "migrations" / dialect).glob("*.sql")} <= set(names)
    assert "x0003_leases.sql" in names
    assert statements(dialect)["hand_back"].source == (
        kernel / "sql" / dialect / "hand_back.sql"
    ).read_text(encoding="utf-8")


def _folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


STATEMENT = "-- a statement\n-- returns: rows\n-- params: id\nselect :id\n"


def test_an_extension_folder_joins_the_namespace_and_may_lack_a_kind(tmp_path: Path) -> None:
    protocol = _folder(
        tmp_path / "protocol",
        {"sql/sqlite/get.sql": STATEMENT, "migrations/sqlite/0001_init.sql": "select 1;\n"},
    )
    audit = _folder(tmp_path / "audit", {"migrations/sqlite/x0002_audit.sql": "select 2;\n"})
    notes = _folder(tmp_path / "notes", {"sql/sqlite/notes_get.sql": STATEMENT})
    roots = (protocol, audit, notes)
    assert sorted(gather_statements(roots, "sqlite")) == ["get", "notes_get"]
    assert [m.name for m in gather_migrations(roots, "sqlite")] == [
        "0001_init.sql",
        "x0002_audit.sql",
    ]


@pytest.mark.parametrize(
    ("kind", "file", "message"),
    [
        ("sql", "get.sql", "statement get (sqlite) is defined twice"),
        ("migrations", "0001_init.sql", "migration 0001_init.sql (sqlite) is defined twice"),
    ],
    ids=["statement", "migration"],
)
def test_a_name_in_two_folders_fails_loading_naming_both(
    tmp_path: Path, kind: str, file: str, message: str
) -> None:
    protocol = _folder(
        tmp_path / "protocol",
        {"sql/sqlite/get.sql": STATEMENT, "migrations/sqlite/0001_init.sql": "select 1;\n"},
    )
    clash = _folder(tmp_path / "clash", {f"{kind}/sqlite/{file}": STATEMENT})
    gather = gather_statements if kind == "sql" else gather_migrations
    with pytest.raises(InvalidArgument, match=re.escape(message)) as refused:
        gather((protocol, clash), "sqlite")
    assert str(protocol) in str(refused.value) and str(clash) in str(refused.value)


def test_the_protocol_folder_must_have_the_dialect_an_extension_folder_need_not(
    tmp_path: Path,
) -> None:
    protocol = _folder(tmp_path / "protocol", {"sql/sqlite/get.sql": STATEMENT})
    assert sorted(gather_statements((protocol, tmp_path / "empty"), "sqlite")) == ["get"]
    with pytest.raises(InvalidArgument, match="has no sql/postgres folder"):
        gather_statements((protocol,), "postgres")


# --- cairnq._sql: the protocol directory as the reference's tests read it ----------------

SHIPPED = Path(cairnq.__file__).parent / "protocol"


@pytest.fixture
def no_protocol_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAIRNQ_PROTOCOL_DIR", raising=False)


def test_the_protocol_root_is_the_shipped_directory_unless_told_otherwise(
    no_protocol_dir: None,
) -> None:
    assert find_protocol_root() == SHIPPED


@pytest.mark.parametrize("dialect", DIALECTS)
def test_load_statements_reads_every_shipped_statement_by_file_stem(
    no_protocol_dir: None, dialect: str
) -> None:
    files = shipped_files("sql", dialect)
    loaded = load_statements(dialect)
    assert loaded == {f.stem: f.read_text(encoding="utf-8") for f in files}
    assert {"insert_task", "claim", "complete", "fail", "recover_leases"} <= set(loaded)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_load_migrations_reads_every_shipped_migration_in_the_order_they_apply(
    no_protocol_dir: None, dialect: str
) -> None:
    files = shipped_files("migrations", dialect)
    loaded = load_migrations(dialect)
    assert loaded == [(f.name, f.read_text(encoding="utf-8")) for f in files]
    names = [name for name, _ in loaded]
    assert names[0] == "0001_init.sql" and "0010_drop_status_index.sql" in names
    assert ("0003_notify.sql" in names) == (dialect == "postgres")


def test_protocol_dir_points_the_loaders_at_another_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "protocol"
    shutil.copytree(SHIPPED / "sql", copy / "sql")
    shutil.copytree(SHIPPED / "migrations", copy / "migrations")
    changed = "-- get, edited\nselect * from cairnq_tasks where id = :id\n"
    (copy / "sql" / "sqlite" / "get.sql").write_text(changed, encoding="utf-8")
    monkeypatch.setenv("CAIRNQ_PROTOCOL_DIR", str(copy))
    loaded = load_statements("sqlite")
    assert find_protocol_root() == copy
    assert loaded["get"] == changed
    assert loaded["get_by_key"] == (SHIPPED / "sql" / "sqlite" / "get_by_key.sql").read_text()
    assert [name for name, _ in load_migrations("sqlite")] == [m.name for m in migrations("sqlite")]
    # The backends run the shipped files whatever the variable says.
    assert statements("sqlite")["get"].source != changed


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (None, "is not a directory"),
        ((), "has no sql/ and no migrations/ folder"),
        (("sql/sqlite",), "has no migrations/ folder"),
        (("sql/postgres", "migrations/postgres"), "has no sql/sqlite folder"),
    ],
    ids=["missing", "empty", "no-migrations", "no-dialect"],
)
def test_protocol_dir_naming_no_protocol_directory_is_refused_saying_what_is_wrong(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: tuple[str, ...] | None,
    message: str,
) -> None:
    root = tmp_path / "protocol"
    for folder in layout or ():
        (root / folder).mkdir(parents=True)
    if layout is not None:
        root.mkdir(exist_ok=True)
    monkeypatch.setenv("CAIRNQ_PROTOCOL_DIR", str(root))
    with pytest.raises(InvalidArgument, match=re.escape(message)) as refused:
        load_statements("sqlite")
    assert str(root) in str(refused.value)


@pytest.mark.parametrize("load", [load_statements, load_migrations])
def test_loading_an_unknown_dialect_is_refused(
    no_protocol_dir: None, load: Callable[[str], object]
) -> None:
    with pytest.raises(InvalidArgument, match="dialect must be one of sqlite, postgres"):
        load("mysql")


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
