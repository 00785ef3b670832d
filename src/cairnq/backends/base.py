"""The seam between the domain and a database.

A backend runs operations (the kernel's generators) to completion: each ``Call``
as its dialect's canonical statement with the call's parameters, a write
operation inside one write transaction, a read outside any. It fills in
``now_ms`` from its clock (``None`` on PostgreSQL means the database clock),
adapts values (lists, booleans) to its driver, translates driver errors into
``cairnq.errors``, and publishes the operation's wake-ups to its process-wide
hub after commit. Everything protocol-shaped lives above this line.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._clock import Clock
from .._wakeups import WakeHub
from ..errors import EventLoopMismatch, SchemaIncomplete
from ..protocol.statements import Dialect, Statement
from ..protocol.steps import Op

T = TypeVar("T")
V = TypeVar("V")


@runtime_checkable
class Backend(Protocol):
    """What the clients, the worker, the command line and the dashboard need from a database.

    Capabilities only some databases have are the small protocols below; callers
    check them with ``isinstance`` and raise ``UnsupportedBackend`` when missing,
    or use the defaults ``clock_of``, ``label_of``, ``description_of`` and
    ``migration_settings`` state.
    """

    dialect: Dialect
    hub: WakeHub

    def open(self) -> None:
        """Connect and migrate (or verify); idempotent. Blocking."""

    async def aopen(self) -> None:
        """``open`` without blocking the event loop."""

    def run(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` to completion, blocking the calling thread."""

    async def arun(self, op: Op[T], *, write: bool) -> T:
        """Run ``op`` to completion without blocking the event loop."""

    def close(self) -> None:
        """Release connections and threads; later calls raise ``StoreClosed``."""

    async def aclose(self) -> None:
        """``close`` without blocking the event loop."""


@runtime_checkable
class Clocked(Protocol):
    """A backend that fills ``now_ms`` from a clock of its own (clients read task times from it)."""

    @property
    def clock(self) -> Clock | None:
        """Where ``now_ms`` comes from; ``None`` when the database keeps time."""


@runtime_checkable
class Described(Protocol):
    """A backend that names its database for the dashboard, banners and errors."""

    @property
    def label(self) -> str:
        """The database in a few words for the dashboard (``SQLite tasks.db``); no password."""

    @property
    def description(self) -> str:
        """The database in words for banners and errors (a path, a host); no password."""


@runtime_checkable
class Migrating(Protocol):
    """A backend whose ``open`` migrates by a setting (``cairnq.migrate`` reads it)."""

    @property
    def migrate(self) -> bool:
        """Whether ``open`` applies pending migrations (else it only verifies)."""

    @property
    def repair(self) -> bool:
        """Whether ``open`` applies damaged migrations again (see ``cairnq.migrate``)."""

    @property
    def migrations_applied(self) -> list[str]:
        """The migration files the last ``open`` applied, in order."""


@runtime_checkable
class LoopBound(Protocol):
    """A backend whose async calls belong to one event loop (an executor's pool)."""

    @property
    def home_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop its async calls must run on, while that loop runs; else ``None``."""


def clock_of(backend: Backend) -> Clock | None:
    """The backend's clock; ``None`` (the host's, or the database's) when it has none."""
    return backend.clock if isinstance(backend, Clocked) else None


def home_loop_of(backend: Backend) -> asyncio.AbstractEventLoop | None:
    """The running loop a loop-bound backend's async calls belong to; ``None`` for any loop."""
    return backend.home_loop if isinstance(backend, LoopBound) else None


def label_of(backend: Backend) -> str:
    """The backend's label, or its dialect's name when it gives none."""
    return backend.label if isinstance(backend, Described) else backend.dialect


def description_of(backend: Backend) -> str:
    """The backend's description, or ``a <dialect> database`` when it gives none."""
    return (
        backend.description if isinstance(backend, Described) else f"a {backend.dialect} database"
    )


def migration_settings(backend: Backend) -> tuple[bool, bool, list[str]]:
    """``(migrate, repair, migrations_applied)``; a backend without them migrates, never repairs."""
    if isinstance(backend, Migrating):
        return backend.migrate, backend.repair, list(backend.migrations_applied)
    return True, False, []


@runtime_checkable
class TransactionalRunner(Protocol):
    """Runs an operation on the application's own connection, inside its transaction.

    Used by the clients for ``submit(conn=...)`` and ``submit_many(conn=...)``:
    ``arun_on`` by ``CairnQ``, ``run_on`` by ``SyncCairnQ``.
    """

    async def arun_on(self, conn: Any, op: Op[T]) -> T:
        """Run ``op`` on the application's async connection; the application commits."""

    def run_on(self, conn: Any, op: Op[T]) -> T:
        """Run ``op`` on the application's connection; the application commits."""


@runtime_checkable
class ReservedRunner(Protocol):
    """Runs an operation on a connection kept apart from the pool.

    Used by the worker for heartbeats, so they go through when the pool is busy.
    """

    async def arun_reserved(self, op: Op[T], *, write: bool) -> T:
        """Like ``arun``, on the reserved connection."""


@runtime_checkable
class InTransactionCompleter(Protocol):
    """Runs the application's async write between two operations, in one transaction.

    Used by the worker context for ``ctx.succeed_in`` and by the store's ``complete_in``,
    which build the two operations (take the attempt's row, then settle it).
    """

    async def arun_around_write(
        self,
        before: Op[bool],
        write: Callable[[Any], Awaitable[V]],
        after: Callable[[V | None], Op[T]],
    ) -> T:
        """Run ``before``, then ``await write(conn)`` unless ``before`` returned true, then
        ``after(write's value, or None when skipped)``, in one transaction on a connection
        of the backend's own; everything rolls back when any of them raises.
        """


