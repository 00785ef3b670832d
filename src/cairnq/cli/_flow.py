"""Commands of flow control: pause, resume and paused."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..flow import Pause
from ._errors import CommandError
from ._render import iso, json_text, write_lines
from ._target import open_client


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
            pause = client.pause_queue(target, by=args.by)
        else:
            pause = client.pause_task(target, by=args.by)
    out.write(f"{_describe(scope, target)} paused since {iso(pause.paused_at_ms)}\n")
    return 0


def cmd_resume(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq resume``: resuming what is not paused says so and is no error."""
    scope, target = _target(args)
    with open_client(args) as client:
        ended = client.resume_queue(target) if scope == "queue" else client.resume_task(target)
    words = "resumed" if ended is not None else "was not paused"
    out.write(f"{_describe(scope, target)} {words}\n")
    return 0


def cmd_paused(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq paused``."""
    with open_client(args) as client:
        pauses = client.paused()
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
