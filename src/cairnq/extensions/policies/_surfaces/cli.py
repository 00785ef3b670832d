"""Task policies on the command line: ``cairnq get`` shows the policies a task's submit
gave it and, for a task a policy ended, why (``"reason": "expired"``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ....client import SyncCairnQ
from ....models import Task
from .._ops import of


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``policies`` in ``cairnq get``'s JSON, for a task submitted with some."""
    found = client.backend.run(of(task.id), write=False)
    if found is not None:
        shown["policies"] = {
            k: v for k, v in dataclasses.asdict(found).items() if k != "task_id" and v is not None
        }
