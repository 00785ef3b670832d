"""Commands on tasks: submit, get, ls, cancel, retry, purge, stats and top."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO
from urllib.parse import urlsplit

from .. import kernel
from .._clock import SYSTEM_CLOCK
from .._json import parse_input
from ..backends import clock_of, description_of
from ..client import SyncCairnQ
from ..client._core import never_claimed, why_not_done
from ..durations import UNIT_MS, format_duration
from ..errors import CairnQError, SerializationError, TaskTimeout, UnservedTaskWarning
from ..models import Task
from ..top import run_top
from ._errors import CommandError, one_line
from ._parts import get_output, ls_instead, stats_instead
from ._render import json_text, outcome_line, stats_table, summary, task_table, write_lines
from ._target import open_client, target_of

PURGE_BATCH = 1000


def read_payload(text: str | None) -> Any:
    """The payload argument as JSON; ``-`` reads it from stdin."""
    if text is None:
        return None
    if text == "-":
        # JSON is UTF-8 whatever the locale: read bytes where stdin has them.
        raw = getattr(sys.stdin, "buffer", None)
        try:
            text = raw.read().decode("utf-8") if raw is not None else sys.stdin.read()
        except UnicodeDecodeError:
            raise SerializationError("payload on stdin is not valid UTF-8") from None
    return parse_input(text, what="payload")


def cmd_submit(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq submit``: warns at once when no live worker serves the task.

    With ``--wait`` the task's id and status are printed (and flushed) before
    waiting; stderr says what it waits for and where, says after a few seconds
    when nothing has claimed the task, and the wait gives up after
    ``WAIT_TIMEOUT_MS`` unless ``--timeout-ms`` says otherwise. Ctrl-C stops
    waiting (exit 130) and says how to follow the task, which stays queued.
    """
    if args.timeout_ms is not None and not args.wait:
        raise CommandError("--timeout only applies with --wait", code=2)
    payload = read_payload(args.payload)
    err = sys.stderr
    with open_client(args) as client:
        where = description_of(client.backend)
        # The warning is printed below, once: not also by logging's last-resort handler.
        with warnings.catch_warnings(record=True) as caught, _quiet(CLIENT_LOG):
            warnings.simplefilter("always", UnservedTaskWarning)
            task = client.submit(
                args.name,
                payload,
                key=args.key,
                conflict=args.conflict,
                queue=args.queue,
                priority=args.priority,
                delay_ms=args.delay_ms,
                max_attempts=args.max_attempts,
                warn_unserved=not getattr(args, "no_warn_unserved", False),
            )
        _pass_on(caught, err)
        if not args.wait:
            _print_task(args, out, task, waited=False)
            return 0
        # A delayed task is waited for from when it is due: the default wait starts
        # then, and "never claimed" is said only once it has been due for a while.
        due_in = max(0, task.run_at_ms - _now_ms(client)) if task.is_queued else 0
        limit = WAIT_TIMEOUT_MS + due_in if args.timeout_ms is None else args.timeout_ms
        # Ctrl-C at any point after the submit (even before the wait begins) gets the hint.
        try:
            if not args.json:
                out.write(summary(task) + "\n")
                out.flush()
            err.write(
                f"waiting for {task.id} on {where}; Ctrl-C stops waiting, "
                f"the task stays {task.status}\n"
            )
            if due_in:
                err.write(
                    f"{task.id} is delayed: no worker may claim it before it is due, in "
                    f"{format_duration(due_in)}\n"
                )
            err.flush()
            task = _wait(
                client, task, limit, where, err, default=args.timeout_ms is None, due_in=due_in
            )
        except KeyboardInterrupt:
            current = client.get_status(task.id)
            status = current.status if current is not None else task.status
            err.write(
                f"\nstopped waiting; {task.id} is {status} and carries on without this "
                f"command. Follow it with: {_follow_hint(args, task.id)}\n"
            )
            err.flush()
            return 130
    _print_task(args, out, task, waited=True)
    return 0 if task.is_succeeded else 1


