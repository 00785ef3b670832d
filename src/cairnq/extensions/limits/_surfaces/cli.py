"""``cairnq limits set|ls|rm``: the concurrency and rate limits stored in the database;
and the ``limits`` section of ``cairnq top`` (``top_section``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ....cli._render import json_text
from ....cli._target import open_client
from ....client import SyncCairnQ
from ....errors import InvalidArgument
from ....top import Section, format_table
from .. import _ops as _limits
from .._model import Limit, LimitUsage

# What ``cairnq.top`` also answers for (it held them before the section came here).
top_names = ("limit_lines",)
BUSIEST_KEYS = 3


def add_commands(
    command: Callable[..., argparse.ArgumentParser],
    parents: Sequence[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    count: Any,
) -> None:
    """``cairnq limits`` (``command(name, summary, example, description)`` adds it to
    ``cairnq``) and its ``set``, ``ls`` and ``rm`` subcommands."""
    limits = command(
        "limits",
        "set, list and remove concurrency and rate limits",
        "cairnq limits set 2 --queue emails --key payload.customer",
        "Concurrency and rate limits every cairnq worker on the database "
        "enforces when it claims; workers apply a change within about a second.",
    )
    actions = limits.add_subparsers(dest="limits_command", metavar="ACTION", required=True)
    put = actions.add_parser(
        "set",
        help="store a limit (replacing one of the same id)",
        description="Store a concurrency limit (N running at once) or, with --per, a "
        "rate limit (N per period, as a token bucket of --burst).",
        epilog="example: cairnq limits set 20 --per 1s --burst 5 --queue llm",
        parents=list(parents),
        formatter_class=formatter,
    )
    put.add_argument("limit", type=int, help="tasks running at once, or per period")
    scope = put.add_mutually_exclusive_group(required=True)
    scope.add_argument("--queue", help="the queue it governs")
    scope.add_argument("--name", help="the task name it governs")
    put.add_argument("--key", help="partition key path, e.g. payload.customer")
    put.add_argument("--per", help="a rate limit's period, e.g. 1s or 1m")
    put.add_argument("--burst", type=int, help="a rate limit's bucket size (default: LIMIT)")
    put.add_argument("--id", help="the limit's id (default: derived from its definition)")
    put.set_defaults(run=cmd_limits_set)
    listing = actions.add_parser(
        "ls",
        help="list limits with their running and waiting tasks",
        epilog="example: cairnq limits ls --json",
        parents=list(parents),
        formatter_class=formatter,
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=cmd_limits_ls)
    remove = actions.add_parser(
        "rm",
        help="remove a limit",
        epilog="example: cairnq limits rm per-customer",
        parents=list(parents),
        formatter_class=formatter,
    )
    remove.add_argument("id", help="the limit's id (as `cairnq limits ls` shows it)")
    remove.set_defaults(run=cmd_limits_rm)


def cmd_limits_set(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq limits set``."""
    scope = {"queue": args.queue, "name": args.name, "key": args.key, "id": args.id}
    if args.per is None:
        if args.burst is not None:
            raise InvalidArgument("--burst applies to rate limits: give --per too")
        limit = Limit.concurrency(args.limit, **scope)
    else:
        limit = Limit.rate(args.limit, per=args.per, burst=args.burst, **scope)
    with open_client(args) as client:
        stored = client.limits.set(limit)
    out.write(f"{stored.id}: {stored.describe()}\n")
    return 0