@runtime_checkable
class AroundRunner(Protocol):
    """Runs an application's write and an operation in one write transaction of its own.

    ``work(conn)`` runs on the transaction's connection, then the operation
    ``after(value)``; both commit together, or neither does. Used by the worker
    context for transactional steps (``ctx.step(..., transactional=True)``), where
    ``after`` records the step.
    """

    async def arun_around(self, work: Callable[[Any], Any], after: Callable[[Any], Op[T]]) -> T:
        """Run ``work(conn)``, then the operation ``after(its value)``, in one transaction."""


@runtime_checkable
class OneStatementClaims(Protocol):
    """A database that runs a lone claim statement on its own.

    A claim of one draw with nothing to recover is a single statement, which such a
    backend runs as one (``SingleStatement``, autocommitted); SQLite runs it in its
    write transaction as any other.
    """

    runs_lone_claims: bool


@runtime_checkable
class StreamedBatches(Protocol):
    """A database whose server runs a pipelined write's statements as they arrive.

    A batch built in parts while it is written (``kernel.submit_many_ids_streamed``) then
    costs about the server's time alone: the client builds each part while the server
    inserts the one before. Elsewhere (SQLite) a batch is built whole before its write
    transaction, which building it part by part would only hold open longer.
    """

    streams_batches: bool


@runtime_checkable
class FileBound(Protocol):
    """A database that is one file, which can be deleted or replaced underneath.

    Used by the worker before each claim, so it stops rather than writing to a lost file.
    """

    def check_file(self) -> None:
        """Raise ``DatabaseUnavailable`` when the path no longer names the opened file."""


@dataclass(frozen=True)
class Inspection:
    """What a database holds: ``applied`` maps migration file names to when they were applied.

    ``exists`` is false for a database file that is not there; ``other_schemas``
    lists schemas holding cairnq tables other than the backend's; ``objects``
    the cairnq_* tables, indexes, triggers and functions present, as ``(kind, name)``.
    """

    exists: bool
    applied: dict[str, int] = field(default_factory=dict)
    other_schemas: tuple[str, ...] = ()
    objects: frozenset[tuple[str, str]] = frozenset()


@runtime_checkable
class Inspector(Protocol):
    """Reads the migration ledger and the objects present without opening the backend.

    Used by the command line (``migrate --status``, ``--dry-run`` and the check that
    a database exists before any other command): nothing is created, locked or migrated.
    """

    def inspect(self) -> Inspection:
        """What the database holds now.

        Raises:
            DatabaseUnavailable: it cannot be reached.
            DatabaseError: it cannot be read, or is no cairnq database.
        """


def missing_table(table: str) -> SchemaIncomplete:
    """What a backend raises when a statement meets a missing cairnq table."""
    return SchemaIncomplete(
        f"cairnq table {table} is missing: create it with `cairnq migrate` (cairnq.migrate()), "
        "or, if the migration ledger records it, re-create it with `cairnq migrate --repair`",
        missing=(f"table {table}",),
    )


def event_loop_mismatch() -> EventLoopMismatch:
    """The error for a call from an event loop other than the one a client belongs to."""
    return EventLoopMismatch(
        "a CairnQ client, Worker or backend belongs to the event loop that first used "
        "it, and this call came from another event loop; create one per event loop "
        "(each thread running asyncio.run needs its own), or use SyncCairnQ from threads"
    )


class LoopBinding:
    """The one event loop a backend's async side belongs to: the first that used it.

    Connections, locks and tasks made on a loop wake only that loop's waiters, so
    a call from any other loop raises ``EventLoopMismatch`` at once rather than
    waiting forever. The same rule holds on every backend, so a program that
    runs on SQLite behaves alike on PostgreSQL.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        """Bind to the running loop on first use; raise ``EventLoopMismatch`` on any other."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        with self._lock:
            if self._loop is None:
                self._loop = loop
                return
        raise event_loop_mismatch()

    def check_close(self) -> bool:
        """Whether closing runs on the owning loop; ``False`` when that loop is closed.

        Raises:
            EventLoopMismatch: the owning loop is still open and this is another one.
        """
        owner = self._loop
        if owner is None or owner is asyncio.get_running_loop():
            return True
        if owner.is_closed():
            return False
        self.check()
        return True


# The value types every built-in backend's ``adapt`` returns as they are.
PLAIN_VALUES: frozenset[type] = frozenset((str, int, float, bool, bytes, type(None)))


def bind(
    statement: Statement,
    params: dict[str, Any] | Any,
    adapt: Callable[[str, Any], Any],
    *,
    unchanged: frozenset[type] = frozenset(),
) -> dict[str, Any]:
    """Check that ``params`` names exactly the statement's parameters, and adapt each value.

    A value whose type is in ``unchanged`` (types ``adapt`` returns as they are,
    ``PLAIN_VALUES`` for the built-in backends) is passed on without the call.
    """
    if params.keys() != statement.params:
        missing = sorted(statement.params - params.keys())
        extra = sorted(params.keys() - statement.params)
        raise TypeError(
            f"statement {statement.name!r} ({statement.dialect}) was called with the wrong "
            f"parameters: missing {missing}, unexpected {extra}"
        )
    if not unchanged:
        return {name: adapt(name, value) for name, value in params.items()}
    return {
        name: value if type(value) in unchanged else adapt(name, value)
        for name, value in params.items()
    }
