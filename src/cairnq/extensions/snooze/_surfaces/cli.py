"""Snoozing on the command line: ``cairnq get`` shows a snoozed task's ``snoozes``
(how many, the last one's time and delay)."""

from __future__ import annotations

import argparse
from typing import Any

from ....client import SyncCairnQ
from ....models import Task
from .._ops import snoozes_if_ready


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``snoozes`` in ``cairnq get``'s JSON, for a task that snoozed."""
    found = client.backend.run(snoozes_if_ready(task.id), write=False)
    if found is not None:
        shown["snoozes"] = {k: v for k, v in found.to_dict().items() if k != "task_id"}
