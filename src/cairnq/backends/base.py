"""The seam between the domain and a database.

A backend runs operations (``_ops`` generators) to completion: each ``Call``
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
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._wakeups import WakeHub
from ..errors import EventLoopMismatch
from ..protocol.statements import Dialect, Statement
from ..protocol.steps import Op

T = TypeVar("T")


@runtime_checkable
class Backend(Protocol):
    """What the clients and the worker need from a database."""

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


def bind(
    statement: Statement,
    params: dict[str, Any] | Any,
    adapt: Callable[[str, Any], Any],
) -> dict[str, Any]:
    """Check that ``params`` names exactly the statement's parameters, and adapt each value."""
    if params.keys() != statement.params:
        missing = sorted(statement.params - params.keys())
        extra = sorted(params.keys() - statement.params)
        raise TypeError(
            f"statement {statement.name!r} ({statement.dialect}) was called with the wrong "
            f"parameters: missing {missing}, unexpected {extra}"
        )
    return {name: adapt(name, value) for name, value in params.items()}
