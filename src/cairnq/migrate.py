"""Bringing a database to the current schema, and checking what it holds.

Opening a backend runs ``setup_steps``: the PostgreSQL installation check
(before anything is written), the ledger, each pending migration in its own
write transaction (recorded by file name), then the protocol version check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from . import _ops
from ._protocol import Dialect, migrations
from ._steps import Call, Op
from .errors import InvalidArgument


@dataclass(frozen=True)
class SetupStep:
    """One operation of opening a database; ``write`` runs it in its own write transaction.

    For a migration, ``migration`` is its file name and the op returns whether it applied it.
    """

    op: Op[Any]
    write: bool
    migration: str | None = None


def _ledger_create() -> Op[None]:
    yield Call("ledger_guard", {})
    yield Call("ledger_create", {})


def _unapplied(dialect: Dialect) -> Op[list[str]]:
    """Migrations the ledger lacks (all of them when there is no ledger yet)."""
    rows = yield Call("ledger_exists", {})
    if not rows or not rows[0]["present"]:
        return [m.name for m in migrations(dialect)]
    applied = yield from _ops.applied_migrations()
    return pending(dialect, applied)


Setup = Generator[SetupStep, Any, None]


def setup_steps(
    dialect: Dialect, *, migrate: bool, installation_check: Op[Any] | None = None
) -> Setup:
    """What opening a database does, in order; send each step's result back in.

    A database with nothing pending is only read, so opening it takes no write lock.
    """
    if installation_check is not None:
        yield SetupStep(installation_check, write=False)
    if migrate:
        missing = yield SetupStep(_unapplied(dialect), write=False)
        if missing:
            yield SetupStep(_ledger_create(), write=True)
            for migration in migrations(dialect):
                yield SetupStep(
                    _ops.apply_migration(migration.name, migration.source),
                    write=True,
                    migration=migration.name,
                )
    yield SetupStep(_ops.check_protocol_version(), write=False)


def run_setup(setup: Setup, run: Callable[[SetupStep], Any]) -> list[str]:
    """Drive ``setup`` with a blocking ``run``; returns the migrations it applied."""
    applied: list[str] = []
    result: Any = None
    while True:
        try:
            step = setup.send(result)
        except StopIteration:
            return applied
        result = run(step)
        if step.migration and result:
            applied.append(step.migration)


async def arun_setup(setup: Setup, run: Callable[[SetupStep], Awaitable[Any]]) -> list[str]:
    """Drive ``setup`` with an awaitable ``run``; returns the migrations it applied."""
    applied: list[str] = []
    result: Any = None
    while True:
        try:
            step = setup.send(result)
        except StopIteration:
            return applied
        result = await run(step)
        if step.migration and result:
            applied.append(step.migration)


EXTENSION_PREFIX = "x"


def is_extension(name: str) -> bool:
    """Whether a migration is one of cairnq's additive extensions (not the shared protocol)."""
    return name.startswith(EXTENSION_PREFIX)


def pending(dialect: Dialect, applied: set[str]) -> list[str]:
    """Migration file names of ``dialect`` the ledger does not record yet."""
    return [m.name for m in migrations(dialect) if m.name not in applied]


def migrate(target: Any, **options: Any) -> list[str]:
    """Apply pending migrations now and return the file names applied.

    For deployments that open with ``migrate=False`` and upgrade in a window of
    their choosing.

    Args:
        target: A ``Backend``, a database URL or a SQLite path.
        **options: Backend options when ``target`` is a URL (e.g. ``schema=``).

    Example::

        cairnq.migrate("postgresql://db/app", schema="jobs")
    """
    from .backends import Backend, open_backend

    if isinstance(target, Backend):
        backend = target
        if not getattr(backend, "migrate", True):
            raise InvalidArgument("this backend was opened with migrate=False; pass a URL")
        backend.open()
        return list(getattr(backend, "migrations_applied", []))
    backend = open_backend(target, **options)
    try:
        backend.open()
        return list(getattr(backend, "migrations_applied", []))
    finally:
        backend.close()
