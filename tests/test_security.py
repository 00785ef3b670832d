"""Security checks: private files, SQL never built from input, fixed channels, no payloads in logs.

- SQLite files (the database, its -wal and -shm) are private to the owner by
  default (``file_mode``, tested in test_sqlite_backend.py, widens that).
- No module builds SQL text by formatting: every ``execute`` runs protocol
  statement text, a literal, or a ``psycopg.sql`` composition of quoted
  identifiers in a short allow-list of places.
- NOTIFY channels are the fixed ``cairnq_queued`` / ``cairnq_done``; a queue name
  only ever travels as the payload.
- ``repr()`` / ``str()`` of tasks, contexts and errors, and the worker's logs,
  never carry payload or result contents.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import logging
import os
import re
import sqlite3
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cairnq
from cairnq import (
    CairnQ,
    InvalidArgument,
    SerializationError,
    SyncCairnQ,
    TaskContext,
    TaskError,
    TaskFailed,
    TaskTimeout,
    Worker,
)
from cairnq._json import JsonCodec
from cairnq.backends import SQLiteBackend

from ._db import Database
from .test_hostile import overwrite_payload, stored_error, wait_for_status

SRC = Path(cairnq.__file__).resolve().parent
SECRET = "s3cr3t-7f1d9c"  # stands for anything a payload or result may carry
WAIT = {"timeout_ms": 30_000, "poll_ms": 20, "max_poll_ms": 50}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


# --- SQLite files and directories ------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_the_database_and_its_wal_and_shm_files_are_private_while_in_use(
    tmp_path: Path, mask: int
) -> None:
    path = tmp_path / "q.db"
    with umask(mask):
        backend = SQLiteBackend(path)
        try:
            with SyncCairnQ(backend) as cq:
                task = cq.submit("job", {"token": SECRET})
                assert cq.get(task.id) is not None  # a reader connection too
                files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
                assert all(f.exists() for f in files)
                assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        finally:
            backend.close()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith("q.db")]
    assert {p.name: mode(p) for p in leftovers} == {p.name: 0o600 for p in leftovers}


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("busy_timeout_ms", "5000; attach database '/tmp/x' as x"),
        ("busy_timeout_ms", 5.5),
        ("synchronous", "off; drop table cairnq_tasks"),
        ("synchronous", "OFF"),
    ],
)
def test_the_two_values_formatted_into_pragmas_are_validated_first(
    tmp_path: Path, option: str, value: Any
) -> None:
    with pytest.raises(InvalidArgument, match=option):
        SQLiteBackend(tmp_path / "q.db", **{option: value})
    assert not (tmp_path / "q.db").exists()


# --- SQL text is never built from values ------------------------------------------------------

# A string that reads as SQL: starts like a statement, or holds a clause.
SQL_START = re.compile(
    r"^\s*(select|insert|update|delete|create|drop|alter|truncate|pragma|listen|notify|"
    r"unlisten|set|with|begin|commit|rollback|savepoint|release|grant|revoke|vacuum|analyze|"
    r"reindex|lock|copy|do|attach|detach|explain|prepare|execute|declare|discard|reset|show|"
    r"comment|cluster|refresh|merge|call)\b",
    re.IGNORECASE,
)
SQL_CLAUSE = re.compile(
    r"\b(select\s.*\bfrom|insert\s+into|update\s+\S+\s+set|delete\s+from|"
    r"(create|drop|alter)\s+(table|schema|index|trigger|function)|where\s+\w+\s*(=|in\b))",
    re.IGNORECASE | re.DOTALL,
)

# The only formatted strings that are SQL: two SQLite pragmas whose values cannot be
# bound. busy_timeout_ms is checked as an int, synchronous against a fixed set
# (test_the_two_values_formatted_into_pragmas_are_validated_first).
FORMATTED_SQL_ALLOWED = Counter(
    {
        ("backends/sqlite.py", "pragma busy_timeout = {}"): 1,
        ("backends/sqlite.py", "pragma synchronous = {}"): 1,
        # asyncpg composes no identifiers: the schema name passed check_schema first.
        ("backends/_asyncpg_executor.py", 'create schema if not exists "{}"'): 1,
        # Not SQL: the question `cairnq purge` asks on a terminal, and messages of
        # the testing helpers that happen to start with a keyword.
        ("cli/_tasks.py", "Delete {}? [y/N] "): 1,
        ("testing/_helpers.py", " with payload {}"): 1,
        ("testing/_plugin.py", "set {} to a PostgreSQL server for cairnq_postgres"): 1,
    }
)

# Identifiers cannot be bound: these compose a quoted sql.Identifier (or, for the
# advisory-lock key, a sql.Literal) into fixed text. Schema names are validated
# first (see test_hostile.py); channels are constants.
COMPOSITIONS_ALLOWED = Counter(
    {
        ("backends/_pg_async.py", "set search_path to {}"): 1,
        ("backends/_pg_sync.py", "set search_path to {}"): 1,
        (
            "backends/_postgres_core.py",
            "begin; select pg_advisory_xact_lock(hashtextextended({}, 0)); "
            "create schema if not exists {}; commit",
        ): 1,
        ("backends/_postgres_core.py", "listen {}"): 2,
        ("backends/_postgres_core.py", "unlisten {}"): 2,
        ("backends/postgres.py", "drop schema if exists {} cascade"): 1,
        # The pytest plugin's fresh databases: names it makes, quoted as identifiers.
        ("backends/postgres.py", "create database {}"): 1,
        ("backends/postgres.py", " template {}"): 1,
        ("backends/postgres.py", "drop database if exists {} with (force)"): 1,
        ("backends/_postgres_inspect.py", "set search_path to {}"): 1,
    }
)

# execute() arguments that are neither literals nor compositions: statement text
# loaded from the protocol's .sql files (statements and migrations), or a method
# returning an allow-listed composition.
INDIRECT_ALLOWED = {
    ("backends/sqlite.py", "statement.text"),  # a protocol statement
    ("backends/sqlite.py", "sql"),  # one statement of a migration file (split_script)
    # run_on's BEGIN: GroupWriter.begin_write, a string constant in _sqlite_writer.py.
    ("backends/sqlite.py", "self.begin_write"),
    ("backends/pg_executor.py", "step.source"),  # a migration file, through a PgSession
    # PoolExecutor's execute(sql): the PgSession contract, passing its caller's text on.
    ("backends/_asyncpg_executor.py", "sql"),
    # The PostgreSQL paths: the async source and the sync half generated from it.
    *(
        (half, text)
        for half in ("backends/_pg_async.py", "backends/_pg_sync.py")
        for text in (
            "text",  # a protocol statement, encoded once (_params)
            "step.source.encode()",  # a migration file
            "self._create_schema_sql()",  # composition above
        )
    ),
    ("backends/_postgres_inspect.py", "statement.text"),  # a protocol statement by name
    ("backends/postgres.py", "statement"),  # create_database/drop_database's composition
}

EXECUTE_METHODS = {"execute", "executemany", "executescript"}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def formatted_text(node: ast.AST) -> str | None:
    """The fixed text of a string built by f-string, ``%``, ``+`` or ``.format``."""
    if isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.FormattedValue) for v in node.values
    ):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        sides = [s for s in (node.left, node.right) if isinstance(s, ast.Constant)]
        texts = [s.value for s in sides if isinstance(s.value, str)]
        if texts and not (len(sides) == 2 and isinstance(node.op, ast.Add)):
            return " ".join(texts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value
    return None


def is_psycopg_sql(node: ast.AST, name: str) -> bool:
    """``sql.<name>(...)`` (``from psycopg import sql``)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "sql"
    )


