"""What commands print: JSON, one-line task summaries and tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TextIO

from ..durations import format_duration
from ..models import STATUSES, Task
from ..top import format_table, percent


def json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON as the command line prints it: compact on one line unless indented."""
    separators = None if indent else (",", ":")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)


def summary(task: Task) -> str:
    """``<id> <status>`` plus what a person wants to know about that status."""
    line = f"{task.id} {task.status}"
    if task.is_running and task.cancel_requested:
        line += " (cancel requested; the handler stops at its next check)"
    elif task.is_queued and task.attempt:
        line += f" (attempt {task.attempt}/{task.max_attempts} done)"
    return line


def outcome_line(task: Task) -> str | None:
    """A finished task's result or error on one line; ``None`` while it is not finished."""
    if task.is_succeeded:
        return "result: " + json_text(task.result)
    if task.is_failed:
        error = task.error or {}
        kind, code = error.get("type", "?"), error.get("code", "?")
        return f"error: {kind} [{code}]: {error.get('message', '')}"
    return None


def write_lines(out: TextIO, lines: Sequence[str]) -> None:
    """Write each line with its newline, in one write."""
    out.write("".join(line + "\n" for line in lines))


def iso(ms: int) -> str:
    """A Unix time in milliseconds as ``YYYY-MM-DD HH:MM:SSZ`` (UTC)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def task_table(tasks: Sequence[Task], now_ms: int) -> list[str]:
    """``ls``: one row per task with its attempt, progress and age."""
    rows = [
        [
            t.id,
            t.name,
            t.queue,
            t.status,
            f"{t.attempt}/{t.max_attempts}",
            percent(t.progress),
            format_duration(now_ms - t.created_at_ms),
        ]
        for t in tasks
    ]
    headers = ["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "PROGRESS", "AGE"]
    return format_table(headers, rows, right=(4, 5, 6))


def stats_table(counts: dict[str, dict[str, int]]) -> list[str]:
    """``stats``: one row per queue, a column per status and the total."""
    headers = ["QUEUE", *(s.upper() for s in STATUSES), "TOTAL"]
    rows = [
        [queue, *(str(c.get(s, 0)) for s in STATUSES), str(sum(c.values()))]
        for queue, c in sorted(counts.items())
    ]
    return format_table(headers, rows, right=range(1, len(headers)))
