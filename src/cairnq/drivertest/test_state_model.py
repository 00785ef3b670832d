"""The model the state machine test (``test_state_machine``) checks the database against.

``Model`` is one task as the protocol says it must be (``src/cairnq/protocol/PROTOCOL.md``:
statuses, attempts, ownership, cancel); ``observed`` reads the same fields off a
stored ``Task``; ``Held`` is a lease a claim handed out, kept after it goes stale;
``expected_decision`` is the key conflict table as it reads.

Named ``test_*.py`` like the suite's test modules, so that Hypothesis draws no
constants from it (see ``cairnq.drivertest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Lease, Task


@dataclass
class Model:
    """One task as the protocol says it must be."""

    id: str
    priority: int
    max_attempts: int
    run_at: int
    status: str = "queued"
    attempt: int = 0
    worker_id: str | None = None
    lease_until: int | None = None
    cancel_at: int | None = None
    error: str | None = None
    progress: float | None = None
    result: Any = None
    completed_at: int | None = None
    bonus: int = 0  # retries without reset since the last reset
    token: int | None = None  # the latest claim's nonce (Lease.token)

    def owned_by(self, held: Held, worker_id: str, now: int) -> bool:
        """The ownership predicate every worker write carries (the fence)."""
        return (
            self.status == "running"
            and self.worker_id == worker_id
            and self.attempt == held.attempt
            and self.token == held.token
            and self.lease_until is not None
            and self.lease_until > now
        )

    def observed(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "attempt": self.attempt,
            "worker_id": self.worker_id,
            "lease_until_ms": self.lease_until,
            "cancel_requested_at_ms": self.cancel_at,
            "error": self.error,
            "progress": self.progress,
            "result": self.result,
            "run_at_ms": self.run_at,
            "completed_at_ms": self.completed_at,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
        }


def observed(task: Task) -> dict[str, Any]:
    error = task.error["code"] if task.error is not None else None
    return {
        "status": task.status,
        "attempt": task.attempt,
        "worker_id": task.worker_id,
        "lease_until_ms": task.lease_until_ms,
        "cancel_requested_at_ms": task.cancel_requested_at_ms,
        "error": error,
        "progress": task.progress,
        "result": task.result,
        "run_at_ms": task.run_at_ms,
        "completed_at_ms": task.completed_at_ms,
        "max_attempts": task.max_attempts,
        "priority": task.priority,
    }


@dataclass(frozen=True)
class Held:
    """A lease a claim handed out: kept after it goes stale, to try settling with it."""

    task_id: str
    attempt: int
    worker_id: str
    token: int

    def lease(self) -> Lease:
        return Lease(self.task_id, self.attempt, self.token)


def expected_decision(conflict: str, status: str) -> str:
    """The key conflict table (PROTOCOL.md, "Keys"), written out as it reads."""
    live = status in ("queued", "running")
    table = {
        "reuse": "return" if live else "insert",
        "reuse-succeeded": "return" if live or status == "succeeded" else "insert",
        "reject": "reject",
        "replace": "replace" if live else "insert",
    }
    return table[conflict]
