"""The attempt history as the dashboard's task page shows it: the task's timeline read
from its recorded attempts (``attempt_timeline``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...durations import format_duration
from ...models import Task
from ._ops import Attempt


@dataclass(frozen=True)
class Event:
    """One line of the attempt timeline: when, what, a note, and an attempt's error."""

    at: int
    what: str
    note: str = ""
    error: Mapping[str, Any] | None = None


def attempt_timeline(
    task: Task, history: Sequence[Attempt], now: int, *, held: Event | None = None
) -> list[Event] | None:
    """The task's timeline from its recorded attempts, or ``None`` when they do not
    cover its runs (attempts ended by a worker that records none, or before ``x0009``).

    Lines: created; each attempt at its start (its end when the start is unknown)
    with its outcome, worker, duration and error; then what the row says now
    (``held``, the line of a queued task held back until other tasks end, given by
    the caller; else due, running, cancel requested, or ended without an attempt).
    """
    if not history:
        return None
    ended_runs = task.attempt - (1 if task.is_running else 0)
    if len({a.attempt for a in history}) < ended_runs:
        return None
    events = [Event(task.created_at_ms, "created")]
    for a in history:
        words = [f"attempt {a.attempt}", a.worker_id or "-"]
        if a.duration_ms is not None:
            words.append(f"took {format_duration(a.duration_ms)}")
        at = a.started_at_ms if a.started_at_ms is not None else a.ended_at_ms
        error = a.error if isinstance(a.error, Mapping) else None
        events.append(Event(at, a.outcome, " · ".join(words), error))
    if task.is_queued:
        if held is not None:
            events.append(held)
        elif task.run_at_ms > now:
            events.append(Event(task.run_at_ms, "scheduled", f"attempt {task.attempt + 1}"))
    elif task.is_running:
        note = f"attempt {task.attempt} on {task.worker_id or '-'}, claimed at or after this time"
        # The running attempt was claimed after the recorded ones ended.
        claimed = max(task.run_at_ms, max(a.ended_at_ms for a in history))
        events.append(Event(claimed, "running", note))
    if task.cancel_requested_at_ms is not None:
        events.append(Event(task.cancel_requested_at_ms, "cancel requested"))
    last = history[-1].outcome
    if task.completed_at_ms is not None and last != task.status:
        events.append(Event(task.completed_at_ms, task.status))
    events.sort(key=lambda e: e.at)
    return events
