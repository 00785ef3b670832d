"""The attempt history on the command line: ``cairnq get`` shows the task's life as a
``timeline`` of events (submitted, each attempt, each step, the end)."""

from __future__ import annotations

import argparse
from typing import Any

from ....client import SyncCairnQ
from ....models import Task
from .._ops import history_if_ready
from .._panel import timeline_events


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``timeline`` in ``cairnq get``'s JSON, on a database with the attempts' table."""
    found = client.backend.run(history_if_ready(task.id), write=False)
    if found is not None:
        # The timeline replaces the created/last-update pair it contains.
        del shown["created_at_ms"], shown["updated_at_ms"]
        shown["timeline"] = timeline_events(task, *found)