WAIT_TIMEOUT_MS = 60_000
"""How long ``submit --wait`` waits without ``--timeout-ms``: a minute."""
WAIT_SLICE_MS = 500
DIAGNOSE_AFTER_MS = 3_000
PROGRESS_EVERY_MS = 15_000


def _print_task(args: argparse.Namespace, out: TextIO, task: Task, *, waited: bool) -> None:
    if args.json:
        out.write(json_text(task.to_dict(), indent=2) + "\n")
        return
    outcome = outcome_line(task) if waited else None
    write_lines(out, [summary(task)] + ([outcome] if outcome else []))


CLIENT_LOG = "cairnq.client"


@contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Without logging configured, keep ``logger``'s records off stderr for the block."""
    target = logging.getLogger(logger)
    if logging.getLogger().hasHandlers():
        yield
        return
    handler = logging.NullHandler()
    target.addHandler(handler)
    try:
        yield
    finally:
        target.removeHandler(handler)


def _pass_on(caught: list[warnings.WarningMessage], err: TextIO) -> None:
    """Print unserved-task warnings as ``cairnq: warning:`` lines; re-issue any others."""
    for item in caught:
        if issubclass(item.category, UnservedTaskWarning):
            err.write(f"cairnq: warning: {item.message}\n")
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    err.flush()


def _wait(
    client: SyncCairnQ,
    task: Task,
    most_ms: int,
    where: str,
    err: TextIO,
    *,
    default: bool,
    due_in: int = 0,
) -> Task:
    """Wait in short slices, telling stderr when the task sits unclaimed (``due_in`` ms
    after the start at the earliest: a delayed task is not claimed before) and how it goes."""
    started = time.monotonic()
    told_unclaimed = False
    next_progress = PROGRESS_EVERY_MS
    last_status = task.status
    while True:
        waited = int((time.monotonic() - started) * 1000)
        remaining = max(0, most_ms - waited)
        try:
            return client.wait(task.id, timeout_ms=min(WAIT_SLICE_MS, remaining))
        except TaskTimeout as exc:
            seen = exc.task if isinstance(exc.task, Task) else task
            waited = int((time.monotonic() - started) * 1000)
            if waited >= most_ms:
                how = " (the --wait default; --timeout sets another)" if default else ""
                raise CommandError(
                    f"task {task.id} did not finish within {most_ms} ms{how}: "
                    f"{why_not_done(seen, None, _now_ms(client), where)}; "
                    f"it carries on: {_follow_hint_plain(task.id)}"
                ) from None
            if seen.is_queued and seen.attempt == 0:
                if not told_unclaimed and waited >= due_in + DIAGNOSE_AFTER_MS:
                    told_unclaimed = True
                    err.write(f"{task.id} after {waited // 1000} s: {never_claimed(seen, where)}\n")
            elif seen.status != last_status:
                err.write(f"{task.id} {seen.status}{_on_worker(seen)}\n")
            last_status = seen.status
            if waited >= next_progress:
                next_progress += PROGRESS_EVERY_MS
                err.write(f"still waiting for {task.id} ({seen.status}, {waited // 1000} s)\n")
            err.flush()


def _now_ms(client: SyncCairnQ) -> int:
    return (clock_of(client.backend) or SYSTEM_CLOCK).now_ms()


def _on_worker(task: Task) -> str:
    if task.is_running and task.worker_id:
        return f" on worker {task.worker_id} (attempt {task.attempt}/{task.max_attempts})"
    return ""


def _follow_hint_plain(task_id: str) -> str:
    return f"cairnq get {task_id}"


def _follow_hint(args: argparse.Namespace, task_id: str) -> str:
    """``cairnq get ID`` with the ``--db`` (and ``--schema``) given, unless it holds a password."""
    hint = f"cairnq get {task_id}"
    if args.db:
        try:
            secret = urlsplit(args.db).password is not None
        except ValueError:
            secret = True
        hint += " --db " + ("<the same URL>" if secret else shlex.quote(args.db))
    if getattr(args, "schema", None):
        hint += " --schema " + shlex.quote(args.schema)
    return hint


