"""The migration ledger and the installation: which migrations are applied,
applying one, the protocol version, and the checks run on opening a database.
"""

from __future__ import annotations

from .._checks import SYSTEM_SCHEMA_REASON, system_schema
from ..errors import DatabaseError, InvalidArgument, ProtocolVersionMismatch, SchemaMismatch
from ..protocol.steps import NOW, Call, Op, Script

PROTOCOL_VERSION = 1


NAMED_LEASES_MIGRATION = "x0001_locks.sql"


def protocol_version() -> Op[int]:
    rows = yield Call("protocol_version", {})
    return int(rows[0]["value"]) if rows else 0


def named_leases_ready() -> Op[bool]:
    """Whether the database has the named leases (``cairnq_locks``, ``x0001_locks.sql``)."""
    applied = yield from applied_migrations()
    return NAMED_LEASES_MIGRATION in applied


def applied_migrations() -> Op[set[str]]:
    rows = yield Call("ledger_applied", {})
    return {str(r["name"]) for r in rows}


def apply_migration(name: str, source: str, *, again: bool = False) -> Op[bool]:
    """Apply one migration unless the ledger has it (``again``: even then, recording it
    once); run inside its own write transaction."""
    yield Call("ledger_lock", {})
    applied = yield from applied_migrations()
    if name in applied and not again:
        return False
    yield Script(name, source)
    if name not in applied:
        yield Call("ledger_record", {"name": name, "now_ms": NOW})
    return True


def check_protocol_version() -> Op[int]:
    version = yield from protocol_version()
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionMismatch(
            f"storage protocol_version={version}, cairnq supports {PROTOCOL_VERSION}"
        )
    return version


def check_installation(schema: str | None) -> Op[None]:
    """PostgreSQL: refuse to start a second, invisible installation (raises ``SchemaMismatch``).

    With ``schema`` given, the connection's current schema must be it. Without,
    tables found only in other schemas mean this connection would create a new
    installation nobody else sees, and a current schema of PostgreSQL's own
    (``search_path`` set so in the DSN) raises ``InvalidArgument``.
    """
    rows = yield Call("installations", {})
    current = rows[0]["current_schema"] if rows else None
    found = sorted({r["schema"] for r in rows if r["schema"] is not None})
    if schema is not None:
        if current is None:
            raise DatabaseError(
                f"schema {schema!r} does not exist yet; run migrations first "
                "(cairnq migrate, or open with migrate=True)"
            )
        if current != schema:
            raise SchemaMismatch(
                f"connection's current schema is {current!r}, not the configured {schema!r}; "
                "check search_path"
            )
        return
    if current is not None and system_schema(current):
        raise InvalidArgument(
            f"the connection's current schema is {current!r} (check search_path): "
            f"{SYSTEM_SCHEMA_REASON}"
        )
    if current is None or not found or current in found:
        return
    raise SchemaMismatch(
        f"cairnq tables exist in schema(s) {', '.join(found)} but not in the current schema "
        f"{current!r}; pass schema=... to use one of them"
    )
