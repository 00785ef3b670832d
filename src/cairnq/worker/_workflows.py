"""The worker's workflow sweep: a periodic job under the named lease ``cairnq.workflows``.

cairnq's own complete, fail and cancel decide a task's parked dependents in the
transaction that ends it. A reference SDK's worker sharing the database does
not, and neither does lease recovery; this sweep decides, about once a second,
every parked task whose dependencies have ended meanwhile, and records a success
for a task still waiting on others, so retention purging that dependency later
does not undo it. One process at a time sweeps (the lease); deciding twice is
harmless, as every decision is written only while the task is still parked.

The sweep also keeps ``Runtime.workflows`` (do settlements decide dependents?)
current when the workflow tables appear after the worker started.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..backends import Backend
from ..kernel.periodic import ErrorHook, NamedLease, PeriodicJob
from ..protocol import workflows as _workflows

log = logging.getLogger("cairnq.worker")


class WorkflowsSwitch(Protocol):
    """Where the sweeper notes whether the database has the workflow tables (the
    worker's ``Runtime``, whose settlements decide dependents only then)."""

    workflows: bool

    @property
    def worker_id(self) -> str: ...


LEASE_NAME = "cairnq.workflows"
INTERVAL_MS = 1_000
LEASE_TTL_MS = 5_000


class WorkflowSweeper:
    """Decides parked tasks whose dependencies ended outside cairnq's settlements."""

    def __init__(
        self,
        backend: Backend,
        runtime: WorkflowsSwitch,
        *,
        report: ErrorHook,
        interval_ms: int = INTERVAL_MS,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.backend = backend
        self.runtime = runtime
        self.job = PeriodicJob(
            LEASE_NAME,
            self.tick,
            interval_ms=interval_ms,
            first_delay_ms=0,
            on_error=report,
            lease=NamedLease(backend, holder=runtime.worker_id, ttl_ms=lease_ttl_ms),
            phase="workflows",
            context={"worker_id": runtime.worker_id},
        )

    async def prepare(self) -> None:
        """Read whether the database has the workflow tables (before ``job`` starts)."""
        self.runtime.workflows = await self.backend.arun(_workflows.workflows_ready(), write=False)

    async def tick(self) -> int:
        """Sweep once; returns how many parked tasks it changed."""
        if not self.runtime.workflows:
            self.runtime.workflows = await self.backend.arun(
                _workflows.workflows_ready(), write=False
            )
            if not self.runtime.workflows:
                return 0
        changed = await self.backend.arun(_workflows.sweep(), write=True)
        if changed:
            log.debug(
                "workflow sweep decided %d parked task(s)",
                len(changed),
                extra={"worker_id": self.runtime.worker_id, "phase": "workflows"},
            )
        return len(changed)
