"""Commands on tasks: submit, get, ls, cancel, retry, purge, stats and top."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from .._json import parse_input
from ..errors import SerializationError
from ..top import run_top
from ._errors import CommandError
from ._render import json_text, outcome_line, stats_table, summary, task_table, write_lines
from ._target import open_client, target_of

PURGE_BATCH = 1000
NO_TIME_LIMIT_MS = 2**62


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
    """``cairnq submit``."""
    if args.timeout_ms is not None and not args.wait:
        raise CommandError("--timeout-ms only applies with --wait", code=2)
    payload = read_payload(args.payload)
    with open_client(args, create=True) as client:
        task = client.submit(
            args.name,
            payload,
            key=args.key,
            conflict=args.conflict,
            queue=args.queue,
            priority=args.priority,
            delay_ms=args.delay_ms,
            max_attempts=args.max_attempts,
        )
        if args.wait:
            limit = NO_TIME_LIMIT_MS if args.timeout_ms is None else args.timeout_ms
            task = client.wait(task.id, timeout_ms=limit)
    if args.json:
        out.write(json_text(task.to_dict(), indent=2) + "\n")
    else:
        outcome = outcome_line(task) if args.wait else None
        write_lines(out, [summary(task)] + ([outcome] if outcome else []))
    return 1 if args.wait and not task.is_succeeded else 0


def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq get``."""
    with open_client(args) as client:
        task = client.get(args.id) if args.key is None else client.get_by_key(args.key)
    if task is None:
        raise CommandError(_unknown(args))
    out.write(json_text(task.to_dict(), indent=2) + "\n")
    return 0


def _unknown(args: argparse.Namespace) -> str:
    return f"no task with id {args.id}" if args.key is None else f"no task with key {args.key!r}"


def cmd_ls(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq ls``."""
    with open_client(args) as client:
        tasks = client.list(status=args.status, queue=args.queue, name=args.name, limit=args.limit)
    if args.json:
        out.write(json_text([t.to_dict() for t in tasks], indent=2) + "\n")
    elif args.jsonl:
        write_lines(out, [json_text(t.to_dict()) for t in tasks])
    elif not tasks:
        out.write("no tasks\n")
    else:
        write_lines(out, task_table(tasks, time.time_ns() // 1_000_000))
    return 0


def cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq cancel``."""
    with open_client(args) as client:
        if args.key is None:
            task = client.cancel(args.id)
            current = None if task else client.get(args.id)
        else:
            task = client.cancel_by_key(args.key)
            current = None if task else client.get_by_key(args.key)
    if task is None:
        if current is None:
            raise CommandError(_unknown(args))
        raise CommandError(f"task {current.id} is already {current.status}; nothing to cancel")
    out.write(summary(task) + "\n")
    return 0


def cmd_retry(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq retry``."""
    reset = args.reset_attempt
    with open_client(args) as client:
        if args.key is None:
            task = client.retry(args.id, reset_attempt=reset)
            current = None if task else client.get(args.id)
        else:
            task = client.retry_by_key(args.key, reset_attempt=reset)
            current = None if task else client.get_by_key(args.key)
    if task is None:
        if current is None:
            raise CommandError(_unknown(args))
        raise CommandError(
            f"task {current.id} is {current.status}; only failed or canceled tasks can be retried"
        )
    out.write(f"{task.id} {task.status} (attempt {task.attempt}/{task.max_attempts})\n")
    return 0


def cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq purge``: in batches until none is left."""
    total = 0
    with open_client(args) as client:
        while True:
            ids = client.purge(
                older_than_ms=args.older_than,
                status=args.status,
                queue=args.queue,
                name=args.name,
                limit=args.batch,
            )
            total += len(ids)
            if len(ids) < args.batch:
                break
    out.write(f"purged {total} task{'' if total == 1 else 's'}\n")
    return 0


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq stats``."""
    with open_client(args) as client:
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
            )
        except KeyboardInterrupt:
            out.write("\n")
    return 0
