"""The attempt history as a task's displays show it: the dashboard's task page reads the
task's timeline from its recorded attempts (``attempt_timeline``), ``cairnq get`` its
attempts and steps as events (``timeline_events``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...durations import format_duration
from ...models import Task
from ..steps._ops import StepRecord
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


def timeline_events(
    task: Task, attempts: Sequence[Attempt], steps: Sequence[StepRecord]
) -> list[dict[str, Any]]:
    """A task's life as events in time order (``cairnq get``'s ``timeline``): submitted,
    each attempt, each step, the end."""
    events: list[dict[str, Any]] = [{"event": "submitted", "at_ms": task.created_at_ms}]
    for attempt in attempts:
        shown = attempt.to_dict()
        del shown["task_id"]
        events.append({"event": "attempt", "at_ms": attempt.started_at_ms, **shown})
    for step in steps:
        events.append(
            {
                "event": "step",
                "at_ms": step.recorded_at_ms,
                "name": step.name,
                "seq": step.seq,
                "attempt": step.attempt,
            }
        )
    if task.completed_at_ms is not None:
        events.append({"event": task.status, "at_ms": task.completed_at_ms})
    else:
        events.append({"event": "last update", "at_ms": task.updated_at_ms})

    order = {"submitted": 0, "attempt": 1, "step": 2}

    def when(event: dict[str, Any]) -> tuple[int, int, int]:
        # Within one millisecond: an attempt, then its steps, then the next attempt.
        at = event["at_ms"]
        instant = int(event.get("ended_at_ms") or 0) if at is None else int(at)
        rank = order.get(event["event"], 3)
        return instant, int(event.get("attempt", 0 if rank == 0 else 2**31)), rank

    return sorted(events, key=when)
