"""The workflows' worker part: a sweep under the named lease ``cairnq.workflows``, and a
look for the tasks parked tasks wait on that keeps the gate current (``WorkflowsComponent``).

cairnq's own complete, fail and cancel decide a task's parked dependents in the
transaction that ends it. A reference SDK's worker sharing the database does
not, and neither does lease recovery; this sweep decides, about once a second,
every parked task whose dependencies have ended meanwhile, and records a success
for a task still waiting on others, so retention purging that dependency later
does not undo it. One process at a time sweeps (the lease); deciding twice is
harmless, as every decision is written only while the task is still parked.

Which of this worker's settlements decide dependents is the workflows' gate
(``gate``), read per settlement when the settlement is prepared (``Settler._flush``,
``kernel.complete`` build the operation), not when it runs, and never a statement:
``in_use`` says the workflow tables exist and some task may have a parked dependent,
``task_end_for`` whether one of the tasks a settlement ends may. A task may when it is

- a dependency of a task that was parked at the last look: every worker reads the
  tasks parked tasks wait on about once a second (``looks``, no lease; the
  ``workflows_waited_on`` statement, reading at most ``WAITED_ON_LIMIT`` edges of the
  parked tasks alone: with more, every settlement decides), or
- a task this worker's client made others wait for lately (``submit(depends_on=...)``,
  ``submit_graph``, ``ctx.gather``; ``_awaited``), noted before the transaction that
  parks them (a graph node whose key returned an existing task: once it committed).

A settlement decides in its own transaction when the look or the note came before the
settlement was prepared. A settlement of any other task runs no workflows statement.
Chains stay decided: a task's dependents stay parked until it ends, so once a look
saw them (or this client noted them) it is in the set when it settles, however long
ago a decision released it; the cancels and failures a decision cascades to are
decided within that decision (``_ops._decide_rounds``), whatever the set holds.

What the set misses is left to the sweep, which releases it within about a second
more (``tests/test_workflows_in_use.py`` shows the bound; a run ``until_idle`` sweeps
once more before it stops, ``WorkflowsComponent.before_idle``): a graph another client
submitted (in another process, or another ``CairnQ`` in this one) after this worker's
last look, whose dependency this worker settles before the next; a settlement
prepared before this client's note (a child's completion already built when its
parent gathers); a reused key's task settled between the commit and its note.
Skipping a decision is never wrong: the sweep decides it, and a purge of the
dependency meanwhile keeps its success (``x0016_workflows_keep_success.sql``'s
trigger records it). On a database without that migration a purge could forget the
success, so there every settlement decides, as a worker did before the gate. A
reference SDK's worker never decides: the sweep decides for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, cast

from ... import kernel
from ...backends import Backend
from ...kernel.periodic import ErrorHook
from ...kernel.points import InUse, TaskEndFor
from .._base import Jobs, Part, SweepTurns, sweep_and_look
from . import _ops
from ._awaited import Awaited

log = logging.getLogger("cairnq.worker")


class AwaitingClient(Protocol):
    """What the gate reads of the worker's client (a ``CairnQ``)."""

    @property
    def _awaited(self) -> Awaited | None:
        """The tasks the client made others wait for lately (``ctx.gather`` included)."""
        ...


class WorkflowsRun:
    """One worker run's workflows state: whether the database has the workflow tables
    and which tasks parked tasks wait on (the sweeper's look notes both), and the
    worker's client, whose settlements decide the dependents of what it made others
    wait for."""

    def __init__(self, worker_id: str, client: object) -> None:
        self.worker_id = worker_id
        self.client = cast(AwaitingClient, client)
        self.workflows = False
        # The tasks parked tasks wait on, as the last look read them; ``None``: any task
        # (too many to hold, or a database where every settlement decides).
        self.waited_on: frozenset[str] | None = frozenset()


