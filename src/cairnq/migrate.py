"""Bringing a database to the current schema, and checking what it holds.

Opening a backend runs ``setup_steps``: the PostgreSQL installation check
(before anything is written), the ledger, each pending migration in its own
write transaction (recorded by file name), then the protocol version check.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import _ops
from ._protocol import Dialect, migrations
from ._steps import Call, Op


@dataclass(frozen=True)
class SetupStep:
    """One operation of opening a database; ``write`` runs it in its own write transaction."""

    op: Op[Any]
    write: bool


def _ledger_create() -> Op[None]:
    yield Call("ledger_create", {})


def setup_steps(
    dialect: Dialect, *, migrate: bool, installation_check: Op[Any] | None = None
) -> Iterator[SetupStep]:
    """What opening a database does, in order."""
    if installation_check is not None:
        yield SetupStep(installation_check, write=False)
    if migrate:
        yield SetupStep(_ledger_create(), write=False)
        for migration in migrations(dialect):
            yield SetupStep(_ops.apply_migration(migration.name, migration.source), write=True)
    yield SetupStep(_ops.check_protocol_version(), write=False)


def pending(dialect: Dialect, applied: set[str]) -> list[str]:
    """Migration file names of ``dialect`` the ledger does not record yet."""
    return [m.name for m in migrations(dialect) if m.name not in applied]
