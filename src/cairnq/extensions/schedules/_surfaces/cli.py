"""``cairnq schedules``: list, add, pause, resume, remove schedules and read their history;
and the next slot due under the header of ``cairnq top`` (``top_section``)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli._errors import CommandError
from ....cli._render import json_text, write_lines
from ....cli._target import open_client
from ....cli._tasks import read_payload
from ....client import SyncCairnQ
from ....durations import format_instant
from ....top import Section, format_table
from .. import _ops as _schedules
from .._model import (
    CATCH_UP_POLICIES,
    OVERLAPS,
    Schedule,
    ScheduleOptions,
    ScheduleSlot,
    ScheduleSpec,
)

HISTORY_LIMIT = 20


def slot_time(slot: ScheduleSlot, tz: str = "UTC") -> str:
    """A slot's time in the schedule's zone, or a range's first and last:
    ``2026-01-02 03:00:00+01:00 Europe/Paris .. 2026-01-02 03:09:00+01:00 Europe/Paris``
    (UTC reads ``2026-01-02 03:00:00Z``)."""
    if slot.through_ms is None or slot.through_ms == slot.slot_ms:
        return format_instant(slot.slot_ms, tz)
    return f"{format_instant(slot.slot_ms, tz)} .. {format_instant(slot.through_ms, tz)}"


def decision(slot: ScheduleSlot) -> str:
    """What was decided on a slot: ``enqueued``, or ``missed (10 slots)`` for a range."""
    return slot.outcome + (f" ({slot.slots} slots)" if slot.slots > 1 else "")


def task_status(slot: ScheduleSlot) -> str:
    """The slot's task's status; ``purged`` once its task is gone, ``-`` when it has none."""
    if slot.task_id is None:
        return "-"
    return slot.task_status or "purged"


def outcome(slot: ScheduleSlot | None) -> str:
    """The last slot's decision and, when it submitted a task, that task's status."""
    if slot is None:
        return "-"
    if slot.task_id is None:
        return decision(slot)
    return f"{decision(slot)}: {task_status(slot)}"


def next_run(schedule: Schedule) -> str:
    """When the next slot falls, in the schedule's zone; ``-`` while paused or when no
    slot is left."""
    if schedule.paused or schedule.next_ms is None:
        return "-"
    return format_instant(schedule.next_ms, schedule.tz)


def schedule_table(listed: Sequence[tuple[Schedule, ScheduleSlot | None]]) -> list[str]:
    """``schedules ls``: one row per schedule."""
    headers = ["NAME", "WHEN", "QUEUE", "TASK", "NEXT RUN", "LAST RUN", "OUTCOME", "STATE"]
    rows = [
        [
            s.name,
            s.when,
            s.queue,
            s.task,
            next_run(s),
            "-" if last is None else slot_time(last, s.tz),
            outcome(last),
            "paused" if s.paused else "active",
        ]
        for s, last in listed
    ]
    return format_table(headers, rows)


def history_table(slots: Sequence[ScheduleSlot], tz: str = "UTC") -> list[str]:
    """``schedules history``: one row per slot decision, newest first, in the zone ``tz``."""
    rows = [[slot_time(s, tz), decision(s), s.task_id or "-", task_status(s)] for s in slots]
    return format_table(["SLOT", "DECISION", "TASK", "STATUS"], rows)


def _listed_dict(schedule: Schedule, last: ScheduleSlot | None) -> dict[str, Any]:
    return {**schedule.to_dict(), "last_slot": None if last is None else last.to_dict()}


def _unknown(name: str) -> CommandError:
    return CommandError(f"no schedule named {name!r} (see `cairnq schedules ls`)")


def cmd_schedules_ls(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules ls``."""
    with open_client(args) as client:
        listed = client._run(_schedules.with_last_slots(), write=False)
    if args.json:
        out.write(json_text([_listed_dict(s, last) for s, last in listed], indent=2) + "\n")
    elif not listed:
        out.write("no schedules\n")
    else:
        write_lines(out, schedule_table(listed))
    return 0


