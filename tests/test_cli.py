"""The ``cairnq`` command line, run in-process through ``main(argv, out)``.

Every command on both backends where the backend matters, each error path as
one line on stderr with its exit code. What a user's shell gives the script (a
current directory, no database in the environment, stdin not a terminal) runs
the script's entry function in this process under those conditions
(``cairnq(...)``); the installed script runs in a subprocess where a process of
its own is what is tested: its exit codes, a terminal as stdin, a missing
extra in a fresh interpreter, and a worker stopped by a signal. Tasks are moved
through ``running`` with the low-level operations a worker uses, or by a real
worker where the command waits on one.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import io
import json
import logging
import os
import pty
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cairnq import SyncCairnQ, TaskError, Worker, kernel
from cairnq._extras import missing_extra
from cairnq.cli import CommandError, Target, _tasks, main, resolve_target
from cairnq.cli import _parser as cli_parser
from cairnq.cli._schema import gap_note
from cairnq.durations import format_duration, parse_duration, parse_milliseconds
from cairnq.errors import InvalidArgument, SerializationError
from cairnq.models import Lease, Task
from cairnq.protocol.statements import migrations

from . import _inprocess as inprocess
from ._db import Database, admin_connect, drop_schema
from ._inprocess import run_cairnq
from ._statements import sent_anywhere, silent_refusal
from .test_without_extensions import migrate_only

WORKER_ID = "worker_cli_test"
COMMANDS = ["migrate", "worker", "submit", "get", "ls", "cancel", "retry", "purge", "stats", "top"]
COMMANDS += ["schedules"]


# --- running the command line ------------------------------------------------------------


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def cli_url(db: Database) -> str:
    """The test database as the URL the command line takes (libpq key=value is not one)."""
    if db.kind == "sqlite":
        return db.url
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(db.url)
    user = f"{quote(str(params['user']))}@" if params.get("user") else ""
    host = params.get("host", "127.0.0.1")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{quote(str(params['dbname']))}"


def db_args(db: Database) -> list[str]:
    """``--db`` (and ``--schema`` on PostgreSQL) for ``db``."""
    args = ["--db", cli_url(db)]
    return args + (["--schema", db.schema] if db.schema else [])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()
    out = io.StringIO()
    code = main(list(argv), out=out)
    return Result(code, out.getvalue(), capsys.readouterr().err)


def run_on(db: Database, capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    return run(capsys, *argv, *db_args(db))


SCRIPT = Path(sys.executable).parent / "cairnq"


def script_env() -> dict[str, str]:
    """The environment without a database or schema chosen for the command."""
    return {
        k: v for k, v in os.environ.items() if k not in ("CAIRNQ_DATABASE_URL", "CAIRNQ_SCHEMA")
    }


def cairnq(*argv: str, cwd: Path | None = None) -> Result:
    """``cairnq ARGV`` run in this process as the installed script runs in its own.

    The script's entry function, in ``cwd``, without the environment's database or
    schema, stdin not a terminal, nothing configured logging (``tests/_inprocess.py``).
    """
    return Result(*run_cairnq(*argv, cwd=cwd))


def installed_cairnq(
    *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Result:
    """Run the installed ``cairnq`` script in a subprocess, stdin not a terminal."""
    proc = subprocess.run(
        [str(SCRIPT), *argv],
        cwd=cwd,
        env=env or script_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def cairnq_on_a_terminal(answer: str, *argv: str) -> Result:
    """Run the ``cairnq`` script with a pseudo-terminal as stdin, typing ``answer``."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(SCRIPT), *argv],
            env=script_env(),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        os.write(controller, answer.encode())
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(controller)
    return Result(proc.returncode, out, err)


def one_error_line(result: Result) -> str:
    """The single ``cairnq: error: ...`` line a failed command printed."""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("cairnq: error: "), lines[0]
    return lines[0]


# --- the database underneath -------------------------------------------------------------


@pytest.fixture
def cq(db: Database) -> SyncCairnQ:
    """A client on ``db``, which it creates and migrates."""
    return db.sync_client().open()


