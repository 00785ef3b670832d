"""The vocabulary operations speak to backends in, and the two runners that drive them.

An operation is a generator: it yields ``Call`` (run a canonical statement and
send back its rows), ``Script`` (run a migration file) or ``Emit`` (a wake-up to
publish once the transaction commits), and returns its result. The domain is
written once this way; a backend only needs an ``execute`` for each step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Row = Mapping[str, Any]
Rows = Sequence[Row]


class _Now:
    """Placeholder for ``now_ms``: the backend fills in its clock when the step runs."""

    def __repr__(self) -> str:
        return "NOW"


NOW: Any = _Now()


@dataclass(frozen=True)
class Call:
    """Run the canonical statement ``statement`` with exactly ``params``."""

    statement: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Script:
    """Run every statement of a migration file."""

    name: str
    source: str


@dataclass(frozen=True)
class Emit:
    """After commit, tell this process's waiters: a task became ``queued`` or ``done``.

    ``value`` is the queue name for ``queued`` and the task id for ``done``.
    """

    channel: Literal["queued", "done"]
    value: str


Step = Call | Script | Emit

_SINGLE: set[Any] = set()


F = TypeVar("F", bound=Callable[..., Any])


def single_statement(function: F) -> F:
    """Mark an operation that writes with exactly one statement and reads nothing after.

    Such an operation needs no transaction of its own (PostgreSQL autocommits it)
    and no savepoint inside a group (a failed statement rolls back by itself).
    """
    _SINGLE.add(function.__code__)
    return function


def is_single_statement(op: Any) -> bool:
    return getattr(op, "gi_code", None) in _SINGLE


Op = Generator[Step, Any, T]


def drive(op: Op[T], execute: Callable[[Call | Script], Rows]) -> tuple[T, list[Emit]]:
    """Run ``op`` to completion with a blocking ``execute``; return its value and emits."""
    emits: list[Emit] = []
    reply: Any = None
    try:
        while True:
            step = op.send(reply)
            if isinstance(step, Emit):
                emits.append(step)
                reply = None
            else:
                reply = execute(step)
    except StopIteration as stop:
        return stop.value, emits


async def adrive(
    op: Op[T], execute: Callable[[Call | Script], Awaitable[Rows]]
) -> tuple[T, list[Emit]]:
    """Run ``op`` to completion with an awaitable ``execute``; return its value and emits."""
    emits: list[Emit] = []
    reply: Any = None
    try:
        while True:
            step = op.send(reply)
            if isinstance(step, Emit):
                emits.append(step)
                reply = None
            else:
                reply = await execute(step)
    except StopIteration as stop:
        return stop.value, emits
