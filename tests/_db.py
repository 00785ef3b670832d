"""Test databases: open backends, clients and workers on one fresh database."""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ, Worker
from cairnq.backends import Backend, SQLiteBackend


def admin_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def statement_work(db: Database, name: str, params: dict[str, Any]) -> tuple[int, int]:
    """(work, rows) of one run of protocol statement ``name``, outside cairnq.

    Work is what the database did, repeatable run to run: SQLite VM steps (a
    progress handler called on every step), or PostgreSQL shared buffers touched
    (``EXPLAIN (ANALYZE, BUFFERS)``, after ``ANALYZE``).
    """
    from cairnq.protocol.statements import statements

    statement = statements("sqlite" if db.kind == "sqlite" else "postgres")[name]
    if db.kind == "sqlite":
        assert db.path is not None
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0

        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.set_progress_handler(count, 1)
            rows = conn.execute(statement.text, params).fetchall()
        return steps, len(rows)
    from psycopg import sql

    with admin_connect(db.url) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        conn.execute("analyze cairnq_tasks")
        [[plan]] = conn.execute(
            "explain (analyze, buffers, format json) " + statement.text, params
        ).fetchone()
    top = plan["Plan"]
    return int(top["Shared Hit Blocks"] + top["Shared Read Blocks"]), int(top["Actual Rows"])


def migrated_sqlite_template(path: Path) -> Path:
    """A migrated SQLite file at ``path``, its WAL folded in so one file holds it all."""
    backend = SQLiteBackend(path)
    backend.open()
    backend.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("pragma wal_checkpoint(truncate)")
    return path


def copy_sqlite_template(template: Path, path: Path) -> Path:
    """A fresh migrated database at ``path``: a copy of ``template`` (a few ms, not a migration)."""
    shutil.copyfile(template, path)
    return path


# How long a test's teardown waits for the server processes of its closed connections to
# end before it takes a session still there for one the test left open.
SESSIONS_GONE_S = 1.0

_CATALOG_DIGEST = """
select md5(coalesce(string_agg(item, E'\\n' order by item), ''))
from (select replace(item, %(ns)s::text, '~') as item from (
    select 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '')
        || ' ' || c.relrowsecurity::text as item
    from pg_class c where c.relnamespace = %(ns)s::text::regnamespace
    union all
    select 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
        || ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    from pg_attribute a
    join pg_class c on c.oid = a.attrelid and c.relnamespace = %(ns)s::text::regnamespace
    left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where a.attnum > 0 and not a.attisdropped
    union all
    select 'con ' || conname || ' ' || pg_get_constraintdef(oid)
    from pg_constraint where connamespace = %(ns)s::text::regnamespace
    union all
    select 'idx ' || indexdef from pg_indexes where schemaname = %(ns)s::text
    union all
    select 'trg ' || t.tgname || ' ' || t.tgenabled::text || ' ' || pg_get_triggerdef(t.oid)
    from pg_trigger t join pg_class c on c.oid = t.tgrelid
    where c.relnamespace = %(ns)s::text::regnamespace and not t.tgisinternal
    union all
    select 'fn ' || proname || ' ' || md5(prosrc) || ' ' || coalesce(proacl::text, '')
    from pg_proc where pronamespace = %(ns)s::text::regnamespace
    union all
    select 'pol ' || polname || ' ' || polrelid::regclass::text from pg_policy p
    join pg_class c on c.oid = p.polrelid and c.relnamespace = %(ns)s::text::regnamespace
    union all
    select 'ns ' || coalesce(nspacl::text, '') from pg_namespace where nspname = %(ns)s::text
) named) items
"""

_TABLES_CHILDREN_FIRST = """
with recursive tables as (
    select c.oid, c.relname from pg_class c
    where c.relnamespace = %(ns)s::text::regnamespace and c.relkind in ('r', 'p')
), depth(oid, d) as (
    select oid, 0 from tables
    union all
    select con.conrelid, depth.d + 1 from pg_constraint con
    join depth on con.confrelid = depth.oid
    where con.contype = 'f' and con.conrelid <> con.confrelid and depth.d < 50
)
select t.relname, max(depth.d) from tables t join depth on depth.oid = t.oid
group by t.relname order by max(depth.d) desc, t.relname
"""


