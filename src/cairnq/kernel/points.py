"""The points where the kernel's operations let a feature in, named by what happens there.

The operations in ``kernel`` take a ``Points`` (``points=``); they never import the
feature behind a hook. Each hook comes with its ``in_use`` gate, a function read
when an operation is built (an attribute read, never a statement): a hook whose
gate says no is left out, and an operation left with none keeps its plain form (one
statement where it has one), so a feature installed but not in use costs nothing. A
task-end hook may also be gated on the tasks an operation ends (``TaskEndFor``, given
their ids where the operation knows them before it runs: a settlement's, a cancel's),
so it costs nothing for the tasks it has nothing to do for.

A worker compiles its extensions' hooks into one ``Points`` per run
(``cairnq.extensions``); ``NO_POINTS`` has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..models import Lease
from ..protocol.steps import Op, Row
from ._shared import Draw

TaskEnd = Callable[[Sequence[Row]], Op[object]]
"""Work inside the transaction that just ended tasks, given the rows it ended
(each with at least ``id`` and ``status``; a requeued task's row is among them)."""

InUse = Callable[[], bool]
"""Whether a hook has something to do now; read per operation."""

TaskEndFor = Callable[[Sequence[str]], bool]
"""Whether a task-end hook in use may have something to do for the tasks of these ids
(those an operation is about to end, known before it runs); read per operation, never a
statement. The hook then runs on every row the operation ended."""


def always() -> bool:
    """The gate of a hook that is in use whenever it is compiled."""
    return True


ClaimFilter = Callable[[Sequence[str], Sequence[Draw]], tuple[list[str], list[Draw]]]
"""Before a claim (and its probe): the queues and draws left to claim from."""


@dataclass(frozen=True)
class ThenWrite:
    """A ``Claimed`` hook's answer from its read when it must write: ``op`` runs in a
    write transaction of its own, and the rows it returns are those the worker runs."""

    op: Op[list[Row]]


Claimed = Callable[[Sequence[Row]], "Op[list[Row] | ThenWrite]"]
"""Right after a claim, in a read transaction of its own: given the claimed rows, the
rows the worker runs (a row it leaves out it settled itself, unrun), or a
``ThenWrite`` whose op decides in a write transaction. Should either fail, the worker
hands every claimed row back unrun (its attempt not counted)."""

BeforeRecover = Callable[[int], Op[object]]
"""Inside the transaction that recovers expired leases, before it does (given the
recovery's limit); its value reaches the matching ``AttemptEndHook``."""


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """One attempt a settlement ended, as its ``AttemptEndHook`` sees it.

    Attributes:
        lease: The attempt (task id, attempt number, lease token).
        worker_id: Who held it.
        started_at_ms: When it was claimed, when the settling worker knows.
        outcome: ``succeeded``, ``failed``, ``canceled``, ``retry`` (queued again),
            ``released`` (handed back unrun) or ``snoozed``.
        error: The encoded error envelope of a failure, else ``None``.
    """

    lease: Lease
    worker_id: str | None
    started_at_ms: int | None
    outcome: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Recovered:
    """What a recovery ended: the rows it moved out of ``running`` and what the
    hook's ``BeforeRecover`` returned inside the same transaction."""

    before: object
    rows: Sequence[Row]


AttemptEndHook = Callable[[Sequence[AttemptEnd], "Recovered | None"], Op[object]]
"""Inside the transaction that ended attempts: a settlement's (``Recovered`` is
``None``) or a recovery's (no ``AttemptEnd``; the moved rows in ``Recovered``)."""


class DrawClaimer(Protocol):
    """Claims the draws some rule of a feature governs, inside the claim's transaction.

    ``kernel.claim`` asks ``governing`` for each draw; a draw nothing governs is
    claimed as without a claimer.
    """

    def governing(self, queues: Sequence[str], names: Sequence[str] | None, /) -> Sequence[Any]:
        """The rules that govern a draw of ``names`` (``None``: any) in ``queues``; empty: none."""
        ...

    def claim(
        self,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
        governing: Sequence[Any],
        /,
    ) -> Op[list[Row]]:
        """Claim up to ``want`` due tasks of the draw that ``governing`` lets through.

        Returns the claimed rows (``worker_id`` holding the claim's nonce), in claim order. A row
        the claimer claimed only for the worker to fail carries ``refusal``: the
        error envelope (``errors.error_envelope``) it fails the task with.
        """
        ...

    def begin(self) -> None:
        """A claim is about to run: forget what the last one saw."""
        ...

    def held_back(self) -> tuple[bool, int | None]:
        """After a claim: whether it passed over due tasks its rules hold back, and in
        how many ms the first of them may be admitted (``None``: not known)."""
        ...


@dataclass(frozen=True, slots=True)
class Settling:
    """An attempt-end hook whose write the settling statement itself can make.

    ``statements`` maps a kernel settling statement (``complete``, ``complete_many``,
    ``fail``) to the extension's variant of it: the same settlement, fenced the same
    way, returning the same rows, that also writes what ``hook`` would for each
    attempt it settles (on PostgreSQL, a data-modifying CTE). A variant takes the
    kernel statement's parameters and when the attempt was claimed: ``started_at_ms``,
    or ``started`` (one per lease) for ``complete_many``. The kernel runs the variant
    in place of its statement and of the hook, so a settlement with nothing else to
    run stays one statement.
    """

    hook: AttemptEndHook
    statements: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Ending:
    """The end hooks in use for one operation (true when it has any), and the hook
    among them whose write a settling statement's variant can make (``settling``)."""

    attempt: tuple[AttemptEndHook, ...] = ()
    task: tuple[TaskEnd, ...] = ()
    settling: Settling | None = None

    def __bool__(self) -> bool:
        return bool(self.attempt or self.task)

    def settled_by(self, statement: str) -> tuple[str, Ending, bool]:
        """The statement that settles in place of the kernel's ``statement``, the hooks
        left to run after it, and whether it is a ``Settling`` variant (it then takes
        when the attempt was claimed)."""
        settling = self.settling
        variant = None if settling is None else settling.statements.get(statement)
        if settling is None or variant is None:
            return statement, self, False
        rest = tuple(hook for hook in self.attempt if hook is not settling.hook)
        return variant, Ending(rest, self.task), True


NOTHING = Ending()


@dataclass(frozen=True, slots=True)
class Points:
    """Every hook of a set of extensions, each with its ``in_use`` gate, by point."""

    claim_filters: tuple[tuple[ClaimFilter, InUse], ...] = ()
    draw_claimers: tuple[tuple[DrawClaimer, InUse], ...] = ()
    # Each attempt hook with the ``BeforeRecover`` of the same extension, if any.
    attempt_end: tuple[tuple[AttemptEndHook, BeforeRecover | None, InUse], ...] = ()
    # Each task hook with its gate and, if it has one, what it has to do for the ids.
    task_end: tuple[tuple[TaskEnd, InUse, TaskEndFor | None], ...] = ()
    # Attempt hooks whose write a settling statement's variant can make (the first
    # of them in use is made so).
    settling: tuple[Settling, ...] = ()
    claimed: tuple[tuple[Claimed, InUse], ...] = ()

    def ending(self, ids: Sequence[str] | None = None) -> Ending:
        """The end hooks in use now; ``NOTHING`` (falsy) on a feature-free hot path.

        ``ids``: the tasks the operation is about to end, where it knows them before it
        runs; a task hook with a ``TaskEndFor`` is then left out unless it says it may
        have something to do for one of them (``None``: not known, no hook left out).
        """
        if not self.attempt_end and not self.task_end:
            return NOTHING
        attempt = tuple(hook for hook, _, in_use in self.attempt_end if in_use())
        task = tuple(
            hook
            for hook, in_use, for_ids in self.task_end
            if in_use() and (ids is None or for_ids is None or for_ids(ids))
        )
        if not attempt and not task:
            return NOTHING
        settling = next((s for s in self.settling if s.hook in attempt), None)
        return Ending(attempt, task, settling)

    def recovering(self) -> tuple[tuple[AttemptEndHook, BeforeRecover | None], ...]:
        """The attempt hooks in use now, each with its ``BeforeRecover``."""
        return tuple((hook, before) for hook, before, in_use in self.attempt_end if in_use())

    def claimed_hooks(self) -> tuple[Claimed, ...]:
        """The hooks in use now that see a claim's rows before the worker runs them."""
        if not self.claimed:
            return ()
        return tuple(hook for hook, in_use in self.claimed if in_use())

    def claimers(self) -> tuple[DrawClaimer, ...]:
        """The draw claimers in use now."""
        if not self.draw_claimers:
            return ()
        return tuple(claimer for claimer, in_use in self.draw_claimers if in_use())

    def filter_claim(
        self, queues: Sequence[str], draws: Sequence[Draw]
    ) -> tuple[list[str], list[Draw]]:
        """``queues`` and ``draws`` as the claim filters in use leave them."""
        kept_queues, kept = list(queues), list(draws)
        for claim_filter, in_use in self.claim_filters:
            if in_use():
                kept_queues, kept = claim_filter(kept_queues, kept)
        return kept_queues, kept

    def task_end_hook(self) -> TaskEnd | None:
        """The task-end hooks in use now as one ``TaskEnd`` (``None``: none), for an
        operation that takes a single one (``Backend.complete_in``)."""
        hooks = self.ending().task
        if not hooks:
            return None
        if len(hooks) == 1:
            return hooks[0]

        def each(rows: Sequence[Row]) -> Op[object]:
            for hook in hooks:
                yield from hook(rows)
            return None

        return each


NO_POINTS = Points()


def ending_with(task_end: TaskEnd | None) -> Points:
    """Points with one task-end hook, always in use (``NO_POINTS`` for ``None``)."""
    return NO_POINTS if task_end is None else Points(task_end=((task_end, always, None),))


def claiming_with(claimer: DrawClaimer | None) -> Points:
    """Points with one draw claimer, always in use (``NO_POINTS`` for ``None``)."""
    return NO_POINTS if claimer is None else Points(draw_claimers=((claimer, always),))


def settled_outcome(status: str) -> str:
    """The outcome of an attempt its settlement left in ``status``."""
    if status == "queued":
        return "retry"
    if status in ("succeeded", "failed", "canceled"):
        return status
    return "failed"


def run_ending(
    ending: Ending, rows: Sequence[Row], attempts: Sequence[AttemptEnd] = ()
) -> Op[None]:
    """Run ``ending``'s hooks in the current transaction: the attempt hooks on
    ``attempts`` (when there are any), then the task hooks on ``rows``."""
    if attempts:
        for attempt_hook in ending.attempt:
            yield from attempt_hook(attempts, None)
    for task_hook in ending.task:
        yield from task_hook(rows)
