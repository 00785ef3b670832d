"""The workflows' worker part: a sweep under the named lease ``cairnq.workflows``, and a
look for parked tasks that keeps the ``in_use`` gate current (``WorkflowsComponent``).

cairnq's own complete, fail and cancel decide a task's parked dependents in the
transaction that ends it. A reference SDK's worker sharing the database does
not, and neither does lease recovery; this sweep decides, about once a second,
every parked task whose dependencies have ended meanwhile, and records a success
for a task still waiting on others, so retention purging that dependency later
does not undo it. One process at a time sweeps (the lease); deciding twice is
harmless, as every decision is written only while the task is still parked.

Whether this worker's settlements decide dependents at all is the workflows'
``in_use`` gate (``gate``): the workflow tables exist, and either a task is
parked or this worker's client made one wait (``submit(depends_on=...)``,
``submit_graph``, ``ctx.gather``). Every worker looks for a parked task about
once a second (``looks``, no lease), so a graph another process submits is seen
within about a second; a dependency this worker settles before it looks again
leaves its dependents to the sweep, which releases them within about a second
more (``tests/test_workflows_in_use.py`` shows the bound). Skipping a decision is
never wrong: the sweep decides it, and a purge of the dependency meanwhile keeps
its success (``x0016_workflows_keep_success.sql``'s trigger records it). On a
database without that migration a purge could forget the success, so there every
settlement decides, as a worker did before the gate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, cast

from ... import kernel
from ...backends import Backend
from ...kernel.periodic import ErrorHook
from .._base import Jobs, Part, sweep_and_look
from . import _ops

log = logging.getLogger("cairnq.worker")


class DependentsClient(Protocol):
    """What the gate reads of the worker's client (a ``CairnQ``)."""

    @property
    def _submitted_dependents(self) -> bool:
        """Whether the client made a task wait for others (a ``ctx.gather`` included)."""
        ...


class WorkflowsRun:
    """One worker run's workflows state: whether the database has the workflow tables
    and whether a task is parked (the sweeper notes both), and the worker's client,
    whose settlements decide dependents once it made a task wait."""

    def __init__(self, worker_id: str, client: object) -> None:
        self.worker_id = worker_id
        self.client = cast(DependentsClient, client)
        self.workflows = False
        self.parked = False


def gate(run: WorkflowsRun) -> Callable[[], bool]:
    """The workflows' ``in_use``: whether a settlement may have dependents to decide."""
    client = run.client

    def in_use() -> bool:
        return run.workflows and (run.parked or client._submitted_dependents)

    return in_use


LEASE_NAME = "cairnq.workflows"
INTERVAL_MS = 1_000
LEASE_TTL_MS = 5_000


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
        """Read whether the database has the workflow tables and a parked task (before
        the jobs start)."""
        await self.look()

    async def look(self) -> None:
        """Note whether a task is parked now (and whether the tables appeared meanwhile)."""
        runtime = self.runtime
        if not runtime.workflows or not self.keeps_success:
            applied = await self.backend.arun(kernel.applied_migrations(), write=False)
            runtime.workflows = all(m in applied for m in _ops.WORKFLOWS_MIGRATIONS)
            self.keeps_success = _ops.KEEP_SUCCESS_MIGRATION in applied
        if runtime.workflows:
            # Where a purge could forget a success no settlement recorded, every
            # settlement decides.
            runtime.parked = not self.keeps_success or await self.backend.arun(
                _ops.parked_exist(), write=False
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
        changed = await self.backend.arun(_ops.sweep_with_tables(), write=True)
        if changed:
            log.debug(
                "workflow sweep decided %d parked task(s)",
                len(changed),
                extra={"worker_id": self.runtime.worker_id, "phase": "workflows"},
            )
        return len(changed)


class WorkflowsComponent(Part):
    """Prepare reads whether the workflow tables exist and a task is parked; the
    jobs look for a parked task once a second and sweep under their named lease."""

    name = "workflows"

    def __init__(self, sweeper: WorkflowSweeper) -> None:
        self.sweeper = sweeper
        self.job = Jobs(sweeper.looks, sweeper.job)

    async def prepare(self) -> None:
        await self.sweeper.prepare()
