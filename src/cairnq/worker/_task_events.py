"""What a worker tells its listeners about a task (``TaskEvent``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..models import Task

EventKind = Literal[
    "started", "succeeded", "failed", "retried", "snoozed", "canceled", "lost", "recovered"
]
SETTLED_AS: dict[str, EventKind] = {
    "succeeded": "succeeded",
    "failed": "failed",
    "canceled": "canceled",
    "queued": "retried",
}


@dataclass(frozen=True)
class TaskEvent:
    """Something that happened to a task in this worker, for metrics and tracing hooks.

    ``kind`` is ``started``, ``succeeded``, ``failed``, ``retried`` (failed, queued
    again), ``snoozed`` (queued again after a delay, no attempt spent),
    ``canceled``, ``lost`` (the lease was lost; another attempt may run) or
    ``recovered`` (this worker's maintenance moved the task, whose lease had
    expired elsewhere, out of ``running``: ``task.status`` says to what).
    ``duration_ms`` is the attempt's run time so far; ``error`` the envelope recorded.
    ``task`` is the task as this attempt claimed it (status ``running``; its
    ``run_at_ms``, ``updated_at_ms`` (the claim instant, by the database clock)
    and ``metadata``), or as recovered; ``None`` when the row could not be read.
    """

    kind: EventKind
    task_id: str
    name: str
    queue: str
    attempt: int
    worker_id: str
    duration_ms: float | None = None
    error: dict[str, Any] | None = None
    task: Task | None = field(default=None, repr=False)


Listener = Callable[[TaskEvent], None]
