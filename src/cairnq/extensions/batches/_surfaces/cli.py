"""``cairnq batch BATCH_ID``: a batch's state, counts, progress and callbacks, and with
``--members`` each member's recorded outcome."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli import open_client
from .. import _ops


def add_commands(
    command: Callable[..., argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """Add ``cairnq batch``."""
    batch = command(
        "batch", "show a batch: its counts, progress and callbacks", "cairnq batch BATCH_ID"
    )
    batch.add_argument("batch_id", metavar="BATCH_ID", help="the batch's id (batch_...)")
    batch.add_argument(
        "--members",
        type=count(1),
        default=0,
        metavar="N",
        help="also list the first N members with their recorded outcomes",
    )
    batch.set_defaults(run=cmd_batch)


def cmd_batch(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as cq:
        found = cq.backend.run(_ops.status(args.batch_id), write=False)
        if found is None:
            out.write(f"no batch has the id {args.batch_id}\n")
            return 1
        members = []
        if args.members:
            members = cq.backend.run(_ops.members(found.id, limit=args.members), write=False)
    shown: dict[str, Any] = {
        "id": found.id,
        "state": found.state,
        "total": found.total,
        "ended": found.ended,
        "progress": round(found.progress, 4),
        "succeeded": found.succeeded,
        "failed": found.failed,
        "canceled": found.canceled,
        "purged": found.purged,
        "pending": found.pending,
        "callbacks": found.callbacks,
        "submitted": list(found.submitted),
    }
    if args.members:
        shown["members"] = [
            {"task_id": m.task_id, "outcome": m.outcome, "status": m.status} for m in members
        ]
    out.write(json.dumps(shown, indent=2) + "\n")
    return 0