def composition(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """``sql.SQL("...").format(args)`` -> (template, args); None for anything else."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and is_psycopg_sql(node.func.value, "SQL")
    ):
        inner = node.func.value
        assert isinstance(inner, ast.Call)
        template = inner.args[0] if inner.args else None
        if isinstance(template, ast.Constant) and isinstance(template.value, str):
            return template.value, [*node.args, *(k.value for k in node.keywords)]
        return "<not a literal>", []
    return None


def constant_names(tree: ast.Module) -> set[str]:
    """Names and attributes only ever assigned string literals in this module."""
    values: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name is not None and value is not None:
                values.setdefault(name, []).append(value)
    return {
        name
        for name, assigned in values.items()
        if all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in assigned)
    }


def describe(node: ast.expr) -> str:
    """An execute() argument as the allow-list names it (call arguments elided)."""
    if isinstance(node, ast.Call):
        return f"{ast.unparse(node.func)}()" if node.args else ast.unparse(node)
    return ast.unparse(node)


def formatted_sql(tree: ast.AST) -> list[str]:
    """The fixed text of every string built by formatting under ``tree`` that reads as SQL."""
    found = []
    for node in ast.walk(tree):
        text = formatted_text(node)
        if text is not None and (SQL_START.match(text) or SQL_CLAUSE.search(text)):
            found.append(text)
    return found


def test_no_module_builds_sql_text_by_formatting_strings() -> None:
    found: Counter[tuple[str, str]] = Counter()
    for where, tree in modules():
        for text in formatted_sql(tree):
            found[(where, text)] += 1
    unexpected = found - FORMATTED_SQL_ALLOWED
    assert not unexpected, f"SQL built by string formatting: {sorted(unexpected)}"


def test_identifiers_are_composed_only_in_the_allow_listed_places() -> None:
    found: Counter[tuple[str, str]] = Counter()
    bad_arguments = []
    for where, tree in modules():
        for node in ast.walk(tree):
            if is_psycopg_sql(node, "SQL"):
                assert isinstance(node, ast.Call)
                template = node.args[0] if node.args else None
                if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
                    bad_arguments.append((where, node.lineno, "sql.SQL of a non-literal"))
            composed = composition(node)
            if composed is None:
                continue
            template, args = composed
            found[(where, template)] += 1
            for arg in args:
                if not (is_psycopg_sql(arg, "Identifier") or is_psycopg_sql(arg, "Literal")):
                    bad_arguments.append((where, node.lineno, ast.unparse(arg)))
    assert not bad_arguments, f"compositions of something other than quoted parts: {bad_arguments}"
    unexpected = found - COMPOSITIONS_ALLOWED
    assert not unexpected, f"identifier compositions not on the allow-list: {sorted(unexpected)}"
    assert found, "the scan found no compositions at all; is it still looking at the source?"


def test_every_execute_runs_a_literal_a_composition_or_protocol_statement_text() -> None:
    seen_kinds: Counter[str] = Counter()
    unexpected = []
    for where, tree in modules():
        constants = constant_names(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in EXECUTE_METHODS
                and node.args
            ):
                continue
            arg = node.args[0]
            name = arg.attr if isinstance(arg, ast.Attribute) else getattr(arg, "id", None)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                seen_kinds["literal"] += 1
            elif name is not None and name in constants:
                seen_kinds["constant"] += 1
            elif composition(arg) is not None:
                seen_kinds["composition"] += 1
            elif formatted_text(arg) in {text for w, text in FORMATTED_SQL_ALLOWED if w == where}:
                seen_kinds["allowed-format"] += 1
            elif (where, describe(arg)) in INDIRECT_ALLOWED:
                seen_kinds["protocol-text"] += 1
            else:
                unexpected.append((where, node.lineno, ast.unparse(arg)))
    assert not unexpected, f"execute() of text from an unknown source: {unexpected}"
    assert seen_kinds["literal"] and seen_kinds["protocol-text"] and seen_kinds["composition"]


def test_the_scan_catches_sql_built_by_formatting() -> None:
    """The scanners have teeth: each way of building SQL from a value is flagged."""
    samples = [
        'conn.execute(f"select * from cairnq_tasks where queue = {queue}")',
        "conn.execute(\"delete from cairnq_tasks where id = '%s'\" % task_id)",
        'conn.execute("update cairnq_tasks set status = {}".format(status))',
        'conn.execute("select * from t where name = \'" + name + "\'")',
        'conn.execute(sql.SQL(f"listen {channel}"))',
        'conn.execute(sql.SQL("set search_path to {}").format(sql.SQL(schema)))',
        "conn.execute(text_from_somewhere)",
    ]
    for sample in samples:
        tree = ast.parse(sample)
        call = tree.body[0].value  # type: ignore[attr-defined]
        arg = call.args[0]
        text = formatted_text(arg)
        composed = composition(arg)
        flagged = (
            bool(formatted_sql(arg))
            or (composed is not None and composed[0] == "<not a literal>")
            or (
                composed is not None
                and not all(is_psycopg_sql(a, "Identifier") for a in composed[1])
            )
            or (
                text is None
                and composed is None
                and ("x.py", describe(arg)) not in INDIRECT_ALLOWED
            )
        )
        assert flagged, sample


# --- NOTIFY channels --------------------------------------------------------------------------

HOSTILE_QUEUE = "x; listen evil"


async def notifications(conn: Any, count: int) -> list[tuple[str, str]]:
    out = []
    async for note in conn.notifies(timeout=10.0, stop_after=count):
        out.append((note.channel, note.payload))
    return out


@pytest.mark.postgres
async def test_notify_uses_the_fixed_channels_and_carries_the_raw_queue_name(
    pg_db: Database,
) -> None:
    import psycopg
    from psycopg import sql

    listener = await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True)
    try:
        for channel in ("cairnq_queued", "cairnq_done", "evil", HOSTILE_QUEUE):
            await listener.execute(sql.SQL("listen {}").format(sql.Identifier(channel)))
        async with pg_db.client() as cq:
            task = await cq.submit("job", {"token": SECRET}, queue=HOSTILE_QUEUE)
            await cq.cancel(task.id)
        got = await notifications(listener, 2)
        cur = await listener.execute("select pg_listening_channels() order by 1")
        channels = [r[0] for r in await cur.fetchall()]
    finally:
        await listener.close()
    assert got == [("cairnq_queued", HOSTILE_QUEUE), ("cairnq_done", task.id)]
    assert all(SECRET not in payload for _, payload in got)
    assert channels == sorted(["cairnq_queued", "cairnq_done", "evil", HOSTILE_QUEUE])


@pytest.mark.postgres
async def test_cairnq_listens_only_on_its_fixed_channels_whatever_the_queue_names(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    statements: list[str] = []  # statement text only: bound parameters are not recorded

    def spying(cls: Any) -> None:
        original = cls.execute

        async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            context = getattr(self, "connection", self)
            text = query.as_string(context) if hasattr(query, "as_string") else query
            statements.append(text.decode() if isinstance(text, bytes) else str(text))
            return await original(self, query, *args, **kwargs)

        monkeypatch.setattr(cls, "execute", execute)

    spying(psycopg.AsyncConnection)
    spying(psycopg.AsyncCursor)
    worker = pg_db.worker(queues=[HOSTILE_QUEUE, "evil"], listen=True, poll_interval_ms=20)
    worker.register("job", lambda ctx, payload: "ran")
    async with pg_db.client() as cq, worker.background():
        for _ in range(500):
            if worker.client.backend.listening:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.02)
        task = await cq.submit("job", queue=HOSTILE_QUEUE)
        done = await cq.wait(task.id, **WAIT)
    await worker.close()
    listens = {s for s in statements if s.lower().startswith("listen")}
    probes = {s for s in listens if re.fullmatch(r'listen "cairnq_probe_[0-9a-f]{12}"', s)}
    assert (done.status, done.result) == ("succeeded", "ran")
    assert probes
    assert listens - probes == {'listen "cairnq_done"', 'listen "cairnq_queued"'}
    assert any("cairnq_tasks" in s for s in statements)  # the claims were seen too
    assert not [s for s in statements if "evil" in s]  # the queue name was only ever bound


@pytest.mark.postgres
@pytest.mark.parametrize("size", [7_990, 8_001])
async def test_queue_names_near_the_notify_payload_limit_are_refused_by_validation(
    pg_db: Database, size: int
) -> None:
    # NOTIFY payloads must stay under 8000 bytes; names are capped at 1000 bytes
    # long before that, so neither length reaches the trigger.
    async with pg_db.client() as cq:
        with pytest.raises(InvalidArgument, match=f"queue is {size} bytes, over the limit of 1000"):
            await cq.submit("job", queue="q" * size)
        assert await cq.stats() == {}


@pytest.mark.postgres
@pytest.mark.parametrize(
    "queue",
    [pytest.param("q" * 1000, id="1000-ascii"), pytest.param("🚀" * 250, id="1000-bytes-emoji")],
)
async def test_a_queue_name_at_the_1000_byte_cap_submits_and_notifies_in_full(
    pg_db: Database, queue: str
) -> None:
    import psycopg

    listener = await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True)
    try:
        await listener.execute("listen cairnq_queued")
        async with pg_db.client() as cq:
            task = await cq.submit("job", queue=queue)
        got = await notifications(listener, 1)
    finally:
        await listener.close()
    assert task.queue == queue
    assert got == [("cairnq_queued", queue)]


@pytest.mark.postgres
def test_the_notify_trigger_refuses_a_row_another_writer_gives_an_8001_byte_queue(
    pg_db: Database,
) -> None:
    """Pinned: the protocol's trigger sends the queue name as the NOTIFY payload, so a
    row written without cairnq's 1000-byte cap fails once the name reaches 8000 bytes."""
    import psycopg
    from psycopg import sql

    with SyncCairnQ(pg_db.backend()) as cq:
        cq.stats()  # create the tables
    insert = (
        "insert into cairnq_tasks (id, name, queue, status, payload, run_at_ms, "
        "created_at_ms, updated_at_ms) values (%s, 'job', %s, 'queued', '{}', 0, 0, 0)"
    )
    with psycopg.connect(pg_db.url, autocommit=True) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(pg_db.schema or "")))
        conn.execute(insert, ("task_fits", "q" * 7_990))
        with pytest.raises(psycopg.Error, match="payload string too long"):
            conn.execute(insert, ("task_too_long", "q" * 8_001))
        rows = conn.execute("select id from cairnq_tasks order by id").fetchall()
    assert rows == [("task_fits",)]


