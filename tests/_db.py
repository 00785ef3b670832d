"""Test databases: open backends, clients and workers on one fresh database."""

from __future__ import annotations

import contextlib
import json
import sqlite3
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
        }
        client_kw = {k: options.pop(k) for k in list(options) if k in client_keys}
        client = SyncCairnQ(self.backend(**options), **client_kw)
        client._owns_backend = True
        return client

    def worker(self, *, clock: Any = None, listen: bool = False, **options: Any) -> Worker:
        """A worker with its own backend (closed when the worker is closed)."""
        backend_kw: dict[str, Any] = {"clock": clock}
        if self.kind == "postgres":
            backend_kw["listen"] = listen
        client = CairnQ(self.backend(**backend_kw))
        client._owns_backend = True
        worker = Worker(client, **options)
        worker._owns_client = True
        return worker

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
