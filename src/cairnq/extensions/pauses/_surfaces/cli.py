"""``cairnq pause``, ``resume`` and ``paused``: pause a queue or a task name for every
cairnq worker, resume it, list what is paused."""

from __future__ import annotations

import argparse
import datetime
import difflib
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli._errors import CommandError
from ....cli._render import iso, json_text, write_lines
from ....cli._target import open_client
from ....client import SyncCairnQ
from ....durations import parse_duration
from ....errors import InvalidArgument
from .._ops import Pause


def _target(args: argparse.Namespace) -> tuple[str, str]:
    """``("queue", QUEUE)`` or ``("name", NAME)``: exactly one of the two must be given."""
    if (args.queue is None) == (args.task is None):
        raise CommandError(f"{args.command}: give a QUEUE or --task NAME (one of the two)")
    return ("queue", args.queue) if args.task is None else ("name", args.task)


def _describe(scope: str, target: str) -> str:
    return f"queue {target}" if scope == "queue" else f"task {target}"


def _for(text: str) -> datetime.timedelta:
    """``--for``: a duration with a unit (``10m``, ``1h30m``)."""
    try:
        return datetime.timedelta(milliseconds=parse_duration(text))
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _until(text: str) -> datetime.datetime:
    """``--until``: an ISO 8601 time with its zone (``2030-01-01T09:00:00+01:00``, ``...Z``)."""
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--until takes an ISO 8601 time with its zone, such as 2030-01-01T09:00:00Z "
            f"or 2030-01-01T10:00:00+01:00; got {text!r}"
        ) from None
    if value.utcoffset() is None:
        raise argparse.ArgumentTypeError(
            f"--until {text} has no zone, which names no single instant: add Z (UTC) or "
            f"an offset such as +01:00"
        )
    return value


def _unknown_queue(client: SyncCairnQ, queue: str) -> str | None:
    """A warning when ``queue`` holds no task and no live worker serves it (a typo,
    most likely), naming the closest known queue; ``None`` otherwise."""
    known = set(client.stats())
    if queue in known:
        return None
    served: set[str] = set()
    for worker in client.presence.workers():
        served.update(worker.queues or ())
    if queue in served:
        return None
    close = difflib.get_close_matches(queue, sorted(known | served), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"queue {queue} holds no task and no worker serves it{hint}; paused anyway"


def _ends(pause: Pause) -> str:
    if pause.resume_at_ms is None:
        return "until resumed"
    return f"until {iso(pause.resume_at_ms)}"


def cmd_pause(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq pause``: warns on stderr, in one line, when the queue looks like a typo."""
    scope, target = _target(args)
    if args.for_ is not None and args.until is not None:
        raise CommandError("pause: give --for or --until, not both")
    until = args.for_ if args.for_ is not None else args.until
    with open_client(args) as client:
        if scope == "queue":
            warning = _unknown_queue(client, target)
            pause = client.pauses.pause_queue(target, by=args.by, until=until)
        else:
            warning = None
            pause = client.pauses.pause_task(target, by=args.by, until=until)
    if warning is not None:
        sys.stderr.write(f"cairnq: warning: {warning}\n")
        sys.stderr.flush()
    out.write(
        f"{_describe(scope, target)} paused since {iso(pause.paused_at_ms)}, {_ends(pause)}\n"
    )
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
    ends = "" if pause.resume_at_ms is None else f", {_ends(pause)}"
    return (
        f"{_describe(pause.scope, pause.target)} paused since {iso(pause.paused_at_ms)}{by}{ends}"
    )


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
        "cairnq pause emails --by 'provider outage' --for 30m",
        "Pause a queue (or, with --task, a task name in every queue): cairnq workers "
        "stop claiming it within about a second; running tasks finish and submits are "
        "still accepted. With --for or --until the pause ends by itself. A queue that "
        "holds no task and that no worker serves is paused with a warning (a typo?). "
        "Reference SDK workers do not know pauses and keep claiming.",
    )
    pause.add_argument("queue", nargs="?", metavar="QUEUE")
    pause.add_argument("--task", metavar="NAME", help="pause this task name instead")
    pause.add_argument("--by", help="who paused it and why, shown by `cairnq paused`")
    pause.add_argument(
        "--for",
        dest="for_",
        type=_for,
        metavar="DURATION",
        help="end the pause by itself after this long (10m, 1h30m)",
    )
    pause.add_argument(
        "--until",
        type=_until,
        metavar="TIME",
        help="end the pause by itself at this ISO 8601 time with its zone (2030-01-01T09:00Z)",
    )
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
