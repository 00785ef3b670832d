"""The vocabulary operations speak to backends in, and the two runners that drive them.

An operation is a generator: it yields ``Call`` (run a canonical statement and
send back its rows), ``Script`` (run a migration file) or ``Emit`` (a wake-up to
publish once the transaction commits), and returns its result. The domain is
written once this way; a backend only needs an ``execute`` for each step.
Opening a database is a generator of such operations too (``Setup``, one
``SetupStep`` each), driven by ``run_setup`` or ``arun_setup``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .._events import Emit as Emit

T = TypeVar("T")
P = ParamSpec("P")

Row = Mapping[str, Any]
Rows = Sequence[Row]


class _Now:
    """Placeholder for ``now_ms``: the backend fills in its clock when the step runs."""

    def __repr__(self) -> str:
        return "NOW"


NOW: Any = _Now()


@dataclass(frozen=True)
class Call:
    """Run the canonical statement ``statement`` with exactly ``params``.

    ``discard``: the operation does not read the statement's rows, so a backend
    may send the statement without waiting for its answer (and send ``[]`` back).
    A failure then surfaces at a later step or at the commit, and the whole
    transaction rolls back as it would have.
    """

    statement: str
    params: Mapping[str, Any]
    discard: bool = False


@dataclass(frozen=True)
class Script:
    """Run every statement of a migration file."""

    name: str
    source: str


Step = Call | Script | Emit

Op = Generator[Step, Any, T]


class _Marked(Generator[Step, Any, T]):
    """An operation that runs as the generator it wraps, with metadata a backend reads."""

    __slots__ = ("_op",)

    def __init__(self, op: Op[T]) -> None:
        self._op = op

    @property
    def __name__(self) -> str:
        return str(getattr(self._op, "__name__", ""))

    @property
    def gi_frame(self) -> Any:
        """The wrapped generator's frame, as a generator's own ``gi_frame``."""
        return getattr(self._op, "gi_frame", None)

    def send(self, value: Any, /) -> Step:
        return self._op.send(value)

    def throw(self, *args: Any) -> Step:
        return self._op.throw(*args)

    def close(self) -> None:
        self._op.close()


class SingleStatement(_Marked[T]):
    """An operation that writes with exactly one statement and reads nothing after.

    It runs as the generator it wraps; ``single_statement`` is the metadata a
    backend reads: such an operation needs no transaction of its own
    (PostgreSQL autocommits it) and no savepoint inside a group (a failed
    statement rolls back by itself).
    """

    __slots__ = ()
    single_statement = True


class Pipelined(_Marked[T]):
    """An operation whose ``discard`` steps are worth sending without waiting.

    A backend that can queue statements on the connection (PostgreSQL's
    pipeline mode) sends the transaction's begin, every ``discard`` step and
    the commit along with the next step whose rows are read, so the operation
    waits for the server once per read instead of once per statement.
    """

    __slots__ = ()
    pipelined = True


def single_statement(function: Callable[P, Op[T]]) -> Callable[P, Op[T]]:
    """Declare that ``function`` builds a ``SingleStatement`` operation."""

    @functools.wraps(function)
    def build(*args: P.args, **kwargs: P.kwargs) -> Op[T]:
        return SingleStatement(function(*args, **kwargs))

    return build


def pipelined(function: Callable[P, Op[T]]) -> Callable[P, Op[T]]:
    """Declare that ``function`` builds a ``Pipelined`` operation."""

    @functools.wraps(function)
    def build(*args: P.args, **kwargs: P.kwargs) -> Op[T]:
        return Pipelined(function(*args, **kwargs))

    return build


def is_pipelined(op: Op[Any]) -> bool:
    """Whether ``op`` asked for its ``discard`` steps to be pipelined (see ``Pipelined``)."""
    return getattr(op, "pipelined", False) is True


def is_single_statement(op: Op[Any]) -> bool:
    """Whether ``op`` declared itself one statement (see ``SingleStatement``)."""
    return getattr(op, "single_statement", False) is True


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


@dataclass(frozen=True)
class SetupStep:
    """One operation of opening a database; ``write`` runs it in its own write transaction.

    For a migration, ``migration`` is its file name and the op returns whether it applied it.
    """

    op: Op[Any]
    write: bool
    migration: str | None = None


Setup = Generator[SetupStep, Any, None]
"""What opening a database does, step by step; each step's result is sent back in."""


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