def usage_lines(usages: list[LimitUsage]) -> list[str]:
    """One line per limit: its id, definition, use now and waiting tasks."""
    lines = []
    for usage in usages:
        limit = usage.limit
        if limit.kind == "concurrency":
            busiest = sorted(usage.running.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            shown = ", ".join(f"{k or '(all)'}={n}" for k, n in busiest) or "none"
            use = (
                f"running {sum(usage.running.values())} ({shown}); saturated {len(usage.saturated)}"
            )
        else:
            low = min(usage.tokens.values(), default=float(limit.burst or limit.amount))
            use = f"tokens (lowest key) {low:.1f}/{limit.burst}"
        lines.append(
            f"{limit.id}  [{limit.source}]  {limit.describe()}  {use}; waiting {usage.waiting}"
        )
    return lines


def cmd_limits_ls(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq limits ls``."""
    with open_client(args) as client:
        usages = client.limits.usage()
    if args.json:
        rows = [
            {
                "id": u.limit.id,
                "kind": u.limit.kind,
                "limit": u.limit.amount,
                "scope": u.limit.scope,
                "target": u.limit.target,
                "key": u.limit.key,
                "period_ms": u.limit.period_ms,
                "burst": u.limit.burst,
                "source": u.limit.source,
                "running": u.running,
                "waiting": u.waiting,
                "tokens": u.tokens,
            }
            for u in usages
        ]
        out.write(json_text(rows, indent=2) + "\n")
        return 0
    if not usages:
        out.write("no limits\n")
        return 0
    out.write("\n".join(usage_lines(usages)) + "\n")
    return 0


def cmd_limits_rm(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq limits rm``."""
    with open_client(args) as client:
        removed = client.limits.remove(args.id)
    out.write(f"removed {args.id}\n" if removed else f"no limit {args.id!r}\n")
    return 0 if removed else 1


def _rule(usage: LimitUsage) -> str:
    limit = usage.limit
    if limit.kind == "concurrency":
        rule = f"{limit.amount} at once"
    else:
        rule = f"{limit.amount}/{limit.period_text} burst {limit.burst}"
    return rule + (f" per {limit.key}" if limit.key else "")


def _use(usage: LimitUsage, most: int) -> str:
    limit = usage.limit
    more = (len(usage.tokens) if limit.kind == "rate" else len(usage.running)) - most
    extra = f", +{more} keys" if more > 0 else ""
    if limit.kind == "rate":
        if not usage.tokens:
            return f"tokens {limit.burst}/{limit.burst}"
        if limit.key is None:
            return f"tokens {usage.tokens.get('', 0.0):.1f}/{limit.burst}"
        fewest = usage.lowest_tokens(most)
        return "tokens " + ", ".join(f"{k} {t:.1f}/{limit.burst}" for k, t in fewest) + extra
    if limit.key is None:
        return f"{usage.running.get('', 0)}/{limit.amount}"
    busiest = usage.busiest(most)
    if not busiest:
        return "0 running"
    return ", ".join(f"{k} {n}/{limit.amount}" for k, n in busiest) + extra


def limit_lines(
    usages: Sequence[LimitUsage], *, queue: str | None = None, most: int = BUSIEST_KEYS
) -> list[str]:
    """The ``limits`` section: one row per limit with its rule, use now and waiting tasks.

    A concurrency limit's use is its ``most`` busiest keys as ``key running/limit``
    (one ``running/limit`` without a key); a rate limit's, its emptiest buckets'
    tokens. ``WAITING`` counts the due queued tasks the limit governs. With
    ``queue``, limits of other queues are left out. No lines without limits.
    """
    shown = [
        u for u in usages if queue is None or u.limit.scope != "queue" or u.limit.target == queue
    ]
    if not shown:
        return []
    rows = [
        [
            u.limit.id,
            f"{'queue' if u.limit.scope == 'queue' else 'task'} {u.limit.target}",
            _rule(u),
            str(u.waiting),
            _use(u, most),
        ]
        for u in shown
    ]
    return ["limits:", *format_table(["LIMIT", "ON", "RULE", "WAITING", "IN USE"], rows, right=[3])]


def top_section(client: SyncCairnQ, *, queue: str | None, now_ms: int) -> Section | None:
    """``cairnq top``'s ``limits`` section (``limit_lines``), under the queues."""
    usages = client.backend.run(_limits.usage_if_ready(), write=False) or []
    return Section(limit_lines(usages, queue=queue))
