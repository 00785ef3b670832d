"""``cairnq pause``, ``resume`` and ``paused``: pause a queue or a task name for every
cairnq worker, resume it, list what is paused."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli._errors import CommandError
from ....cli._render import iso, json_text, write_lines
from ....cli._target import open_client
from .._ops import Pause


def _target(args: argparse.Namespace) -> tuple[str, str]:
    """``("queue", QUEUE)`` or ``("name", NAME)``: exactly one of the two must be given."""
    if (args.queue is None) == (args.task is None):
        raise CommandError(f"{args.command}: give a QUEUE or --task NAME (one of the two)")
    return ("queue", args.queue) if args.task is None else ("name", args.task)


def _describe(scope: str, target: str) -> str:
    return f"queue {target}" if scope == "queue" else f"task {target}"


def cmd_pause(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq pause``."""
    scope, target = _target(args)
    with open_client(args) as client:
        if scope == "queue":
            pause = client.pauses.pause_queue(target, by=args.by)
        else:
            pause = client.pauses.pause_task(target, by=args.by)
    out.write(f"{_describe(scope, target)} paused since {iso(pause.paused_at_ms)}\n")
    return 0


def cmd_resume(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq resume``: resuming what is not paused says so and is no error."""
    scope, target = _target(args)
    with open_client(args) as client:
        ended = (
            client.pauses.resume_queue(target)
            if scope == "queue"
            else client.pauses.resume_task(target)
        )
    words = "resumed" if ended is not None else "was not paused"
    out.write(f"{_describe(scope, target)} {words}\n")
    return 0


def cmd_paused(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq paused``."""
    with open_client(args) as client:
        pauses = client.pauses.list()
    if args.json:
        out.write(json_text([p.to_dict() for p in pauses], indent=2) + "\n")
    elif not pauses:
        out.write("nothing is paused\n")
    else:
        write_lines(out, [_line(p) for p in pauses])
    return 0


def _line(pause: Pause) -> str:
    by = f" by {pause.paused_by}" if pause.paused_by else ""
    return f"{_describe(pause.scope, pause.target)} paused since {iso(pause.paused_at_ms)}{by}"


def add_commands(
    command: Callable[..., argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """``cairnq pause``, ``resume`` and ``paused`` (``command(name, summary, example[,
    description])`` adds each to ``cairnq``)."""
    pause = command(
        "pause",
        "pause a queue or a task name for every cairnq worker",
        "cairnq pause emails --by 'provider outage'",
        "Pause a queue (or, with --task, a task name in every queue): cairnq workers "
        "stop claiming it within about a second; running tasks finish and submits are "
        "still accepted. Reference SDK workers do not know pauses and keep claiming.",
    )
    pause.add_argument("queue", nargs="?", metavar="QUEUE")
    pause.add_argument("--task", metavar="NAME", help="pause this task name instead")
    pause.add_argument("--by", help="who paused it and why, shown by `cairnq paused`")
    pause.set_defaults(run=cmd_pause)

    resume = command(
        "resume",
        "resume a paused queue or task name",
        "cairnq resume emails",
    )
    resume.add_argument("queue", nargs="?", metavar="QUEUE")
    resume.add_argument("--task", metavar="NAME", help="resume this task name instead")
    resume.set_defaults(run=cmd_resume)

    paused = command("paused", "list paused queues and task names", "cairnq paused --json")
    paused.add_argument("--json", action="store_true", help="print a JSON array")
    paused.set_defaults(run=cmd_paused)
