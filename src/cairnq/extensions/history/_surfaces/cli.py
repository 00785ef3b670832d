"""The attempt history on the command line: ``cairnq get`` shows the task's life as a
``timeline`` of events (submitted, each attempt, each step, the end)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, TextIO

from ....client import SyncCairnQ
from ....durations import format_duration
from ....models import Task
from ....top import format_table
from .._ops import history_if_ready
from .._panel import timeline_events
from .._trends import Trend


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``timeline`` in ``cairnq get``'s JSON, on a database with the attempts' table."""
    found = client.backend.run(history_if_ready(task.id), write=False)
    if found is not None:
        # The timeline replaces the created/last-update pair it contains.
        del shown["created_at_ms"], shown["updated_at_ms"]
        shown["timeline"] = timeline_events(task, *found)


def trends_table(trends: Sequence[Trend], by: str) -> list[str]:
    """``cairnq stats --by``: one row per task name (or queue), the busiest first."""
    headers = [by.upper(), "ATTEMPTS", "SUCCEEDED", "FAILED", "FAIL%", "PER HOUR", "P50", "P95"]
    rows = [
        [
            t.key,
            str(t.attempts),
            str(t.succeeded),
            str(t.failed),
            "-" if t.failure_rate is None else f"{t.failure_rate * 100:.1f}",
            f"{t.throughput_per_hour:.1f}",
            "-" if t.p50_ms is None else format_duration(t.p50_ms),
            "-" if t.p95_ms is None else format_duration(t.p95_ms),
        ]
        for t in trends
    ]
    return format_table(headers, rows, right=range(1, len(headers)))


def add_stats_options(stats: argparse.ArgumentParser) -> None:
    """``cairnq stats --by name|queue [--since 7d]``: the trends instead of the counts."""
    stats.add_argument(
        "--by",
        choices=("name", "queue"),
        help="the trends per task name or queue, from the attempt history (docs/trends.md)",
    )
    stats.add_argument("--since", default="7d", help="the trends' window, ending now (7d)")


def stats_instead(args: argparse.Namespace, client: SyncCairnQ, out: TextIO) -> int | None:
    """With ``--by``: print the trends (``--json``: as JSON), instead of the counts."""
    if args.by is None:
        return None
    found = client.attempts.trends(args.by, args.since)
    if args.json:
        out.write(json.dumps([t.to_dict() for t in found], indent=2) + "\n")
        return 0
    if not found:
        out.write(f"no attempt ended in the last {args.since}\n")
        return 0
    for line in trends_table(found, args.by):
        out.write(line + "\n")
    return 0