def sql(db: Database, statement: str) -> list[tuple[Any, ...]]:
    """Run raw SQL on the test database (to age rows or edit the ledger)."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(str(db.path))) as conn, conn:
            return conn.execute(statement).fetchall()
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def schema_exists(db: Database) -> bool:
    import psycopg

    with psycopg.connect(db.url) as conn:
        row = conn.execute(
            "select count(*) from pg_namespace where nspname = %s", [db.schema]
        ).fetchone()
    return bool(row and row[0])


def claim(cq: SyncCairnQ, task: Task) -> Lease:
    op = kernel.claim([task.queue], WORKER_ID, 60_000, [kernel.Draw([task.name], 1)], 100)
    rows = cq.backend.run(op, write=True)
    assert [r["id"] for r in rows] == [task.id]
    return Lease.of(rows[0])


def fail(cq: SyncCairnQ, lease: Lease) -> None:
    error = json.dumps({"type": "Boom", "code": "boom", "message": "no", "retryable": False})
    cq.backend.run(kernel.fail(lease, WORKER_ID, error, retryable=False, delay_ms=0), write=True)


def backdate(db: Database, task: Task, ms: int) -> None:
    """Make ``task`` look ``ms`` older (``ls`` orders by creation time, ties by random id)."""
    sql(db, f"update cairnq_tasks set created_at_ms = created_at_ms - {ms} where id = '{task.id}'")


def reread(cq: SyncCairnQ, task_id: str) -> Task:
    task = cq.get(task_id)
    assert task is not None
    return task


@contextlib.contextmanager
def serving(worker: Worker) -> Iterator[Worker]:
    """Run ``worker`` on its own event loop in a thread for the duration of the block."""
    ready, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    async def serve() -> None:
        try:
            async with worker.background():
                ready.set()
                await asyncio.get_running_loop().run_in_executor(None, done.wait)
        finally:
            await worker.close()

    def target() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    assert ready.wait(60)
    try:
        yield worker
    finally:
        done.set()
        thread.join(60)
    assert not errors, errors


# --- choosing the database ---------------------------------------------------------------


def test_database_defaults_to_cairnq_db_in_the_current_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CAIRNQ_DATABASE_URL", raising=False)
    assert resolve_target(None, None) == Target("sqlite", "cairnq.db")


def test_database_comes_from_cairnq_database_url_without_db_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRNQ_DATABASE_URL", "sqlite:////var/lib/jobs.db")
    assert resolve_target(None, None) == Target("sqlite", "/var/lib/jobs.db")


def test_db_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRNQ_DATABASE_URL", "sqlite:///env.db")
    assert resolve_target("flag.db", None) == Target("sqlite", "flag.db")


def test_postgresql_url_selects_postgres_with_the_schema_from_cairnq_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRNQ_SCHEMA", "jobs")
    target = resolve_target("postgres://app@db:5433/app", None)
    assert (target.dialect, target.schema) == ("postgres", "jobs")


def test_schema_flag_wins_over_cairnq_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRNQ_SCHEMA", "jobs")
    assert resolve_target("postgresql://db/app", "other").schema == "other"


def test_postgres_description_leaves_out_the_password() -> None:
    target = resolve_target("postgresql://app:s3cret@db:5433/app", "jobs")
    assert target.describe() == "PostgreSQL db:5433/app (schema jobs)"


def test_libpq_key_value_string_is_refused_and_creates_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(capsys, "submit", "x", "--db", "host=127.0.0.1 dbname=app")
    assert result.code == 1
    assert "postgresql://" in one_error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_schema_flag_with_a_sqlite_database_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(capsys, "migrate", "--db", str(tmp_path / "a.db"), "--schema", "jobs")
    assert result.code == 1
    assert "--schema applies to PostgreSQL only" in one_error_line(result)


def test_unknown_url_scheme_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "ls", "--db", "mysql://db/app")
    assert result.code == 1
    assert "unsupported database URL scheme 'mysql'" in one_error_line(result)


@pytest.mark.parametrize("empty", ["", "  "], ids=["empty", "blank"])
def test_an_empty_db_is_refused_instead_of_falling_back_to_cairnq_db(
    empty: str, tmp_path: Path
) -> None:
    assert cairnq("migrate", cwd=tmp_path).code == 0
    result = cairnq("--db", empty, "ls", cwd=tmp_path)
    assert result.code == 1
    assert one_error_line(result).startswith("cairnq: error: --db is empty")


def test_db_may_come_before_the_command(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit("early")
    result = run(capsys, *db_args(db), "ls", "--jsonl")
    assert [json.loads(line)["name"] for line in result.lines] == ["early"]


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("7d", 7 * 86_400_000),
        ("12h", 12 * 3_600_000),
        ("30m", 30 * 60_000),
        ("45s", 45_000),
        ("500ms", 500),
        ("1h30m", 5_400_000),
        ("2d12h", 216_000_000),
        ("1m30s500ms", 90_500),
        ("0s", 0),
        (" 7D ", 7 * 86_400_000),
        ("1.5s", 1_500),
        ("0.5h", 1_800_000),
    ],
)
def test_duration_is_parsed_to_milliseconds(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "text", ["", "7", "1.5", "7x", "-5m", "1.h", "30m1h", "1h1h", "h", "5 m", "7dd", "1w"]
)
def test_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="duration"):
        parse_duration(text)


def test_a_negative_duration_is_refused_saying_it_is_negative() -> None:
    with pytest.raises(InvalidArgument, match=r"^duration '-1h30m' is negative: .* '1h30m'$"):
        parse_duration("-1h30m")


@pytest.mark.parametrize(
    "argv", [["submit", "job", "--delay", "-5m"], ["purge", "--older-than", "-1d"]]
)
def test_a_negative_duration_after_an_option_reaches_its_check_in_one_line(
    db: Database, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    result = run_on(db, capsys, *argv)
    assert result.code == 2
    assert "is negative: give a length of time" in one_error_line(result)


@pytest.mark.parametrize(
    ("text", "ms"), [("0", 0), ("1500", 1500), ("5m", 300_000), ("1h30m", 5_400_000)]
)
def test_milliseconds_are_a_whole_number_or_a_duration(text: str, ms: int) -> None:
    assert parse_milliseconds(text) == ms


@pytest.mark.parametrize("text", ["", "1.5", "-5", "5x", "ms"])
def test_milliseconds_that_are_neither_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_milliseconds(text)


def test_absurdly_long_duration_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="too long"):
        parse_duration("99999999999999999d")


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (-5, "0s"),
        (850, "850ms"),
        (42_000, "42s"),
        (185_000, "3m05s"),
        (7_620_000, "2h07m"),
        (273_600_000, "3d04h"),
    ],
)
def test_duration_is_formatted_for_people(ms: int, text: str) -> None:
    assert format_duration(ms) == text


# --- help --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_a_one_line_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main([command, "--help"], out=io.StringIO())
    help_text = capsys.readouterr().out
    assert code == 0
    examples = [line for line in help_text.splitlines() if line.startswith("example: ")]
    assert len(examples) == 1
    assert examples[0].startswith(f"example: cairnq {command}")


def test_bare_cairnq_prints_the_full_help_with_every_command_and_exits_2() -> None:
    result = installed_cairnq()
    assert result.code == 2
    assert result.err == ""
    assert result.lines[0].startswith("usage: cairnq")
    listed = {line.split()[0] for line in result.lines if line.startswith("    ")}
    assert set(COMMANDS) <= listed


def test_version_prints_the_installed_package_version() -> None:
    result = installed_cairnq("--version")
    assert (result.code, result.out) == (0, f"cairnq {importlib.metadata.version('cairnq')}\n")


def test_usage_error_is_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "ls", "--limit", "many")
    assert result.code == 2
    assert "--limit" in one_error_line(result)


# --- migrate -----------------------------------------------------------------------------


def migration_names(db: Database) -> list[str]:
    return [m.name for m in migrations(db.kind)]  # type: ignore[arg-type]


@pytest.mark.fresh_schema
def test_migrate_creates_the_database_and_prints_each_migration_applied(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "migrate")
    assert result.code == 0
    names = migration_names(db)
    assert result.lines == [f"applied  {name}" for name in names] + gap_note(db.kind, names)
    assert {row[0] for row in sql(db, "select name from cairnq_migrations")} == set(
        migration_names(db)
    )


def test_migrate_on_an_up_to_date_database_applies_nothing(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    run_on(db, capsys, "migrate")
    result = run_on(db, capsys, "migrate")
    assert result.code == 0
    assert result.lines == [result.lines[0]]
    assert result.lines[0].startswith("nothing to apply")


@pytest.mark.fresh_schema
def test_migrate_dry_run_prints_what_would_be_applied_and_applies_nothing(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "migrate", "--dry-run")
    assert result.code == 0
    names = migration_names(db)
    assert result.lines == [f"would apply  {name}" for name in names] + gap_note(db.kind, names)
    if db.kind == "sqlite":
        assert db.path is not None and not db.path.exists()
    else:
        assert not schema_exists(db)


def test_migrate_dry_run_lists_only_the_pending_migration(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    last = migration_names(db)[-1]
    migrate_only(db, lambda name: name != last)
    result = run_on(db, capsys, "migrate", "--dry-run")
    assert result.lines == [f"would apply  {last}"]


def test_migrate_status_lists_applied_and_pending_migrations_one_per_line(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    *earlier, last = migration_names(db)
    migrate_only(db, lambda name: name != last)
    result = run_on(db, capsys, "migrate", "--status")
    assert result.code == 0
    assert [line.split()[:2] for line in result.lines] == [
        *(["applied", name] for name in earlier),
        ["pending", last],
        *(line.split()[:2] for line in gap_note(db.kind, earlier)),
    ]


def test_migrate_status_of_a_missing_file_lists_everything_pending_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "new.db"
    result = run(capsys, "migrate", "--status", "--db", str(path))
    assert result.code == 0
    assert {line.split()[0] for line in result.lines[:-1]} == {"pending"}
    assert result.lines[-1] == gap_note("sqlite", ["0002_a.sql", "0004_b.sql"])[0]
    assert not path.exists()


def test_migrate_on_sqlite_says_why_there_is_no_0003_in_one_line(
    sqlite_db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run_on(sqlite_db, capsys, "migrate", "--status").lines
    listed = [line.split()[1] for line in lines[:-1]]
    assert "0002_purge_index.sql" in listed and "0004_lease_index.sql" in listed
    assert lines[-1] == (
        "(no 0003 on SQLite: 0003_notify.sql adds PostgreSQL's LISTEN/NOTIFY trigger, "
        "which it has no counterpart of)"
    )


def test_migrate_dry_run_and_status_together_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "migrate", "--dry-run", "--status")
    assert result.code == 2
    one_error_line(result)


# --- databases the read commands refuse --------------------------------------------------

READ_COMMANDS = [
    ["submit", "email.send"],
    ["ls"],
    ["stats"],
    ["get", "task_x"],
    ["cancel", "--key", "k"],
    ["retry", "task_x"],
    ["purge", "--older-than", "1d"],
    ["top", "-n", "1"],
    ["schedules", "ls"],
]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda a: a[0])
def test_commands_other_than_migrate_worker_demo_refuse_a_missing_file_without_creating_it(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing.db"
    result = run(capsys, *argv, "--db", str(path))
    assert result.code == 1
    assert one_error_line(result) == (
        f"cairnq: error: no cairnq database at {path}; run `cairnq migrate` first (or pass --db)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.fresh_schema
@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda a: a[0])
def test_commands_other_than_migrate_worker_demo_refuse_a_database_without_cairnq_tables(
    argv: list[str], db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.execute("create table unrelated (x integer)")
    result = run_on(db, capsys, *argv)
    assert result.code == 1
    assert "is not a cairnq database; run `cairnq migrate` first" in one_error_line(result)
    if db.kind == "sqlite":
        assert sql(db, "select name from sqlite_master where name like 'cairnq%'") == []
    else:
        assert not schema_exists(db)


def test_a_database_with_pending_protocol_migrations_is_refused(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    last = [name for name in migration_names(db) if not name.startswith("x")][-1]
    sql(db, f"delete from cairnq_migrations where name = '{last}'")
    result = run_on(db, capsys, "ls")
    assert result.code == 1
    assert f"pending migration(s) ({last}); run `cairnq migrate` first" in one_error_line(result)


def test_a_database_without_cairnq_extensions_is_still_readable(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit("job", {})
    sql(db, "delete from cairnq_migrations where name like 'x%'")
    result = run_on(db, capsys, "stats")
    assert result.code == 0
    assert "default" in result.out


def test_a_file_that_is_not_sqlite_is_not_a_cairnq_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just some text, long enough to be looked at as a header " * 4)
    result = run(capsys, "stats", "--db", str(path))
    assert result.code == 1
    assert f"{path} is not a cairnq database" in one_error_line(result)


def test_migrate_next_to_cairnq_tables_in_another_schema_says_to_pass_the_schema_option(
    pg_db: Database,
) -> None:
    pg_db.sync_client().open().close()
    empty = f"{pg_db.schema}_empty"
    with contextlib.closing(admin_connect(pg_db.url)) as conn:
        conn.execute(f'create schema "{empty}"')
    try:
        url = f"{cli_url(pg_db)}?options=-csearch_path%3D{empty}"
        result = cairnq("migrate", "--db", url)
    finally:
        drop_schema(pg_db.url, empty)
    assert result.code == 1
    line = one_error_line(result)
    assert f"cairnq tables exist in schema(s) {pg_db.schema}" in line
    assert line.endswith("; pass --schema SCHEMA to use one of them")


def test_unreachable_postgres_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "stats", "--db", "postgresql://127.0.0.1:1/nothing")
    assert result.code == 1
    assert "cannot connect to PostgreSQL 127.0.0.1:1/nothing" in one_error_line(result)


def test_debug_shows_the_traceback_instead_of_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(CommandError, match="no cairnq database at"):
        main(["--debug", "ls", "--db", str(tmp_path / "missing.db")], out=io.StringIO())


def test_debug_after_the_command_shows_the_traceback_too(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no cairnq database at"):
        main(["ls", "--debug", "--db", str(tmp_path / "missing.db")], out=io.StringIO())


# --- submit ------------------------------------------------------------------------------


def test_submit_prints_the_new_task_id_and_status(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "email.send", '{"to": "ada@example.com"}')
    assert result.code == 0
    task_id, status = result.out.split()
    assert status == "queued"
    assert reread(cq, task_id).payload == {"to": "ada@example.com"}


def test_submit_stores_key_queue_priority_delay_and_max_attempts(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["--key", "k1", "--queue", "emails", "--priority", "7"]
    options += ["--delay-ms", "60000", "--max-attempts", "5"]
    result = run_on(db, capsys, "submit", "email.send", *options)
    task = reread(cq, result.out.split()[0])
    assert (task.queue, task.priority, task.max_attempts) == ("emails", 7, 5)
    assert task.run_at_ms - task.created_at_ms == 60_000
    assert cq.get_by_key("k1") == task


def test_submit_refuses_a_missing_default_database_naming_its_absolute_path(
    tmp_path: Path,
) -> None:
    result = cairnq("submit", "email.send", cwd=tmp_path)
    assert result.code == 1
    assert one_error_line(result) == (
        f"cairnq: error: no cairnq database at {tmp_path / 'cairnq.db'}; "
        "run `cairnq migrate` first (or pass --db)"
    )
    assert list(tmp_path.iterdir()) == []


def test_submit_to_a_mistyped_relative_path_creates_nothing_and_names_the_absolute_path(
    tmp_path: Path,
) -> None:
    assert cairnq("migrate", "--db", "tasks.db", cwd=tmp_path).code == 0
    result = cairnq("--db", "taks.db", "submit", "email.send", cwd=tmp_path)
    assert result.code == 1
    assert f"no cairnq database at {tmp_path / 'taks.db'}" in one_error_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.db"]


@pytest.mark.parametrize(
    ("option", "text", "ms"),
    [
        ("--delay", "5m", 300_000),
        ("--delay", "1h30m", 5_400_000),
        ("--delay-ms", "5m", 300_000),
    ],
)
def test_submit_delay_takes_a_duration_and_delay_ms_milliseconds_too(
    option: str, text: str, ms: int, db: Database, cq: SyncCairnQ
) -> None:
    result = cairnq("submit", "email.send", option, text, *db_args(db))
    assert result.code == 0, result.err
    task = reread(cq, result.out.split()[0])
    assert task.run_at_ms - task.created_at_ms == ms


@silent_refusal
def test_submit_delay_without_a_unit_is_a_usage_error_and_submits_nothing(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "submit", "email.send", "--delay", "5")
    assert sent == []
    assert result.code == 2
    assert "argument --delay: duration '5' has no unit" in one_error_line(result)
    assert cq.list() == []


@pytest.mark.parametrize(
    ("argv", "ms"),
    [
        (["--timeout", "5m"], 300_000),
        (["--timeout-ms", "5m"], 300_000),
        (["--delay", "30s"], None),
    ],
)
def test_submit_timeout_options_give_the_timeout_in_milliseconds(
    argv: list[str], ms: int | None
) -> None:
    args = cli_parser().parse_args(["submit", "email.send", "--wait", *argv])
    assert args.timeout_ms == ms


def test_submit_wait_timeout_takes_a_duration(db: Database, cq: SyncCairnQ) -> None:
    result = cairnq("submit", "nobody.serves", "--wait", "--timeout", "0s", *db_args(db))
    assert result.code == 1
    assert "did not finish within" in result.err
    assert [t.status for t in cq.list()] == ["queued"]


def test_submit_reuses_the_task_a_key_points_at(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run_on(db, capsys, "submit", "a", "--key", "same").out
    second = run_on(db, capsys, "submit", "a", "--key", "same").out
    assert first == second


def test_submit_with_conflict_reject_on_a_taken_key_is_an_error(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    run_on(db, capsys, "submit", "a", "--key", "same")
    result = run_on(db, capsys, "submit", "a", "--key", "same", "--conflict", "reject")
    assert result.code == 1
    assert "task with key 'same' already exists" in one_error_line(result)


@silent_refusal
def test_submit_with_an_unknown_conflict_is_a_usage_error(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "submit", "a", "--key", "k", "--conflict", "merge")
    assert sent == []
    assert result.code == 2
    assert "--conflict: invalid choice: 'merge'" in one_error_line(result)


def test_submit_with_malformed_json_is_an_error_and_touches_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(capsys, "submit", "a", "{'single': 'quotes'}", "--db", str(tmp_path / "x.db"))
    assert result.code == 1
    assert "payload is not valid JSON" in one_error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_submit_with_a_payload_that_is_not_portable_json_is_an_error(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "a", '{"x": NaN}')
    assert result.code == 1
    one_error_line(result)
    assert cq.stats() == {}


def test_submit_with_an_invalid_queue_name_is_an_error(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "a", "--queue", "")
    assert result.code == 1
    assert "queue must not be empty" in one_error_line(result)


def test_submit_reads_the_payload_from_stdin_given_a_dash(
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"from": "stdin"}'))
    result = run_on(db, capsys, "submit", "a", "-")
    assert reread(cq, result.out.split()[0]).payload == {"from": "stdin"}


UNREADABLE_PAYLOADS = [
    pytest.param("[" * 200_000 + "]" * 200_000, "is nested too deeply to read", id="200000-deep"),
    pytest.param('{"n": ' + "7" * 5000 + "}", "holds an integer of 5000 digits", id="5000-digits"),
]


def give_payload(text: str | bytes, how: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The PAYLOAD_JSON argument for ``text``: itself, or ``-`` with ``text`` on stdin."""
    if how == "argument":
        assert isinstance(text, str)
        return text
    data = text if isinstance(text, bytes) else text.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return "-"


