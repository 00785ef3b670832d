"""The vocabulary operations speak to backends in, and the two runners that drive them.

An operation is a generator: it yields ``Call`` (run a canonical statement and
send back its rows), ``Script`` (run a migration file) or ``Emit`` (a wake-up to
publish once the transaction commits), and returns its result. The domain is
written once this way; a backend only needs an ``execute`` for each step.
Opening a database is a generator of such operations too (``Setup``, one
``SetupStep`` each), driven by ``run_setup`` or ``arun_setup``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

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

    ``apart``: a run of ``apart`` calls that ends with one whose rows are read (the
    others ``discard``) is a whole transaction by itself: where such a run begins
    what is left of a ``Pipelined`` operation, a backend may run it as a transaction
    of its own, committed after its last statement, each statement with a snapshot
    taken as it starts, and the steps after it in another (see ``read_ahead``).
    """

    statement: str
    params: Mapping[str, Any]
    discard: bool = False
    apart: bool = False


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


@dataclass
class Ahead(Generic[T]):
    """The first steps of an operation, read before any of them runs (``read_ahead``).

    ``apart``: the calls that may run as one transaction by themselves (``Call.apart``),
    the last one's rows to send to ``rest``; empty when the operation does not begin so.
    ``emits``: the wake-ups sent among them.
    """

    apart: list[Call]
    emits: list[Emit]
    _op: Op[T]
    _sent: list[Step]
    ended: bool = False
    value: Any = None

    def whole(self) -> Op[T]:
        """The operation from its first step, for a backend that runs it in one transaction
        (the steps already read are sent again; their replies go nowhere but the last's)."""
        return _continued(self._sent, self._op)

    def rest(self, rows: Rows) -> Op[T]:
        """Send ``rows`` (the apart calls' answer) to the operation; returns it from its
        next step on. When it returned instead, ``ended`` is set and ``value`` holds what
        it returned."""
        try:
            step = self._op.send(rows)
        except StopIteration as stop:
            self.ended, self.value = True, stop.value
            return _replayed([], stop.value)
        return _continued([step], self._op)


def read_ahead(op: Op[T]) -> Ahead[T]:
    """Read ``op``'s first steps, without running any, while they are ``apart`` calls
    that ``discard`` their rows (each answered ``[]``) or ``Emit``s (noted), up to the
    first other step: the head to run apart when that step is an ``apart`` call whose
    rows are read. Any other step ends the reading unanswered, so an operation that
    does not begin apart builds nothing ahead of what is sent (a streamed batch)."""
    sent: list[Step] = []
    reply: Any = None
    while True:
        try:
            step = op.send(reply)
        except StopIteration as stop:
            return Ahead([], [], _replayed(sent, stop.value), [])
        sent.append(step)
        if isinstance(step, Emit):
            reply = None
        elif isinstance(step, Call) and step.apart and step.discard:
            reply = []
        else:
            break
    if not (isinstance(step, Call) and step.apart):
        return Ahead([], [], op, sent)
    calls = [s for s in sent if isinstance(s, Call)]
    return Ahead(calls, [s for s in sent if isinstance(s, Emit)], op, [])


def together(op: Op[T]) -> Op[T]:
    """``op`` with its ``apart`` marks taken off: every statement runs in the transaction
    of the operation it is part of. For a part that steps follow whose failure must
    undo it (a claim's draw before another)."""
    return _relayed(op, None, _unmarked)


def _unmarked(step: Step) -> Step:
    if isinstance(step, Call) and step.apart:
        return dataclasses.replace(step, apart=False)
    return step


def _continued(sent: list[Step], op: Op[T]) -> Op[T]:
    """``op`` resumed where it waits for the reply to the last of ``sent``, the steps it
    has already sent (all sent again); ``op`` itself when none were."""
    if not sent:
        return (yield from op)
    for step in sent[:-1]:  # noqa: UP028 (the driver sends replies, which a list cannot take)
        yield step
    reply = yield sent[-1]
    return (yield from _relayed(op, reply, None))


def _relayed(op: Op[T], reply: Any, change: Callable[[Step], Step] | None) -> Op[T]:
    """``op`` driven from ``reply`` on (``None``: from its start), each step it sends
    passed on (through ``change``, if given) and each reply passed back."""
    while True:
        try:
            step = op.send(reply)
        except StopIteration as stop:
            value: T = stop.value
            return value
        reply = yield step if change is None else change(step)


def _replayed(sent: list[Step], value: T) -> Op[T]:
    """Send ``sent`` again, then return ``value`` (an operation that had ended)."""
    for step in sent:  # noqa: UP028 (the driver sends replies, which a list cannot take)
        yield step
    return value


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
