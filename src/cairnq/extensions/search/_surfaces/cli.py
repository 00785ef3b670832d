"""Search on the command line: ``cairnq get`` shows a task's tags and declared search
fields; ``cairnq ls --tag ... --where ... --error ... --since ... --until ...`` searches,
with ``ls``'s own ``--status``, ``--queue``, ``--name`` and ``--limit``."""

from __future__ import annotations

import argparse
from typing import Any

from ....client import SyncCairnQ
from ....errors import InvalidArgument
from ....models import Task
from .._model import MAX_LIMIT, check_query
from .._ops import find, terms_of


def add_to_get(
    args: argparse.Namespace, client: SyncCairnQ, task: Task, shown: dict[str, Any]
) -> None:
    """``tags`` and ``search_fields`` in ``cairnq get``'s JSON, for a task with some."""
    found = client.backend.run(terms_of(task.id), write=False)
    if found.tags:
        shown["tags"] = list(found.tags)
    if found.fields:
        shown["search_fields"] = dict(found.fields)


def add_ls_options(ls: argparse.ArgumentParser) -> None:
    """``cairnq ls``'s search options."""
    ls.add_argument(
        "--tag", action="append", metavar="TAG", help="only tasks with this tag (repeatable: all)"
    )
    ls.add_argument(
        "--where",
        action="append",
        metavar="FIELD=VALUE",
        help="only tasks whose declared search field holds VALUE (repeatable: all)",
    )
    ls.add_argument(
        "--error",
        metavar="TEXT",
        help="only tasks whose error holds every word of TEXT (word* a prefix)",
    )
    ls.add_argument(
        "--since", metavar="DURATION", help="only tasks created within this long (7d, 1h30m)"
    )
    ls.add_argument("--until", metavar="DURATION", help="only tasks created longer ago than this")


def ls_instead(args: argparse.Namespace, client: SyncCairnQ) -> list[Task] | None:
    """The tasks ``cairnq ls`` lists when given a search option; else ``None``."""
    if not (args.tag or args.where or args.error or args.since or args.until):
        return None
    if args.limit == 0:
        return []
    return search(client, args)


def where_pairs(given: list[str] | None) -> dict[str, str]:
    """``--where FIELD=VALUE`` options as a dict (a value is matched as text).

    Raises:
        InvalidArgument: one without ``=``.
    """
    out: dict[str, str] = {}
    for item in given or ():
        field, sep, value = item.partition("=")
        if not sep or not field:
            raise InvalidArgument(f"--where takes FIELD=VALUE, got {item!r}")
        out[field] = value
    return out


def search(client: SyncCairnQ, args: argparse.Namespace) -> list[Task]:
    """``cairnq ls`` with search options: ``cq.search.find`` with them and ``ls``'s own."""
    query = check_query(
        tags=args.tag or None, where=where_pairs(args.where) or None, error=args.error,
        since=args.since, until=args.until, status=args.status, queue=args.queue,
        name=args.name, before=None, limit=min(args.limit, MAX_LIMIT),
        now_ms=client._clock().now_ms(),
    )  # fmt: skip
    return client.backend.run(find(query), write=False)