def cmd_schedules_add(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules add``: stores it, or with ``--replace`` replaces its definition."""
    if args.tz is not None and args.cron is None:
        raise CommandError(
            "--tz applies to --cron only: intervals are counted in absolute time", code=2
        )
    options = _options(args)
    with open_client(args) as client:
        spec = ScheduleSpec.build(client.codec, args.name, args.task, options, paused=args.paused)
        before = client.schedules.get(args.name) if args.replace else None
        stored, created = client._run(
            _schedules.put(spec, source="api", replace=args.replace), write=True
        )
    if before is not None and before.source == "code":
        # Code owns the names it declares: the next worker start stores them as written.
        sys.stderr.write(
            f"cairnq: warning: schedule {stored.name} is declared in worker code: the next "
            "worker start puts the code's definition back (change it in the code instead)\n"
        )
        sys.stderr.flush()
    if args.json:
        out.write(json_text(stored.to_dict(), indent=2) + "\n")
        return 0
    verb = "added" if created else "replaced"
    state = "paused" if stored.paused else f"next run {next_run(stored)}"
    out.write(f"{verb} schedule {stored.name}: {stored.task} {stored.when}, {state}\n")
    return 0


def _options(args: argparse.Namespace) -> ScheduleOptions:
    """The options ``schedules add`` was given (each flag's destination is the option's
    name); those not given keep ``ScheduleOptions``'s defaults."""
    given = {
        option.name: getattr(args, option.name)
        for option in dataclasses.fields(ScheduleOptions)
        if getattr(args, option.name, None) is not None
    }
    if "payload" in given:
        given["payload"] = read_payload(args.payload)
    return ScheduleOptions(**given)


def _set_paused(args: argparse.Namespace, out: TextIO, paused: bool) -> int:
    with open_client(args) as client:
        stored = _pause(client, args.name, paused)
    if stored is None:
        raise _unknown(args.name)
    if paused:
        out.write(f"paused schedule {stored.name}\n")
    else:
        out.write(f"resumed schedule {stored.name}: next run {next_run(stored)}\n")
    return 0


def _pause(client: SyncCairnQ, name: str, paused: bool) -> Schedule | None:
    return client.schedules.pause(name) if paused else client.schedules.resume(name)


def cmd_schedules_pause(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules pause NAME``."""
    return _set_paused(args, out, True)


def cmd_schedules_resume(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules resume NAME``: from now; the slots passed meanwhile are skipped."""
    return _set_paused(args, out, False)


def cmd_schedules_rm(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules rm NAME``: the tasks its slots submitted stay."""
    with open_client(args) as client:
        removed = client.schedules.remove(args.name)
    if not removed:
        raise _unknown(args.name)
    out.write(f"removed schedule {args.name}\n")
    return 0


def cmd_schedules_history(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq schedules history NAME``."""
    with open_client(args) as client:
        schedule = client.schedules.get(args.name)
        if schedule is None:
            raise _unknown(args.name)
        slots = client.schedules.history(args.name, limit=args.limit)
    if args.json:
        out.write(json_text([s.to_dict() for s in slots], indent=2) + "\n")
    elif not slots:
        out.write(f"no slot of {args.name} decided yet\n")
    else:
        write_lines(out, history_table(slots, schedule.tz))
    return 0


def add_commands(
    command: Callable[[str, str, str], argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """``cairnq schedules`` (``command(name, summary, example)`` adds it to ``cairnq``)
    and its ``ls``, ``add``, ``pause``, ``resume``, ``rm`` and ``history`` subcommands."""
    schedules = command(
        "schedules",
        "list, add, pause, resume and remove schedules (periodic tasks)",
        "cairnq schedules add nightly report.build --cron '0 2 * * *' --tz Europe/Paris",
    )
    actions = schedules.add_subparsers(dest="action", metavar="ACTION")

    def action(name: str, summary: str, example: str, description: str = "") -> Any:
        return actions.add_parser(
            name,
            help=summary,
            description=description or summary[0].upper() + summary[1:] + ".",
            epilog=f"example: {example}",
            parents=list(parents),
            formatter_class=formatter,
        )

    def usage(args: argparse.Namespace, out: TextIO) -> int:
        out.write(schedules.format_help())
        return 2

    schedules.set_defaults(run=usage)
    ls = action(
        "ls",
        "list schedules with their next run, last run and its outcome",
        "cairnq schedules ls --json",
        "List every schedule, by name: its timing (cron expression and zone, or "
        "interval), queue and task, its next run, its last slot's time and decision "
        "with that task's status, and whether it is paused.",
    )
    ls.add_argument("--json", action="store_true", help="print a JSON array")
    ls.set_defaults(run=cmd_schedules_ls)

    add = action(
        "add",
        "store a schedule; every cairnq worker on the database runs it",
        "cairnq schedules add nightly report.build --cron '0 2 * * *' --tz Europe/Paris",
        "Store a schedule submitting task TASK once per slot. Its first slot is the "
        "first after now. A name already taken is refused unless --replace, which "
        "replaces the definition and keeps the schedule's history and paused state.",
    )
    add.add_argument("name", help="the schedule's name, unique in the database")
    add.add_argument("task", help="task (handler) name each slot submits")
    timing = add.add_mutually_exclusive_group(required=True)
    timing.add_argument(
        "--cron", metavar="EXPR", help="5 fields, 6 with seconds first, or @hourly, @daily, ..."
    )
    timing.add_argument("--every", metavar="DURATION", help="an interval: 90s, 5m, 1h30m")
    add.add_argument("--tz", help="IANA zone the --cron expression is read in (UTC)")
    add.add_argument("--queue", help="queue (default)")
    add.add_argument("--payload", metavar="JSON", help="each task's payload; - reads stdin")
    add.add_argument("--priority", type=int, help="higher runs first (0)")
    add.add_argument("--max-attempts", type=count(1), help="runs allowed (3)")
    add.add_argument(
        "--catch-up",
        metavar="DURATION",
        help="after downtime, enqueue missed slots this recent; older ones are recorded "
        "as missed (1h)",
    )
    add.add_argument(
        "--catch-up-policy",
        choices=CATCH_UP_POLICIES,
        help="all: every missed slot inside --catch-up, oldest first; latest: only the "
        "newest (all)",
    )
    add.add_argument(
        "--overlap",
        choices=OVERLAPS,
        help="while the previous slot's task is queued or running: allow a new one, "
        "skip the slot, or queue it to wait (allow)",
    )
    add.add_argument("--jitter", metavar="DURATION", help="run each task up to this late (0s)")
    add.add_argument("--paused", action="store_true", help="store it paused")
    add.add_argument("--replace", action="store_true", help="replace a schedule of that name")
    add.add_argument("--json", action="store_true", help="print the stored schedule as JSON")
    add.set_defaults(run=cmd_schedules_add)

    for name, summary, run in (
        ("pause", "pause a schedule: no slot submits a task until resumed", cmd_schedules_pause),
        (
            "resume",
            "resume a paused schedule from now (slots passed meanwhile are skipped)",
            cmd_schedules_resume,
        ),
        ("rm", "remove a schedule and its history (its tasks stay)", cmd_schedules_rm),
    ):
        one = action(name, summary, f"cairnq schedules {name} nightly")
        one.add_argument("name", help="the schedule's name")
        one.set_defaults(run=run)

    history = action(
        "history",
        "show a schedule's latest slots: time, decision, task and its status",
        "cairnq schedules history nightly --limit 50",
    )
    history.add_argument("name", help="the schedule's name")
    history.add_argument(
        "--limit", type=count(1), default=HISTORY_LIMIT, help=f"most slots shown ({HISTORY_LIMIT})"
    )
    history.add_argument("--json", action="store_true", help="print a JSON array")
    history.set_defaults(run=cmd_schedules_history)


def top_section(client: SyncCairnQ, *, queue: str | None, now_ms: int) -> Section | None:
    """The earliest next slot of the schedules not paused, under ``cairnq top``'s header."""
    upcoming = client.backend.run(_schedules.next_slot(), write=False)
    line = _schedules.next_slot_line(upcoming, now_ms)
    return None if line is None else Section([line], head=True)
