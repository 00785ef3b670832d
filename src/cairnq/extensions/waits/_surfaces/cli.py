"""``cairnq send KEY [PAYLOAD_JSON]``: send an event to the tasks waiting on a key
(``ctx.wait_for``); and a task's waits in ``cairnq get``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli._target import open_client
from ....cli._tasks import read_payload
from ....client import SyncCairnQ
from ....durations import parse_duration
from ....models import Task
from .. import _ops


def add_commands(
    command: Callable[[str, str, str], argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """Add ``cairnq send``."""
    send = command(
        "send",
        "send an event to the tasks waiting on a key (ctx.wait_for)",
        "cairnq send refund-42 '{\"approved\": true}'",
    )
    send.add_argument("key", metavar="KEY", help="the event key")
    send.add_argument(
        "payload", nargs="?", metavar="PAYLOAD_JSON", help="JSON (null if left out); - reads stdin"
    )
    send.add_argument("--task", metavar="TASK_ID", help="address it to this task's waits alone")
    send.add_argument(
        "--all",
        action="store_true",
        help="every waiting task receives it, and each task whose wait begins before it expires",
    )
    send.add_argument(
        "--retention",
        type=parse_duration,
        metavar="DURATION",
        help="how long it is kept for waits that begin later (7d)",
    )
    send.add_argument(
        "--id",
        metavar="SEND_ID",
        help="the send's own id: sending again with it delivers nothing more (retries)",
    )
    send.set_defaults(run=cmd_send)


def cmd_send(args: argparse.Namespace, out: TextIO) -> int:
    payload = read_payload(args.payload)
    retention = None if args.retention is None else f"{args.retention}ms"
    with open_client(args) as cq:
        sent = cq.events.send(
            args.key,
            payload,
            task_id=args.task,
            to="all" if args.all else "one",
            retention=retention,
            id=args.id,
        )
    woke = len(sent.delivered_to)
    told = f"woke {woke} waiting task{'' if woke == 1 else 's'}" if woke else "no task waits"
    kept = "; kept for waits that begin later" if sent.kept else ""
    out.write(f"sent event {sent.seq} on {args.key}: {told}{kept}\n")
    return 0


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``waits`` in ``cairnq get``'s JSON, for a task that waited."""
    codec = client.codec

    def decode(text: str) -> Any:
        return codec.shown(codec.decode(text, what="event payload"), what="event payload")

    found = client.backend.run(_ops.waits_if_ready(task.id, decode), write=False)
    if found:
        shown["waits"] = [w.to_dict() for w in found]