def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq get``."""
    with open_client(args) as client:
        task = client.get(args.id) if args.key is None else client.get_by_key(args.key)
        if task is None:
            raise CommandError(_unknown(args))
        shown = get_output(args, client, task)
    if isinstance(shown, list):
        write_lines(out, shown)
        return 0
    out.write(json_text(shown, indent=2) + "\n")
    return 0


def _unknown(args: argparse.Namespace) -> str:
    return f"no task with id {args.id}" if args.key is None else f"no task with key {args.key!r}"


def cmd_ls(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq ls``."""
    with open_client(args) as client:
        found = ls_instead(args, client)
        more = None
        if found is None:
            tasks = client.list(
                status=args.status, queue=args.queue, name=args.name, limit=args.limit
            )
            more = _more_than_shown(client, args, len(tasks))
        else:
            tasks = found
    if more:
        sys.stderr.write(f"{more} (--limit N shows more, up to 10,000; filters narrow it)\n")
        sys.stderr.flush()
    if args.json:
        out.write(json_text([t.to_dict() for t in tasks], indent=2) + "\n")
    elif args.jsonl:
        write_lines(out, [json_text(t.to_dict()) for t in tasks])
    elif not tasks:
        out.write("no tasks\n")
    else:
        write_lines(out, task_table(tasks, time.time_ns() // 1_000_000))
    return 0


def _more_than_shown(client: SyncCairnQ, args: argparse.Namespace, shown: int) -> str | None:
    """``showing 100 of 110,000 tasks`` when the listing stopped at ``--limit`` with more
    matching (counted from the per-queue counts; without them, with a name filter, only
    that more match); ``None`` when every match is shown."""
    if not shown or shown < args.limit:
        return None
    if args.name is None:
        counts = client.stats(args.queue)
        total = sum(
            n
            for by_status in counts.values()
            for status, n in by_status.items()
            if args.status is None or status == args.status
        )
        return f"showing {shown:,} of {total:,} tasks" if total > shown else None
    beyond = client.list(
        status=args.status, queue=args.queue, name=args.name, limit=1, offset=shown
    )
    return f"showing the first {shown:,} tasks; more match" if beyond else None


def _targets(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(kind, value)`` for each task the command names: ids first, then keys."""
    targets = [("id", i) for i in args.ids] + [("key", k) for k in args.keys]
    if not targets:
        raise CommandError(
            f"give at least one task id or --key (see `cairnq {args.command} --help`)", code=2
        )
    return targets


def _name(kind: str, value: str) -> str:
    return f"id {value}" if kind == "id" else f"key {value!r}"


def _each(
    args: argparse.Namespace,
    out: TextIO,
    act: Callable[[SyncCairnQ, str, str], str],
) -> int:
    """Run ``act`` on each task named, printing its line or its error; 1 if any failed."""
    failed = 0
    targets = _targets(args)
    with open_client(args) as client:
        for kind, value in targets:
            try:
                line = act(client, kind, value)
            except (CommandError, CairnQError) as exc:
                failed += 1
                sys.stderr.write(f"cairnq: error: {one_line(exc)}\n")
                continue
            out.write(line + "\n")
            out.flush()
    return 1 if failed else 0


def _current(client: SyncCairnQ, kind: str, value: str) -> Task:
    task = client.get(value) if kind == "id" else client.get_by_key(value)
    if task is None:
        raise CommandError(f"no task with {_name(kind, value)}")
    return task


def cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq cancel``: each task given; one already canceled is no error."""

    def cancel(client: SyncCairnQ, kind: str, value: str) -> str:
        task = client.cancel(value) if kind == "id" else client.cancel_by_key(value)
        if task is not None:
            return summary(task)
        current = _current(client, kind, value)
        if current.status == "canceled":
            return f"{current.id} already canceled"
        raise CommandError(f"task {current.id} already {current.status}; nothing to cancel")

    return _each(args, out, cancel)


def cmd_retry(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq retry``: each task given; one already queued is no error."""
    reset = args.reset_attempt
    from_step = getattr(args, "from_step", None)

    def retry(client: SyncCairnQ, kind: str, value: str) -> str:
        if from_step is not None:
            target = value if kind == "id" else _current(client, kind, value).id
            task = client.retry(target, reset_attempt=reset, from_step=from_step)
        elif kind == "id":
            task = client.retry(value, reset_attempt=reset)
        else:
            task = client.retry_by_key(value, reset_attempt=reset)
        if task is not None:
            return f"{task.id} {task.status} (attempt {task.attempt}/{task.max_attempts})"
        current = _current(client, kind, value)
        if current.status == "queued":
            return f"{current.id} already queued"
        state = "already" if current.is_terminal else "is"
        raise CommandError(
            f"task {current.id} {state} {current.status}; "
            "only failed or canceled tasks can be retried"
        )

    return _each(args, out, retry)


def _plural(count: int) -> str:
    return f"{count} task{'' if count == 1 else 's'}"


def _spelled(ms: int) -> str:
    """A duration exactly, as it is typed: ``7d``, ``1h30m``, ``0s``."""
    parts = []
    for unit, size in UNIT_MS.items():
        amount, ms = divmod(ms, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"


def _purge_scope(args: argparse.Namespace) -> str:
    """The filters of a purge in words: ``completed over 7d ago, queue emails``."""
    parts = [f"completed over {_spelled(args.older_than)} ago"]
    parts += [
        f"{label} {value}"
        for label, value in (("status", args.status), ("queue", args.queue), ("name", args.name))
        if value
    ]
    return ", ".join(parts)


def _confirmed(count: int) -> bool:
    """Ask on the terminal; only ``y`` or ``yes`` confirms."""
    sys.stderr.write(f"Delete {_plural(count)}? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer.endswith("\n"):
        sys.stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")


def cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq purge``: count and confirm first, then delete in batches until none is left."""
    filters = {"status": args.status, "queue": args.queue, "name": args.name}
    with open_client(args) as client:
        counted_at = time.monotonic()
        counts = client._run(
            kernel.purge_counts(older_than_ms=args.older_than, **filters), write=False
        )
        matching = sum(counts.values())
        scope = _purge_scope(args)
        if not matching:
            out.write(f"no task matches ({scope}); nothing to purge\n")
            return 0
        by_status = ", ".join(f"{counts[s]} {s}" for s in sorted(counts))
        verb = "matches" if matching == 1 else "match"
        out.write(f"{_plural(matching)} {verb} ({scope}): {by_status}\n")
        out.flush()
        if args.dry_run:
            out.write("dry run: nothing deleted\n")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                raise CommandError(
                    f"purge would delete {_plural(matching)} and there is no terminal to "
                    "confirm on; pass --yes to delete them (or --dry-run to only count)"
                )
            if not _confirmed(matching):
                out.write("nothing deleted\n")
                return 1
        # What was counted and confirmed, no more: the cutoff stays where it was when
        # counted (tasks finishing during the prompt are not old enough), and the
        # deletes stop at the count.
        older_than = args.older_than + int((time.monotonic() - counted_at) * 1000)
        total = 0
        while total < matching:
            limit = min(args.batch, matching - total)
            ids = client.purge(older_than_ms=older_than, limit=limit, **filters)
            total += len(ids)
            if len(ids) < limit:
                break
    out.write(f"purged {_plural(total)}\n")
    return 0


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq stats``, or what an extension prints instead (``_parts.stats_instead``)."""
    with open_client(args) as client:
        instead = stats_instead(args, client, out)
        if instead is not None:
            return instead
        counts = client.stats(args.queue)
    if args.json:
        out.write(json_text(counts, indent=2) + "\n")
        return 0
    if not counts:
        out.write("no tasks\n")
        return 0
    write_lines(out, stats_table(counts))
    return 0


def cmd_top(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq top``."""
    target = target_of(args)
    with open_client(args) as client:
        try:
            run_top(
                client,
                out,
                interval=args.interval,
                queue=args.queue,
                title=target.describe(),
                refreshes=args.iterations,
                extensions=getattr(args, "extensions", ()),
            )
        except KeyboardInterrupt:
            out.write("\n")
    return 0