def gate(run: WorkflowsRun) -> tuple[InUse, TaskEndFor]:
    """The workflows' ``in_use`` (whether a settlement may have a dependent to decide)
    and ``task_end_for`` (whether one of the tasks it settles may)."""
    client = run.client

    def in_use() -> bool:
        waited_on = run.waited_on
        return run.workflows and (waited_on is None or bool(waited_on) or bool(client._awaited))

    def task_end_for(ids: Sequence[str]) -> bool:
        waited_on = run.waited_on
        if waited_on is None:
            return True
        noted = client._awaited
        if noted is None:
            return not waited_on.isdisjoint(ids)
        return noted.everything() or any(i in waited_on or i in noted for i in ids)

    return in_use, task_end_for


LEASE_NAME = "cairnq.workflows"
INTERVAL_MS = 1_000
LEASE_TTL_MS = 5_000
# The most dependency edges of parked tasks a look reads; beyond, every settlement decides.
# Every worker reads them each second, so the bound keeps that read small.
WAITED_ON_LIMIT = 1_000


class WorkflowSweeper:
    """Decides parked tasks whose dependencies ended outside cairnq's settlements."""

    def __init__(
        self,
        backend: Backend,
        runtime: WorkflowsRun,
        *,
        report: ErrorHook,
        interval_ms: int = INTERVAL_MS,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.backend = backend
        self.runtime = runtime
        self.turns = SweepTurns(self._sweep)
        # The database records a purged dependency's success (x0016 applied).
        self.keeps_success = False
        self.job, self.looks = sweep_and_look(
            LEASE_NAME,
            backend,
            holder=runtime.worker_id,
            sweep=self.tick,
            look=self.look,
            ready=self.ready,
            report=report,
            phase="workflows",
            interval_ms=interval_ms,
            lease_ttl_ms=lease_ttl_ms,
        )

    async def prepare(self) -> None:
        """Read whether the database has the workflow tables and which tasks parked tasks
        wait on (before the jobs start)."""
        await self.look()

    async def look(self) -> None:
        """Note which tasks parked tasks wait on now (and whether the tables appeared
        meanwhile)."""
        runtime = self.runtime
        if not runtime.workflows or not self.keeps_success:
            applied = await self.backend.arun(kernel.applied_migrations(), write=False)
            runtime.workflows = all(m in applied for m in _ops.WORKFLOWS_MIGRATIONS)
            self.keeps_success = _ops.KEEP_SUCCESS_MIGRATION in applied
        if runtime.workflows:
            # Where a purge could forget a success no settlement recorded, every
            # settlement decides.
            runtime.waited_on = (
                await self.backend.arun(_ops.waited_on_by_parked(WAITED_ON_LIMIT), write=False)
                if self.keeps_success
                else None
            )

    async def ready(self) -> bool:
        """Whether the database has the workflow tables (read again while it has not).

        The sweep's turns wait on it: where the workflows step aside, the sweep
        neither takes its named lease nor says it runs without one.
        """
        if not self.runtime.workflows:
            self.runtime.workflows = await self.backend.arun(_ops.workflows_ready(), write=False)
        return self.runtime.workflows

    async def tick(self) -> int:
        """Sweep once (the tables exist: ``ready``); returns how many parked tasks it
        changed."""
        return await self.turns.run()

    async def _sweep(self) -> tuple[int, bool]:
        changed, more = await self.backend.arun(_ops.sweep_turn(_ops.SWEEP_LIMIT), write=True)
        if changed:
            log.debug(
                "workflow sweep decided %d parked task(s)",
                len(changed),
                extra={"worker_id": self.runtime.worker_id, "phase": "workflows"},
            )
        return len(changed), more


class WorkflowsComponent(Part):
    """Prepare reads whether the workflow tables exist and which tasks parked tasks wait
    on; the jobs look again once a second and sweep under their named lease."""

    name = "workflows"

    def __init__(self, sweeper: WorkflowSweeper) -> None:
        self.sweeper = sweeper
        self.job = Jobs(sweeper.looks, sweeper.job)

    async def prepare(self) -> None:
        await self.sweeper.prepare()

    async def before_idle(self) -> bool:
        """Decide the parked tasks whose dependencies ended with no decision (what the
        sweep would within a second): a run ``until_idle`` must not stop before they are
        released. ``True`` when a sweep of this run changed one since the last ask
        (the job's sweep, too: it may have released work after the claim looked)."""
        if not self.sweeper.runtime.workflows:
            return False
        return await self.sweeper.turns.changed_since_asked()