class SchemaPool:
    """One migrated PostgreSQL schema for a test process, emptied between tests.

    Migrating a fresh schema for each test costs more than a hundred milliseconds;
    emptying one costs a few. The rows migrating leaves (the ledger, the meta
    rows) are kept in a side schema and put back, sequences are restarted, so a
    test sees what a fresh schema would show. Each test gets the schema under a
    new name (a rename is a catalog update), so what a process keys by schema
    name (wake-up hubs, advisory locks) never carries from one test to the next.
    A test that changed the schema's definition (a dropped table, a changed
    grant: the catalog digest tells), or left a connection open to the database
    (it could hold a lock or a session setting into the next test), gets the
    schema thrown away; the next test migrates a new one. The sessions connected
    before that new schema existed are left out of the count from then on: they
    knew only the schema thrown away.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._schema: str | None = None
        self._seed = ""
        self._digest = ""
        self._tables: list[str] = []  # children first
        self._seeded: list[str] = []  # parents first
        self._sequences: list[str] = []
        self._conn: Any = None
        # Sessions connected when the current test began (left by earlier tests).
        self._earlier: set[int] = set()

    def _admin(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = admin_connect(self.dsn)
            self._conn.execute("set lock_timeout = '5s'")
        return self._conn

    def checkout(self) -> str:
        """The schema, empty and migrated, under a name no test had before."""
        from psycopg import sql

        if self._schema is not None and self._sessions(self._admin()) - self._earlier:
            # A session connected since the last test ended could know the schema.
            self._discard(self._schema, self._seed)
            self._schema = None
        if self._schema is None:
            self._schema = self._build()
            self._earlier = self._sessions(self._admin())
            return self._schema
        renamed = f"t_{secrets.token_hex(5)}"
        self._admin().execute(
            sql.SQL("alter schema {} rename to {}").format(
                sql.Identifier(self._schema), sql.Identifier(renamed)
            )
        )
        self._schema = renamed
        return renamed

    def checkin(self) -> None:
        """After a test: empty the schema for the next one, or drop it if it cannot be trusted."""
        schema = self._schema
        if schema is None:
            return
        try:
            conn = self._admin()
            digest = conn.execute(_CATALOG_DIGEST, {"ns": schema}).fetchone()[0]
            if digest == self._digest and self._others_gone(conn):
                conn.execute(self._reset(schema))
                return
        except Exception:
            self._drop_conn()
        self._schema = None
        self._discard(schema, self._seed)

    def _sessions(self, conn: Any) -> set[int]:
        """The other client sessions connected to the database now, by server pid."""
        rows = conn.execute(
            "select pid from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid()"
            " and backend_type = 'client backend'"
        ).fetchall()
        return {pid for (pid,) in rows}

    def _others_gone(self, conn: Any) -> bool:
        """Whether every session the test opened is gone, waiting up to
        ``SESSIONS_GONE_S`` for those of its closed connections (a server process goes
        on for a moment after its client closed the connection). Sessions already
        there when the test began are left out: an earlier test left them, and the
        schema they knew was thrown away, so they cannot reach this one."""
        deadline = time.monotonic() + SESSIONS_GONE_S
        while self._sessions(conn) - self._earlier:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def close(self) -> None:
        if self._schema is not None:
            self._discard(self._schema, self._seed)
            self._schema = None
        self._drop_conn()

    def _reset(self, schema: str) -> str:
        from psycopg import sql

        ns, seed = sql.Identifier(schema), sql.Identifier(self._seed)
        steps: list[sql.Composable] = [
            sql.SQL("delete from {}.{}").format(ns, sql.Identifier(t)) for t in self._tables
        ]
        steps += [
            sql.SQL("insert into {}.{} select * from {}.{}").format(
                ns, sql.Identifier(t), seed, sql.Identifier(t)
            )
            for t in self._seeded
        ]
        steps += [
            sql.SQL("alter sequence {}.{} restart").format(ns, sql.Identifier(q))
            for q in self._sequences
        ]
        return sql.SQL("; ").join(steps).as_string(self._admin())

    def _build(self) -> str:
        from psycopg import sql

        from cairnq.backends.postgres import PostgresBackend

        schema = f"t_{secrets.token_hex(5)}"
        backend = PostgresBackend(self.dsn, schema=schema, listen=False)
        backend.open()
        backend.close()
        conn = self._admin()
        self._seed = f"{schema}_seed"
        ns, seed_ns = sql.Identifier(schema), sql.Identifier(self._seed)
        conn.execute(sql.SQL("create schema {}").format(seed_ns))
        self._tables = [name for name, _ in conn.execute(_TABLES_CHILDREN_FIRST, {"ns": schema})]
        self._seeded = []
        for table in reversed(self._tables):
            t = sql.Identifier(table)
            [[rows]] = conn.execute(sql.SQL("select count(*) from {}.{}").format(ns, t))
            if rows:
                conn.execute(
                    sql.SQL("create table {}.{} as select * from {}.{}").format(seed_ns, t, ns, t)
                )
                self._seeded.append(table)
        self._sequences = [
            name
            for (name,) in conn.execute(
                "select sequencename from pg_sequences where schemaname = %s", (schema,)
            )
        ]
        self._digest = conn.execute(_CATALOG_DIGEST, {"ns": schema}).fetchone()[0]
        return schema

    def _discard(self, *schemas: str) -> None:
        """Drop ``schemas``; one a leaked connection still locks is left to the database's drop."""
        from psycopg import sql

        for name in schemas:
            try:
                self._admin().execute(
                    sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(name))
                )
            except Exception:
                self._drop_conn()

    def _drop_conn(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def drop_schema(dsn: str, schema: str) -> None:
    from psycopg import sql

    with admin_connect(dsn) as conn:
        conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


@dataclass
class Database:
    """One fresh database for a test: every backend it makes points at the same data."""

    kind: str
    url: str
    path: Path | None = None
    schema: str | None = None
    _sync_backends: list[Backend] = field(default_factory=list)

    @classmethod
    def sqlite(cls, path: Path) -> Database:
        return cls("sqlite", f"sqlite:///{path}", path=path)

    @classmethod
    def postgres(cls, dsn: str, schema: str) -> Database:
        return cls("postgres", dsn, schema=schema)

    def backend(self, **options: Any) -> Backend:
        """A new backend on this database; closed at teardown when used synchronously."""
        if self.kind == "sqlite":
            assert self.path is not None
            backend: Backend = SQLiteBackend(self.path, **options)
        else:
            from cairnq.backends.postgres import PostgresBackend

            options.setdefault("listen", False)
            backend = PostgresBackend(self.url, schema=self.schema, **options)
        self._sync_backends.append(backend)
        return backend

    def client(self, **options: Any) -> CairnQ:
        """An async client owning its backend (close it, or use ``async with``)."""
        client_keys = {
            "max_payload_bytes",
            "max_json_depth",
            "max_queue_depth",
            "max_queue_wait_ms",
            "extensions",
            "codec",
        }
        client_kw = {k: options.pop(k) for k in list(options) if k in client_keys}
        client = CairnQ(self.backend(**options), **client_kw)
        client._owns_backend = True
        return client

    def sync_client(self, **options: Any) -> SyncCairnQ:
        client_keys = {
            "max_payload_bytes",
            "max_json_depth",
            "max_queue_depth",
            "max_queue_wait_ms",
            "extensions",
            "codec",
        }
        client_kw = {k: options.pop(k) for k in list(options) if k in client_keys}
        client = SyncCairnQ(self.backend(**options), **client_kw)
        client._owns_backend = True
        return client

    def worker(
        self, *, clock: Any = None, listen: bool = False, migrate: bool = True, **options: Any
    ) -> Worker:
        """A worker with its own backend (closed when the worker is closed)."""
        backend_kw: dict[str, Any] = {"clock": clock, "migrate": migrate}
        if self.kind == "postgres":
            backend_kw["listen"] = listen
        client = CairnQ(self.backend(**backend_kw))
        client._owns_backend = True
        worker = Worker(client, **options)
        worker._owns_client = True
        return worker

    def wipe(self) -> None:
        """Remove what migrating made, as if nothing had migrated yet.

        For tests that build a partial schema themselves; call before opening a
        backend. A pooled PostgreSQL schema notices the change and is rebuilt.
        """
        if self.kind == "sqlite":
            assert self.path is not None
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            return
        from psycopg import sql

        schema = sql.Identifier(self.schema or "")
        with admin_connect(self.url) as conn:
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(schema))
            conn.execute(sql.SQL("create schema {}").format(schema))

    def spec(self) -> str:
        """This database as JSON, for a child process (see ``tests/_child.py``)."""
        return json.dumps({"kind": self.kind, "url": self.url, "schema": self.schema})

    def close_all(self) -> None:
        for backend in self._sync_backends:
            with contextlib.suppress(Exception):
                backend.close()

    async def aclose_all(self) -> None:
        """Close every backend from the running loop, the async connections it opened included."""
        for backend in self._sync_backends:
            with contextlib.suppress(Exception):
                await backend.aclose()


@dataclass
class PluginDatabase:
    """A fresh database from cairnq's pytest plugin (``cairnq_sqlite`` / ``cairnq_postgres``)."""

    kind: str
    location: str

    def client(self, **options: Any) -> CairnQ:
        """An async client owning its backend (close it, or use ``async with``)."""
        if self.kind == "sqlite":
            return CairnQ.sqlite(self.location, **options)
        options.setdefault("listen", False)
        return CairnQ.postgres(self.location, **options)