# --- nothing leaks payloads or results ------------------------------------------------------


async def test_repr_and_str_of_tasks_contexts_and_errors_leave_out_payload_and_result(
    db: Database,
) -> None:
    shown: list[str] = []
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def ok(ctx: TaskContext, payload: Any) -> Any:
        shown.extend([repr(ctx), str(ctx)])
        return {"token": SECRET}

    @worker.task("sync.ok")
    def sync_ok(ctx: Any, payload: Any) -> Any:
        shown.extend([repr(ctx), str(ctx)])
        return [SECRET]

    @worker.task
    async def declined(ctx: TaskContext, payload: Any) -> Any:
        raise TaskError("card declined", code="declined", details={"card": SECRET})

    async with db.client() as cq, worker.background():
        payload = {"card": SECRET, "nested": [SECRET]}
        meta = {"m": SECRET}
        done = [
            await cq.wait((await cq.submit(n, payload, metadata=meta)).id, **WAIT)
            for n in ("ok", "sync.ok")
        ]
        with pytest.raises(TaskFailed) as failed:
            await cq.call("declined", payload, **WAIT)
        queued = await cq.submit("nobody-serves-this", payload, metadata=meta)
        with pytest.raises(TaskTimeout) as timed_out:
            await cq.wait(queued.id, timeout_ms=0)
    await worker.close()
    assert [t.status for t in done] == ["succeeded", "succeeded"]
    assert done[0].result == {"token": SECRET}  # it is there, just not shown
    shown += [repr(t) for t in done] + [str(t) for t in done] + [repr(queued)]
    shown += [repr(failed.value), str(failed.value)]
    shown += [repr(timed_out.value), str(timed_out.value)]
    assert len(shown) == 13
    leaks = [text for text in shown if SECRET in text]
    assert not leaks


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"token": SECRET, "x": float("nan")}, id="nan"),
        pytest.param({"token": SECRET, "x": object()}, id="object"),
        pytest.param({(SECRET,): 1}, id="tuple-key"),
        pytest.param({"token": SECRET + "\ud800"}, id="lone-surrogate"),
        pytest.param({"token": SECRET + "\x00"}, id="nul"),
        pytest.param({"token": SECRET, "big": 10**5000}, id="huge-int"),
        pytest.param({"token": SECRET * 10_000}, id="over-size"),
        pytest.param([{"token": SECRET}] * 2 + [[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]], id="too-deep"),
    ],
)
def test_serialization_errors_never_quote_the_value(payload: Any) -> None:
    with pytest.raises(SerializationError) as excinfo:
        JsonCodec(max_bytes=100_000, max_depth=8).encode(payload, what="payload")
    assert SECRET not in str(excinfo.value)
    assert SECRET not in repr(excinfo.value)