@silent_refusal
@pytest.mark.parametrize("how", ["argument", "stdin"])
@pytest.mark.parametrize(("payload", "message"), UNREADABLE_PAYLOADS)
def test_submit_of_an_unreadable_payload_is_one_typed_line_and_submits_nothing(
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    payload: str,
    message: str,
    how: str,
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "submit", "a", give_payload(payload, how, monkeypatch))
    assert sent == []
    assert result.code == 1
    assert one_error_line(result).startswith(f"cairnq: error: payload {message}")
    assert "7777" not in result.err
    assert cq.stats() == {}


@pytest.mark.parametrize(("payload", "message"), UNREADABLE_PAYLOADS)
def test_submit_of_an_unreadable_payload_raises_a_serialization_error_under_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: str, message: str
) -> None:
    with pytest.raises(SerializationError, match=message):
        main(["--debug", "submit", "a", payload, "--db", str(tmp_path / "x.db")], out=io.StringIO())
    assert list(tmp_path.iterdir()) == []


@silent_refusal
def test_submit_of_stdin_that_is_not_utf_8_is_one_line_and_submits_nothing(
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(
            db, capsys, "submit", "a", give_payload(b'{"a": "\xff"}', "stdin", monkeypatch)
        )
    assert sent == []
    assert result.code == 1
    assert "payload on stdin is not valid UTF-8" in one_error_line(result)
    assert cq.stats() == {}


def test_submit_reads_utf_8_from_stdin_whatever_the_locale(
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = '{"word": "naïve"}'.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"))
    result = run_on(db, capsys, "submit", "a", "-")
    assert reread(cq, result.out.split()[0]).payload == {"word": "naïve"}


@pytest.mark.parametrize(("payload", "message"), UNREADABLE_PAYLOADS)
def test_conformance_of_an_unreadable_scenario_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: str, message: str
) -> None:
    scenario = tmp_path / "deep.json"
    scenario.write_text(payload)
    result = run(capsys, "conformance", str(scenario), "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.code == 1
    line = one_error_line(result)
    assert f"cannot read scenario {str(scenario)!r}: the file {message}" in line


def test_submit_json_prints_the_whole_task(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "a", "[1, 2]", "--json")
    printed = json.loads(result.out)
    assert printed == reread(cq, printed["id"]).to_dict()


@silent_refusal
def test_submit_timeout_without_wait_is_a_usage_error(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "submit", "a", "--timeout-ms", "10")
    assert sent == []
    assert result.code == 2
    assert "--timeout only applies with --wait" in one_error_line(result)


def test_submit_wait_prints_the_final_status_and_result(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = db.worker()

    @worker.task("double")
    def double(ctx: Any, payload: dict[str, int]) -> dict[str, int]:
        return {"doubled": payload["x"] * 2}

    with serving(worker):
        result = run_on(db, capsys, "submit", "double", '{"x": 21}', "--wait")
    assert result.code == 0
    assert result.lines[-2].endswith(" succeeded")
    assert result.lines[-1] == 'result: {"doubled":42}'


def test_submit_wait_on_a_task_that_fails_exits_1_with_its_error(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = db.worker()

    @worker.task("refuse")
    def refuse(ctx: Any, payload: Any) -> None:
        raise TaskError("not today", code="nope")

    with serving(worker):
        result = run_on(db, capsys, "submit", "refuse", "--wait", "--timeout-ms", "60000")
    assert result.code == 1
    assert result.lines[-2].endswith(" failed")
    assert result.lines[-1] == "error: TaskError [nope]: not today"


def test_submit_wait_that_times_out_ends_with_a_one_line_error(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "nobody.serves", "--wait", "--timeout-ms", "0")
    assert result.code == 1
    last = result.err.splitlines()[-1]
    assert last.startswith("cairnq: error: ") and "did not finish within 0 ms" in last


# --- get ---------------------------------------------------------------------------------


def test_get_prints_the_task_as_json(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("report", {"month": "2026-11"})
    result = run_on(db, capsys, "get", task.id)
    assert result.code == 0
    shown = json.loads(result.out)
    expected = task.to_dict()
    del expected["created_at_ms"], expected["updated_at_ms"]
    assert {k: v for k, v in shown.items() if k != "timeline"} == expected
    assert shown["timeline"] == [
        {"event": "submitted", "at_ms": task.created_at_ms},
        {"event": "last update", "at_ms": task.updated_at_ms},
    ]


def test_get_prints_each_attempt_and_step_in_the_timeline(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, worker_id="w-cli")

    @worker.task
    def report(ctx: Any) -> int:
        ctx.step("fetch", lambda: 1)
        if ctx.attempt == 1:
            raise ValueError("first attempt breaks")
        return 2

    task = cq.submit("report", max_attempts=2)
    worker.serve(until_idle=True)
    result = run_on(db, capsys, "get", task.id)
    events = json.loads(result.out)["timeline"]
    assert [e["event"] for e in events] == ["submitted", "attempt", "step", "attempt", "succeeded"]
    first, second = events[1], events[3]
    assert (first["attempt"], first["outcome"], first["worker_id"]) == (1, "retry", "w-cli")
    assert first["error"]["message"] == "first attempt breaks"
    assert (second["attempt"], second["outcome"]) == (2, "succeeded")
    assert events[2]["name"] == "fetch"


def test_get_by_key_prints_the_task_the_key_points_at(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("report", key="report:2026-11")
    result = run_on(db, capsys, "get", "--key", "report:2026-11")
    assert json.loads(result.out)["id"] == task.id


def test_get_of_an_unknown_id_exits_1_with_no_task_with_id(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "get", "task_unknown")
    assert result.code == 1
    assert one_error_line(result) == "cairnq: error: no task with id task_unknown"
    assert result.out == ""


def test_get_of_an_unknown_key_exits_1(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "get", "--key", "nobody")
    assert result.code == 1
    assert one_error_line(result) == "cairnq: error: no task with key 'nobody'"


def test_get_needs_an_id_or_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "get")
    assert result.code == 2
    one_error_line(result)


def test_get_with_both_an_id_and_a_key_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "get", "task_x", "--key", "k")
    assert result.code == 2
    assert "not allowed with" in one_error_line(result)


# --- ls ----------------------------------------------------------------------------------


def test_ls_prints_an_aligned_table_newest_first(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    older = cq.submit("short")
    newer = cq.submit("a.much.longer.name", queue="emails")
    backdate(db, older, 1000)
    result = run_on(db, capsys, "ls")
    header, *rows = result.lines
    assert header.split() == ["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "PROGRESS", "AGE"]
    assert [row.split()[:4] for row in rows] == [
        [newer.id, "a.much.longer.name", "emails", "queued"],
        [older.id, "short", "default", "queued"],
    ]
    for column in ("NAME", "QUEUE", "STATUS"):
        start = header.index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows)


def test_ls_shows_attempt_over_max_and_the_progress_of_a_running_task(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("resize", max_attempts=4)
    lease = claim(cq, task)
    cq.backend.run(kernel.progress(lease, WORKER_ID, 0.42, "resizing"), write=True)
    row = run_on(db, capsys, "ls").lines[1].split()
    assert row[3:6] == ["running", "1/4", "42%"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--status", "canceled"], ["b"]),
        (["--queue", "emails"], ["c"]),
        (["--name", "a"], ["a"]),
        (["--limit", "2"], ["c", "b"]),
    ],
)
def test_ls_filters_by_status_queue_name_and_limit(
    flags: list[str],
    expected: list[str],
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backdate(db, cq.submit("a"), 2000)
    b = cq.submit("b")
    cq.cancel(b.id)
    backdate(db, b, 1000)
    cq.submit("c", queue="emails")
    result = run_on(db, capsys, "ls", "--jsonl", *flags)
    assert [json.loads(line)["name"] for line in result.lines] == expected


def test_ls_stopped_by_its_limit_says_how_many_tasks_match_on_stderr(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit_many([("job", {"n": n}) for n in range(5)])
    cq.submit("job", queue="emails")
    stopped = run_on(db, capsys, "ls", "--limit", "3")
    assert len(stopped.out.splitlines()) == 4  # the header and three rows
    assert stopped.err.startswith("showing 3 of 6 tasks (--limit N shows more")
    assert run_on(db, capsys, "ls", "--limit", "3", "--queue", "emails").err == ""
    named = run_on(db, capsys, "ls", "--limit", "2", "--name", "job", "--queue", "default")
    assert named.err.startswith("showing the first 2 tasks; more match")
    assert run_on(db, capsys, "ls", "--limit", "6").err == ""


def test_ls_json_prints_an_array_of_tasks(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a", {"n": 1})
    assert json.loads(run_on(db, capsys, "ls", "--json").out) == [task.to_dict()]


def test_ls_jsonl_prints_one_task_per_line(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    first = cq.submit("a")
    backdate(db, first, 1000)
    second = cq.submit("b")
    lines = run_on(db, capsys, "ls", "--jsonl").lines
    assert [json.loads(line) for line in lines] == [
        second.to_dict(),
        reread(cq, first.id).to_dict(),
    ]


def test_ls_of_an_empty_database_says_no_tasks(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "ls")
    assert (result.code, result.out) == (0, "no tasks\n")


@silent_refusal
def test_ls_with_an_unknown_status_is_a_usage_error(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "ls", "--status", "lost")
    assert sent == []
    assert result.code == 2
    assert "--status: invalid choice: 'lost'" in one_error_line(result)


# --- cancel ------------------------------------------------------------------------------


def test_cancel_of_a_queued_task_cancels_it(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a")
    result = run_on(db, capsys, "cancel", task.id)
    assert (result.code, result.out) == (0, f"{task.id} canceled\n")
    assert reread(cq, task.id).status == "canceled"


def test_cancel_by_key_cancels_the_task_the_key_points_at(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a", key="k")
    assert run_on(db, capsys, "cancel", "--key", "k").code == 0
    assert reread(cq, task.id).status == "canceled"


def test_cancel_of_a_running_task_requests_a_cooperative_cancel(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a")
    claim(cq, task)
    result = run_on(db, capsys, "cancel", task.id)
    assert result.out.startswith(f"{task.id} running (cancel requested")
    assert reread(cq, task.id).cancel_requested


def test_cancel_takes_several_ids_and_keys_and_cancels_each(db: Database, cq: SyncCairnQ) -> None:
    first, second, keyed = cq.submit("a"), cq.submit("b"), cq.submit("c", key="k")
    result = cairnq("cancel", first.id, second.id, "--key", "k", *db_args(db))
    assert result.code == 0, result.err
    assert result.lines == [f"{t.id} canceled" for t in (first, second, keyed)]
    assert {reread(cq, t.id).status for t in (first, second, keyed)} == {"canceled"}


def test_cancel_of_an_already_canceled_task_exits_0_and_says_so(
    db: Database, cq: SyncCairnQ
) -> None:
    task = cq.submit("a")
    cq.cancel(task.id)
    result = cairnq("cancel", task.id, *db_args(db))
    assert (result.code, result.out, result.err) == (0, f"{task.id} already canceled\n", "")


def test_cancel_with_an_unknown_id_among_others_cancels_the_others_and_exits_1(
    db: Database, cq: SyncCairnQ
) -> None:
    first, last = cq.submit("a"), cq.submit("b")
    result = cairnq("cancel", first.id, "task_unknown", last.id, *db_args(db))
    assert result.code == 1
    assert result.lines == [f"{first.id} canceled", f"{last.id} canceled"]
    assert one_error_line(result) == "cairnq: error: no task with id task_unknown"
    assert reread(cq, last.id).status == "canceled"


def test_cancel_of_a_succeeded_task_says_it_already_succeeded_and_exits_1(
    db: Database, cq: SyncCairnQ
) -> None:
    task = cq.submit("a")
    cq.backend.run(kernel.succeed(claim(cq, task), WORKER_ID, "null"), write=True)
    result = cairnq("cancel", task.id, *db_args(db))
    assert result.code == 1
    assert one_error_line(result) == (
        f"cairnq: error: task {task.id} already succeeded; nothing to cancel"
    )


def test_cancel_without_an_id_or_key_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "cancel")
    assert result.code == 2
    assert "give at least one task id or --key" in one_error_line(result)


def test_cancel_of_an_unknown_id_exits_1(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "cancel", "task_unknown")
    assert result.code == 1
    assert one_error_line(result) == "cairnq: error: no task with id task_unknown"


def test_cancel_of_an_unknown_key_exits_1(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "cancel", "--key", "nobody")
    assert result.code == 1
    assert one_error_line(result) == "cairnq: error: no task with key 'nobody'"


# --- retry -------------------------------------------------------------------------------


def test_retry_of_a_canceled_task_queues_it_again(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a")
    cq.cancel(task.id)
    result = run_on(db, capsys, "retry", task.id)
    assert (result.code, result.out) == (0, f"{task.id} queued (attempt 0/3)\n")
    assert reread(cq, task.id).status == "queued"


def test_retry_keeps_the_attempt_count_of_a_failed_task(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a")
    fail(cq, claim(cq, task))
    run_on(db, capsys, "retry", task.id)
    assert reread(cq, task.id).attempt == 1


def test_retry_with_reset_attempt_zeroes_the_attempt_count(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a")
    fail(cq, claim(cq, task))
    result = run_on(db, capsys, "retry", task.id, "--reset-attempt")
    assert result.out == f"{task.id} queued (attempt 0/3)\n"
    assert reread(cq, task.id).attempt == 0


def test_retry_by_key_retries_the_task_the_key_points_at(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    task = cq.submit("a", key="k")
    cq.cancel(task.id)
    assert run_on(db, capsys, "retry", "--key", "k").code == 0
    assert reread(cq, task.id).status == "queued"


def test_retry_takes_several_ids_and_keys_and_queues_each_again(
    db: Database, cq: SyncCairnQ
) -> None:
    first, keyed = cq.submit("a"), cq.submit("b", key="k")
    failed = cq.submit("c")
    cq.cancel(first.id)
    cq.cancel(keyed.id)
    fail(cq, claim(cq, failed))
    result = cairnq("retry", first.id, failed.id, "--key", "k", *db_args(db))
    assert result.code == 0, result.err
    assert result.lines == [
        f"{first.id} queued (attempt 0/3)",
        f"{failed.id} queued (attempt 1/3)",
        f"{keyed.id} queued (attempt 0/3)",
    ]


def test_retry_of_an_already_queued_task_exits_0_and_says_so(db: Database, cq: SyncCairnQ) -> None:
    task = cq.submit("a")
    result = cairnq("retry", task.id, *db_args(db))
    assert (result.code, result.out, result.err) == (0, f"{task.id} already queued\n", "")


def test_retry_of_a_running_task_is_an_error_for_that_task_after_retrying_the_rest(
    db: Database, cq: SyncCairnQ
) -> None:
    running, canceled = cq.submit("a"), cq.submit("b")
    claim(cq, running)
    cq.cancel(canceled.id)
    result = cairnq("retry", running.id, canceled.id, *db_args(db))
    assert result.code == 1
    assert one_error_line(result) == (
        f"cairnq: error: task {running.id} is running; only failed or canceled tasks can be retried"
    )
    assert result.lines == [f"{canceled.id} queued (attempt 0/3)"]


def test_retry_of_an_unknown_key_exits_1(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "retry", "--key", "nobody")
    assert result.code == 1
    assert one_error_line(result) == "cairnq: error: no task with key 'nobody'"


# --- purge -------------------------------------------------------------------------------


def finished_days_ago(db: Database, cq: SyncCairnQ, name: str, days: int, **options: Any) -> Task:
    task = cq.submit(name, **options)
    cq.cancel(task.id)
    ms = days * 86_400_000
    sql(
        db,
        f"update cairnq_tasks set completed_at_ms = completed_at_ms - {ms} where id = '{task.id}'",
    )
    return task


def test_purge_deletes_finished_tasks_older_than_the_duration_in_batches(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [finished_days_ago(db, cq, "old", 8) for _ in range(5)]
    recent = finished_days_ago(db, cq, "recent", 1)
    queued = cq.submit("queued")
    result = run_on(db, capsys, "purge", "--older-than", "7d", "--batch", "2", "--yes")
    assert result.code == 0
    assert result.lines == [
        "5 tasks match (completed over 7d ago): 5 canceled",
        "purged 5 tasks",
    ]
    assert all(cq.get(t.id) is None for t in old)
    assert cq.get(recent.id) is not None and cq.get(queued.id) is not None


def test_purge_accepts_combined_durations(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_days_ago(db, cq, "old", 2)
    finished_days_ago(db, cq, "recent", 1)
    result = run_on(db, capsys, "purge", "--older-than", "1d12h", "--yes")
    assert result.lines[-1] == "purged 1 task"


@pytest.mark.parametrize(
    ("flags", "kept"),
    [
        (["--status", "failed"], {"canceled-default", "canceled-emails"}),
        (["--queue", "emails"], {"failed", "canceled-default"}),
        (["--name", "failed"], {"canceled-default", "canceled-emails"}),
    ],
)
def test_purge_only_deletes_tasks_matching_status_queue_and_name(
    flags: list[str],
    kept: set[str],
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
) -> None:
    finished_days_ago(db, cq, "canceled-default", 2)
    finished_days_ago(db, cq, "canceled-emails", 2, queue="emails")
    task = cq.submit("failed")
    fail(cq, claim(cq, task))
    sql(db, f"update cairnq_tasks set completed_at_ms = 0 where id = '{task.id}'")
    result = run_on(db, capsys, "purge", "--older-than", "1d", *flags, "--yes")
    assert result.lines[-1] == "purged 1 task"
    assert {t.name for t in cq.list()} == kept


def test_purge_without_a_terminal_or_yes_deletes_nothing_and_says_to_pass_yes(
    db: Database, cq: SyncCairnQ
) -> None:
    task = cq.submit("a")
    cq.cancel(task.id)
    result = cairnq("purge", "--older-than", "0s", *db_args(db))
    assert result.code == 1
    assert "pass --yes" in one_error_line(result)
    assert cq.get(task.id) is not None


def test_purge_dry_run_prints_the_count_by_status_with_the_filters_and_deletes_nothing(
    db: Database, cq: SyncCairnQ
) -> None:
    for days in (3, 3, 1):
        finished_days_ago(db, cq, "report", days, queue="emails")
    failed = cq.submit("report", queue="emails")
    fail(cq, claim(cq, failed))
    sql(db, f"update cairnq_tasks set completed_at_ms = 0 where id = '{failed.id}'")
    finished_days_ago(db, cq, "other", 3)
    result = cairnq(
        "purge",
        "--older-than",
        "2d",
        "--queue",
        "emails",
        "--name",
        "report",
        "--dry-run",
        *db_args(db),
    )
    assert result.code == 0, result.err
    assert result.lines == [
        "3 tasks match (completed over 2d ago, queue emails, name report): 2 canceled, 1 failed",
        "dry run: nothing deleted",
    ]
    assert len(cq.list()) == 5


def test_purge_of_nothing_matching_says_so_without_asking(db: Database, cq: SyncCairnQ) -> None:
    finished_days_ago(db, cq, "recent", 1)
    result = cairnq("purge", "--older-than", "7d", *db_args(db))
    assert (result.code, result.lines) == (
        0,
        ["no task matches (completed over 7d ago); nothing to purge"],
    )


def test_purge_on_a_terminal_asks_with_the_count_and_deletes_on_yes(
    db: Database, cq: SyncCairnQ
) -> None:
    for _ in range(2):
        finished_days_ago(db, cq, "old", 8)
    result = cairnq_on_a_terminal("y\n", "purge", "--older-than", "7d", *db_args(db))
    assert result.code == 0, result.err
    assert result.err == "Delete 2 tasks? [y/N] "
    assert result.lines[-1] == "purged 2 tasks"
    assert cq.list() == []


@pytest.mark.parametrize(
    "answer", ["\n", "n\n", "whatever\n", "\x04"], ids=["enter", "n", "other", "ctrl-d"]
)
def test_purge_on_a_terminal_deletes_nothing_unless_the_answer_is_yes(
    answer: str, db: Database, cq: SyncCairnQ
) -> None:
    finished_days_ago(db, cq, "old", 8)
    result = cairnq_on_a_terminal(answer, "purge", "--older-than", "7d", *db_args(db))
    assert result.code == 1
    assert result.lines[-1] == "nothing deleted"
    assert len(cq.list()) == 1


def test_purge_deletes_only_what_it_counted_when_tasks_finish_during_the_prompt(
    db: Database,
    cq: SyncCairnQ,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = finished_days_ago(db, cq, "old", 1)
    finished_during_prompt: list[Task] = []

    def confirm_after_another_task_finishes(count: int) -> bool:
        time.sleep(0.01)  # the task below finishes after the count, on any clock
        late = cq.cancel(cq.submit("late").id)
        assert late is not None
        finished_during_prompt.append(late)
        time.sleep(0.01)
        return True

    monkeypatch.setattr(_tasks, "_confirmed", confirm_after_another_task_finishes)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    result = run_on(db, capsys, "purge", "--older-than", "0s")
    assert result.code == 0, result.err
    assert result.lines[-1] == "purged 1 task"
    assert [t.id for t in cq.list()] == [finished_during_prompt[0].id]
    assert cq.get(counted.id) is None


@silent_refusal
def test_purge_with_an_invalid_duration_is_a_one_line_usage_error(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run_on(db, capsys, "purge", "--older-than", "1week")
    assert sent == []
    assert result.code == 2
    assert "invalid duration '1week'" in one_error_line(result)


def test_purge_requires_older_than(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "purge")
    assert result.code == 2
    assert "--older-than" in one_error_line(result)


def test_purge_refuses_a_status_that_is_not_finished(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "purge", "--older-than", "1d", "--status", "running")
    assert result.code == 2
    one_error_line(result)


# --- dashboard ---------------------------------------------------------------------------


def test_dashboard_on_a_port_in_use_is_one_line_and_exit_1_before_printing_its_url(
    sqlite_db: Database,
) -> None:
    pytest.importorskip("uvicorn")
    sqlite_db.sync_client().open().close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cairnq("dashboard", "--port", str(port), "--db", sqlite_db.url)
    assert (result.code, result.out) == (1, "")
    assert one_error_line(result) == (
        f"cairnq: error: port {port} on 127.0.0.1 is in use; pass --port"
    )


def test_dashboard_without_uvicorn_says_which_extra_as_the_other_missing_extras_do(
    tmp_path: Path,
) -> None:
    (tmp_path / "uvicorn.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'uvicorn'\", name='uvicorn')\n"
    )
    env = script_env() | {"PYTHONPATH": str(tmp_path)}
    result = installed_cairnq("dashboard", "--db", str(tmp_path / "x.db"), env=env)
    expected = missing_extra("the cairnq dashboard", "dashboard", "starlette, jinja2, uvicorn")
    assert result.code == 1
    assert one_error_line(result) == f"cairnq: error: {expected}"


# --- stats -------------------------------------------------------------------------------


def test_stats_prints_counts_per_queue_and_status(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit("a")
    cq.cancel(cq.submit("b").id)
    cq.submit("c", queue="emails")
    result = run_on(db, capsys, "stats")
    assert [line.split() for line in result.lines] == [
        ["QUEUE", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED", "TOTAL"],
        ["default", "1", "0", "0", "0", "1", "2"],
        ["emails", "1", "0", "0", "0", "0", "1"],
    ]


def test_stats_json_prints_counts_by_queue_then_status(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit("a", queue="emails")
    assert json.loads(run_on(db, capsys, "stats", "--json").out) == {
        "emails": {"queued": 1, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}
    }


def test_stats_queue_shows_only_that_queue(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    cq.submit("a")
    cq.submit("b", queue="emails")
    result = run_on(db, capsys, "stats", "--queue", "emails")
    assert [line.split()[0] for line in result.lines] == ["QUEUE", "emails"]


def test_stats_of_an_empty_database_says_no_tasks(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_on(db, capsys, "stats").out == "no tasks\n"


# --- worker ------------------------------------------------------------------------------


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty directory to write a worker module in, as the current directory.

    ``sys.path`` and ``sys.modules`` are restored afterwards.
    """
    app = tmp_path / "app"
    app.mkdir()
    monkeypatch.chdir(app)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield app
    for name in set(sys.modules) - before:
        del sys.modules[name]


def worker_module(db: Database, module: str) -> str:
    """Source of a module defining ``worker`` on ``db`` (queue ``default``) with ``echo``."""
    if db.kind == "sqlite":
        make = f"Worker.sqlite({str(db.path)!r})"
    else:
        make = f"Worker.postgres({db.url!r}, schema={db.schema!r}, listen=False)"
    return textwrap.dedent(
        f"""
        from cairnq import Worker

        worker = {make}
        not_a_worker = "{module}"

        @worker.task
        def echo(ctx, payload):
            return {{"echo": payload, "worker": ctx.worker_id}}
        """
    )


def test_worker_serves_module_attr_with_queues_and_concurrency_overridden(
    db: Database, cq: SyncCairnQ, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_jobs_a.py").write_text(worker_module(db, "cli_jobs_a"))
    codes: list[int] = []
    out = io.StringIO()
    argv = ["worker", "cli_jobs_a:worker", "--queues", "urgent, other", "--concurrency", "3"]
    thread = threading.Thread(target=lambda: codes.append(main(argv, out=out)), daemon=True)
    thread.start()
    task = cq.submit("echo", {"n": 1}, queue="other")
    done = cq.wait(task.id, timeout_ms=60_000)
    worker = sys.modules["cli_jobs_a"].worker
    worker.stop()
    thread.join(60)
    assert done.status == "succeeded"
    assert done.result == {"echo": {"n": 1}, "worker": worker.worker_id}
    assert (worker.queues, worker.concurrency) == (["urgent", "other"], 3)
    assert codes == [0]
    assert out.getvalue().splitlines()[0] == (
        f"cairnq worker {worker.worker_id}: queues urgent,other, concurrency 3; Ctrl-C to stop"
    )


def test_worker_until_idle_exits_once_the_queue_is_empty(
    db: Database, cq: SyncCairnQ, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_jobs_idle.py").write_text(worker_module(db, "cli_jobs_idle"))
    tasks = [cq.submit("echo", {"n": n}) for n in range(3)]
    out = io.StringIO()
    code = main(["worker", "cli_jobs_idle:worker", "--until-idle"], out=out)
    done = [cq.get(task.id) for task in tasks]
    assert code == 0
    assert [t.status for t in done if t is not None] == ["succeeded"] * 3
    assert out.getvalue().splitlines()[-1].endswith(": stopped")


def test_worker_run_in_process_gives_the_program_its_own_signal_handlers_back(
    db: Database, cq: SyncCairnQ, app_dir: Path
) -> None:
    (app_dir / "cli_jobs_signals.py").write_text(worker_module(db, "cli_jobs_signals"))

    def own(signum: int, frame: Any) -> None:
        raise AssertionError(f"signal {signum} reached the program's own handler")

    previous = {sig: signal.signal(sig, own) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = main(["worker", "cli_jobs_signals:worker", "--until-idle"], out=io.StringIO())
        after = {sig: signal.getsignal(sig) for sig in previous}
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert code == 0
    assert after == {signal.SIGINT: own, signal.SIGTERM: own}


def test_worker_attribute_defaults_to_worker(
    db: Database, cq: SyncCairnQ, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_jobs_b.py").write_text(worker_module(db, "cli_jobs_b"))
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(main(["worker", "cli_jobs_b"], out=io.StringIO())),
        daemon=True,
    )
    thread.start()
    task = cq.submit("echo")
    assert cq.wait(task.id, timeout_ms=60_000).status == "succeeded"
    sys.modules["cli_jobs_b"].worker.stop()
    thread.join(60)
    assert codes == [0]


def test_worker_of_a_module_that_does_not_exist_is_an_error(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run(capsys, "worker", "cli_no_such_module:worker")
    assert result.code == 1
    assert "no module named 'cli_no_such_module'" in one_error_line(result)


def test_worker_of_a_module_that_fails_to_import_is_one_line(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_broken.py").write_text("import cli_missing_dependency\n")
    result = run(capsys, "worker", "cli_broken:worker")
    assert result.code == 1
    assert "importing 'cli_broken' failed" in one_error_line(result)
    assert "cli_missing_dependency" in result.err


@silent_refusal
def test_worker_attribute_that_is_missing_is_an_error(
    db: Database, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_jobs_c.py").write_text(worker_module(db, "cli_jobs_c"))
    with sent_anywhere(db) as sent:
        result = run(capsys, "worker", "cli_jobs_c:nothing")
    assert sent == []
    assert result.code == 1
    assert "module 'cli_jobs_c' has no attribute 'nothing'" in one_error_line(result)


@silent_refusal
def test_worker_attribute_that_is_not_a_worker_is_an_error(
    db: Database, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cli_jobs_d.py").write_text(worker_module(db, "cli_jobs_d"))
    with sent_anywhere(db) as sent:
        result = run(capsys, "worker", "cli_jobs_d:not_a_worker")
    assert sent == []
    assert result.code == 1
    assert "cli_jobs_d:not_a_worker is a str, not a cairnq Worker" in one_error_line(result)


@pytest.mark.parametrize(("value", "kind"), [("object()", "an object"), ("3", "an int")])
def test_worker_attribute_that_is_not_a_worker_is_named_with_the_right_article(
    value: str, kind: str, tmp_path: Path
) -> None:
    (tmp_path / "not_a_worker_app.py").write_text(f"app = {value}\n")
    result = cairnq("worker", "not_a_worker_app:app", cwd=tmp_path)
    assert result.code == 1
    assert one_error_line(result) == (
        f"cairnq: error: not_a_worker_app:app is {kind}, not a cairnq Worker"
    )


def test_worker_spec_that_is_not_module_attr_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "worker", "my app:worker")
    assert result.code == 1
    assert "use MODULE:ATTR" in one_error_line(result)


def test_worker_with_zero_concurrency_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "worker", "app:worker", "--concurrency", "0")
    assert result.code == 2
    one_error_line(result)


# --- the script's entry function, run in this process --------------------------------------


def test_a_command_run_in_this_process_gets_the_shell_s_conditions_and_puts_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRNQ_DATABASE_URL", str(tmp_path / "from_the_environment.db"))
    root = logging.getLogger()
    before = (os.getcwd(), sys.stdin, list(root.handlers), root.level, list(sys.path))
    result = cairnq("submit", "email.send", cwd=tmp_path)
    assert f"no cairnq database at {tmp_path / 'cairnq.db'}" in one_error_line(result)
    assert (os.getcwd(), sys.stdin, list(root.handlers), root.level, list(sys.path)) == before
    assert os.environ["CAIRNQ_DATABASE_URL"] == str(tmp_path / "from_the_environment.db")


def test_a_command_run_in_this_process_sees_no_terminal_and_no_logging_configured() -> None:
    with inprocess.like_the_script(None) as (_, err):
        seen = (sys.stdin.isatty(), list(logging.getLogger().handlers))
        logging.getLogger("cairnq.cli_test").warning("to stderr, as with no logging configured")
    assert seen == (False, [])
    assert err.getvalue() == "to stderr, as with no logging configured\n"


def test_a_command_that_leaves_a_thread_a_descriptor_or_a_signal_handler_fails_the_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess, "LEFT_OVER_WAIT_S", 0.1)
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="left_running", daemon=True)
    previous = signal.getsignal(signal.SIGTERM)
    left_open: list[Any] = []

    def leave_behind() -> None:
        with inprocess.like_the_script(tmp_path):
            left_open.append(open(tmp_path / "left_open.txt", "w"))  # noqa: SIM115
            thread.start()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    with pytest.raises(AssertionError) as caught:
        leave_behind()
    release.set()
    left_open[0].close()
    thread.join(60)
    message = str(caught.value)
    assert "a SIGTERM handler" in message
    assert "thread 'left_running'" in message
    assert str(tmp_path / "left_open.txt") in message
    assert signal.getsignal(signal.SIGTERM) is previous


# --- the installed script ----------------------------------------------------------------


@pytest.mark.slow
def test_installed_cairnq_script_serves_a_worker_and_exits_0_on_sigint(
    db: Database, cq: SyncCairnQ, tmp_path: Path
) -> None:
    script = Path(sys.executable).parent / "cairnq"
    (tmp_path / "cli_script_jobs.py").write_text(worker_module(db, "cli_script_jobs"))
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    proc = subprocess.Popen(
        [str(script), "worker", "cli_script_jobs:worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        task = cq.submit("echo", {"via": "script"})
        done = cq.wait(task.id, timeout_ms=60_000)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert done.result["echo"] == {"via": "script"}
    assert proc.returncode == 0, err
    assert out.splitlines()[-1].endswith(": stopped")
