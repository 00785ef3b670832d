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

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._protocol import Dialect, Statement
from .._steps import Op
from .._wakeups import WakeHub

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
