"""What the command line and the dashboard read about a PostgreSQL database.

``PostgresBackend`` takes these from ``PostgresDescription``: its label and
description, and ``inspect``, which reads the migration ledger on a connection
of its own without creating, locking or migrating anything.
"""

from __future__ import annotations

from typing import Any

from ..errors import DatabaseError, DatabaseUnavailable, InvalidArgument, UnsupportedBackend
from ..protocol.statements import statements
from .base import Inspection

CONNECT_TIMEOUT_S = 10


def one_line(exc: BaseException) -> str:
    """A driver's multi-line message as one line."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def tool_options(tool: str) -> dict[str, Any]:
    """A short-lived tool's pool: small, no LISTEN, named ``cairnq-<tool>``."""
    return {
        "listen": False,
        "min_size": 1,
        "max_size": 4 if tool == "dashboard" else 2,
        "application_name": f"cairnq-{tool}",
    }


def _conninfo_place(dsn: str) -> str:
    """``host:port/dbname`` of a libpq ``key=value`` string."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(a malformed DSN)"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"{parts.get('host') or 'localhost'}{port}/{parts.get('dbname') or ''}"


class PostgresDescription:
    """Label, description and ``inspect`` for a backend with ``_dsn`` and ``schema``."""

    _dsn: str | None
    schema: str | None

    @property
    def label(self) -> str:
        """``PostgreSQL`` and the schema, if one was given."""
        return "PostgreSQL" + (f" · {self.schema}" if self.schema else "")

    @property
    def description(self) -> str:
        """Host, port, database and schema; never the user or password."""
        if self._dsn is None:
            where = "PostgreSQL (the application's pool or connection)"
        elif "://" in self._dsn:
            from urllib.parse import urlsplit

            parts = urlsplit(self._dsn)
            host = parts.hostname or "localhost"
            port = f":{parts.port}" if parts.port else ""
            where = f"PostgreSQL {host}{port}{parts.path or '/'}"
        else:
            where = "PostgreSQL " + _conninfo_place(self._dsn)
        return f"{where} (schema {self.schema})" if self.schema else where

    def inspect(self) -> Inspection:
        """Read the ledger and the objects present on a new autocommit connection.

        Raises:
            InvalidArgument: a malformed DSN.
            UnsupportedBackend: the backend was given a pool or connection, not a DSN.
            DatabaseUnavailable: the server cannot be reached.
            DatabaseError: reading failed.
        """
        import psycopg
        from psycopg import sql
        from psycopg.conninfo import conninfo_to_dict

        if self._dsn is None:
            raise UnsupportedBackend("inspecting a PostgreSQL database needs its DSN")
        options: dict[str, Any] = {"autocommit": True}
        try:
            if "connect_timeout" not in conninfo_to_dict(self._dsn):
                options["connect_timeout"] = CONNECT_TIMEOUT_S
        except psycopg.ProgrammingError as exc:
            raise InvalidArgument(f"malformed PostgreSQL URL: {one_line(exc)}") from exc
        try:
            conn = psycopg.connect(self._dsn, **options)
        except psycopg.Error as exc:
            raise DatabaseUnavailable(
                f"cannot connect to {self.description}: {one_line(exc)}"
            ) from exc

        def read(name: str) -> list[Any]:
            statement = statements("postgres")[name]
            return conn.execute(statement.text).fetchall()

        try:
            with conn:
                if self.schema is not None:
                    conn.execute(
                        sql.SQL("set search_path to {}").format(sql.Identifier(self.schema))
                    )
                installations = read("installations")
                current = installations[0][0] if installations else None
                others = tuple(sorted({str(s) for _, s in installations if s and s != current}))
                present = read("ledger_exists")
                if not present or not present[0][0]:
                    return Inspection(exists=True, other_schemas=others)
                rows = read("ledger_applied")
                objects = read("schema_objects")
        except psycopg.Error as exc:
            raise DatabaseError(f"reading {self.description} failed: {one_line(exc)}") from exc
        return Inspection(
            exists=True,
            applied={str(name): int(at) for name, at in rows},
            other_schemas=others,
            objects=frozenset((str(kind), str(name)) for kind, name in objects),
        )
