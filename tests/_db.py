"""Test databases: open backends, clients and workers on one fresh database."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ, Worker
from cairnq.backends import Backend, SQLiteBackend


def admin_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


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
