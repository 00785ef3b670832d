"""The workflows on the command line: ``cairnq get --tree`` prints the task's workflow
instead of the task (``_model.tree_lines``)."""

from __future__ import annotations

import argparse

from ....client import SyncCairnQ
from ....models import Task
from .. import _ops as _workflows
from .._model import tree_lines


def add_get_options(get: argparse.ArgumentParser) -> None:
    """``cairnq get --tree``."""
    get.add_argument(
        "--tree",
        action="store_true",
        help="print the task's workflow instead: the tasks of its root, each under its "
        "parent, with the dependencies it runs after and their statuses",
    )


def get_instead(args: argparse.Namespace, client: SyncCairnQ, task: Task) -> list[str] | None:
    """With ``--tree``, the lines of ``task``'s workflow."""
    if not getattr(args, "tree", False):
        return None
    workflow = client.backend.run(_workflows.workflow(task), write=False)
    return tree_lines(workflow, focus=task.id)
