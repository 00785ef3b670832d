# audit_ext/_cli.py
"""``cairnq audit [TASK_ID]``: the audit log, newest first."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cairnq.cli import TopSection, open_client

from . import entries


def add_commands(
    command: Callable[..., argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """Add ``cairnq audit``: ``command(name, summary, example)`` makes its parser."""
    audit = command("audit", "list the audit log, newest first", "cairnq audit TASK_ID")
    audit.add_argument("task_id", nargs="?", metavar="TASK_ID", help="only this task's rows")
    audit.add_argument("-n", "--limit", type=count(1), default=50, help="at most this many")
    audit.set_defaults(run=cmd_audit)


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as cq:
        rows = cq.backend.run(entries(args.task_id, args.limit), write=False)
    for row in rows:
        out.write(f"{row['task_id']}  attempt {row['attempt']}  {row['outcome']}\n")
    return 0


def add_to_get(args: argparse.Namespace, cq: Any, task: Any, shown: dict[str, Any]) -> None:
    """``cairnq get`` shows the outcomes of the task's audited attempts too."""
    shown["audit"] = [row["outcome"] for row in cq.backend.run(entries(task.id), write=False)]


def top_section(cq: Any, *, queue: str | None, now_ms: int) -> TopSection:
    """``cairnq top`` shows the three latest audited attempts under its queues."""
    rows = cq.backend.run(entries(limit=3), write=False)
    return TopSection([f"audit: {row['task_id']} {row['outcome']}" for row in rows])
