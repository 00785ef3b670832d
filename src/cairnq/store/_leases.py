"""The leases a store fences its owned writes on: those of its own claims, remembered,
and those a worker hands it for a claim or a settlement it makes through the store.

A store remembers the lease of every claim it made (the last ``REMEMBERED_LEASES``);
once that claim is lost or settled, its writes for the task under that worker id
are refused until it claims the task again. For a task it never claimed it reads
the task's current lease (``current_lease``).

A worker whose store has ``claim_session`` or ``complete`` replaced calls them
with a ``WorkerClaim`` or a ``WorkerLease`` set for the call (context variables,
so they reach the store's own method through any wrapper): the store's draw then
claims with the worker's extension points (its limits and draw claimers), and its
``complete`` settles the attempt the worker holds, fenced on that attempt's lease
(``complete_attempt``: the worker's settlement of a returned handler and a
handler's own ``ctx.succeed`` both settle through it).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..kernel.points import NO_POINTS, Points
from ..models import Lease, Task, worker_of
from ..protocol.steps import NOW, Call, Op, Row

# Claims remembered per store (held, and lost or settled); an evicted one is treated
# as a claim the store never made.
REMEMBERED_LEASES = 65_536


@dataclass
class WorkerClaim:
    """A worker's claim made through ``store.claim_session``: what its draws claim with,
    and what they claimed (undecoded rows, as the worker's own claim returns them)."""

    worker_id: str = ""
    points: Points = NO_POINTS
    recover_limit: int = 0
    alone: bool = False
    rows: list[Row] = field(default_factory=list)
    recovered: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerLease:
    """The attempt a worker settles through ``store.complete``: its lease, its worker
    id, when it was claimed (for the attempt history), and the worker's extension
    points, whose ending hooks the settlement runs (as the worker's own would)."""

    lease: Lease
    worker_id: str
    started: int | None
    points: Points = NO_POINTS


WORKER_CLAIM: ContextVar[WorkerClaim | None] = ContextVar("cairnq_worker_claim", default=None)
WORKER_LEASE: ContextVar[WorkerLease | None] = ContextVar("cairnq_worker_lease", default=None)


class Completing(Protocol):
    """What ``complete_attempt`` needs of a store (``TaskStore``): its ``complete``."""

    async def complete(self, *, task_id: str, worker_id: str, result: Any) -> Task: ...


async def complete_attempt(
    store: Completing,
    lease: Lease,
    worker_id: str,
    started: int | None,
    result: str | None,
    points: Points = NO_POINTS,
) -> Task:
    """Settle the attempt ``lease`` with ``store.complete`` (a replaced one), as a worker.

    ``result`` is the handler's result already encoded as JSON text; the store's
    method gets its value. The ``WorkerLease`` set for the call fences the store's
    own ``complete`` on exactly this attempt, so a stale handler cannot settle a
    later claim of the task under the same worker id, and runs the worker's ending
    hooks (``points``), not the store's.

    Raises:
        LostLease: the attempt is no longer held (whatever the replacement raises).
    """
    value = None if result is None else json.loads(result)
    token = WORKER_LEASE.set(WorkerLease(lease, worker_id, started, points))
    try:
        return await store.complete(task_id=lease.id, worker_id=worker_id, result=value)
    finally:
        WORKER_LEASE.reset(token)


def current_lease(task_ids: Sequence[str], worker_id: str) -> Op[dict[str, Lease]]:
    """The lease each task is held under by ``worker_id`` now (running, lease live): a
    claim that wrote the id alone (a store's) or with its nonce (a worker's).

    Tasks held by anyone else or not running are left out.
    """
    rows = yield Call("lease_states", {"ids": list(task_ids), "now_ms": NOW})
    return {
        str(row["id"]): Lease.of(row)
        for row in rows
        if row["status"] == "running"
        and worker_of(row["worker_id"]) == worker_id
        and row["lease_live"]
    }


def why_not_held(task_id: str, worker_id: str) -> Op[str | None]:
    """Why ``worker_id`` holds no lease on ``task_id``, when it never did: the task
    does not exist, is not running, or runs under another worker id. ``None`` when
    the task runs under ``worker_id`` with its lease run out (a lost lease)."""
    rows = yield Call("lease_states", {"ids": [task_id], "now_ms": NOW})
    if not rows:
        return f"no task {task_id}: worker id {worker_id!r} holds no lease on it"
    row = rows[0]
    owner = worker_of(row["worker_id"])
    if row["status"] != "running":
        return (
            f"task {task_id} is {row['status']}, not running: worker id {worker_id!r} "
            "holds no lease on it"
        )
    if owner != worker_id:
        return (
            f"worker id {worker_id!r} does not own task {task_id}: it runs under worker id "
            f"{owner!r}; pass the worker_id the task was claimed with"
        )
    return None


class LeaseMemory:
    """The claims one store made, by (task, worker id): held, or ended (lost or settled)."""

    def __init__(self) -> None:
        self._leases: OrderedDict[tuple[str, str], Lease] = OrderedDict()
        # When each remembered claim was made (the claimed row's ``updated_at_ms``).
        self._claimed_at: dict[tuple[str, str], int] = {}
        # (task, worker id) whose claim by this store was lost or settled: its writes
        # are refused until this store claims the task again.
        self._ended: OrderedDict[tuple[str, str], None] = OrderedDict()

    def remember(self, lease: Lease, worker_id: str, claimed_at_ms: int) -> None:
        """This store claimed ``lease`` for ``worker_id`` at ``claimed_at_ms``."""
        key = (lease.id, worker_id)
        self._leases[key] = lease
        self._leases.move_to_end(key)
        self._claimed_at[key] = claimed_at_ms
        self._ended.pop(key, None)
        while len(self._leases) > REMEMBERED_LEASES:
            evicted, _ = self._leases.popitem(last=False)
            self._claimed_at.pop(evicted, None)

    def forget(self, task_id: str, worker_id: str) -> None:
        """This store's claim of ``task_id`` under ``worker_id`` ended (lost or settled)."""
        key = (task_id, worker_id)
        self._leases.pop(key, None)
        self._claimed_at.pop(key, None)
        self._ended[key] = None
        self._ended.move_to_end(key)
        while len(self._ended) > REMEMBERED_LEASES:
            self._ended.popitem(last=False)

    def ended(self, task_id: str, worker_id: str) -> bool:
        """Whether this store's claim of ``task_id`` under ``worker_id`` was lost or settled."""
        return (task_id, worker_id) in self._ended

    def claimed_at(self, task_id: str, worker_id: str) -> int | None:
        """When this store claimed the task for ``worker_id``, if it remembers the claim."""
        return self._claimed_at.get((task_id, worker_id))

    def split(self, task_ids: Sequence[str], worker_id: str) -> tuple[dict[str, Lease], list[str]]:
        """The leases remembered for ``task_ids``, and the ids to read from the database
        (neither remembered nor ended)."""
        known = {
            i: self._leases[(i, worker_id)] for i in task_ids if (i, worker_id) in self._leases
        }
        unknown = [i for i in task_ids if i not in known and (i, worker_id) not in self._ended]
        return known, unknown
