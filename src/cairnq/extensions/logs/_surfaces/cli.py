"""Attempt logs on the command line: ``cairnq get`` shows ``logs``, what each attempt's
handler logged, on a database with the logs' table."""

from __future__ import annotations

import argparse
from typing import Any

from ....client import SyncCairnQ
from ....models import Task
from .._ops import logs


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``logs`` in ``cairnq get``'s JSON: one object per attempt that logged."""
    found = client.backend.run(logs(task.id), write=False)
    if found:
        shown["logs"] = [entry.to_dict() for entry in found]