def secret_digits(count: int) -> str:
    digits = "".join(str(ord(c) % 10) for c in SECRET)
    return (digits * (count // len(digits) + 1))[:count]


async def test_an_unreadable_stored_payload_is_reported_without_its_contents(
    db: Database,
) -> None:
    # A number Python cannot read, written by another writer. Its digits are the secret.
    digits = secret_digits(5000)
    text = f'{{"pin":{digits}}}' if db.kind == "postgres" else f'{{"pin":{digits[:20]}e999}}'
    worker = db.worker(poll_interval_ms=20)
    worker.register("job", lambda ctx, payload: "ran")
    async with db.client() as cq:
        task = await cq.submit("job", {"pin": 0})
        overwrite_payload(db, task.id, text)
        with pytest.raises(SerializationError) as excinfo:
            await cq.get(task.id)
        async with worker.background():
            await wait_for_status(cq, task.id, "failed")
    await worker.close()
    envelope = stored_error(db, task.id)
    assert envelope["code"] == "invalid_payload"
    for shown in (str(excinfo.value), repr(excinfo.value), envelope["message"]):
        assert digits[:12] not in shown


async def test_the_worker_logs_no_payload_or_result_contents(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def ok(ctx: TaskContext, payload: Any) -> Any:
        await ctx.progress(0.5)
        return {"token": SECRET}

    @worker.task
    async def boom(ctx: TaskContext, payload: Any) -> Any:
        raise RuntimeError("it broke")

    @worker.task
    async def unserializable(ctx: TaskContext, payload: Any) -> Any:
        return {"token": SECRET, "x": float("nan")}

    caplog.set_level(logging.DEBUG)
    async with db.client() as cq, worker.background():
        ids = [
            (
                await cq.submit(name, {"token": SECRET}, metadata={"token": SECRET}, max_attempts=1)
            ).id
            for name in ("ok", "boom", "unserializable", "unregistered-elsewhere")
        ]
        outcomes = [(await cq.wait(i, **WAIT)).status for i in ids[:3]]
    await worker.close()
    assert outcomes == ["succeeded", "failed", "failed"]
    assert SECRET not in caplog.text
    for record in caplog.records:
        assert SECRET not in str(record.__dict__), record.getMessage()


def test_handlers_are_found_by_registered_name_only(tmp_path: Path) -> None:
    """A stored task name is only ever a lookup key: never imported, evaluated or unpickled."""
    path = tmp_path / "q.db"
    names = ["os.system", "__import__('os').system('touch pwned')", "builtins.eval", "pickle.loads"]
    with SyncCairnQ.sqlite(path) as cq:
        tasks = [cq.submit(name, {"cmd": "touch pwned"}) for name in names]
        last = cq.submit("job", {})
    worker = Worker.sqlite(path, poll_interval_ms=20)
    worker.register("job", lambda ctx: "ran")

    async def run() -> tuple[Any, list[str]]:
        async with CairnQ.sqlite(path) as cq, worker.background():
            done = await cq.wait(last.id, **WAIT)  # the worker has been claiming
            return done, [r.status for t in tasks if (r := await cq.get_status(t.id)) is not None]

    done, statuses = asyncio.run(run())
    asyncio.run(worker.close())
    assert (done.status, done.result) == ("succeeded", "ran")
    assert statuses == ["queued"] * len(names)  # never claimed: no handler has those names
    assert not (tmp_path / "pwned").exists()
    assert not Path("pwned").exists()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("select count(*) from cairnq_tasks").fetchone() == (len(names) + 1,)
    finally:
        conn.close()
