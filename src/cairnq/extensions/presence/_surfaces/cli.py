"""The ``unserved:`` lines of ``cairnq top`` (``top_section``): due queued tasks of a
name no live cairnq worker serves on their queue. Presence adds no command."""

from __future__ import annotations

from collections.abc import Sequence

from ....client import SyncCairnQ
from ....models import UnservedTasks
from ....top import Section


def unserved_lines(found: Sequence[UnservedTasks]) -> list[str]:
    """One ``unserved: ...`` line per (queue, name) no live worker serves."""
    return [f"unserved: {item.describe()}" for item in found]


def top_section(client: SyncCairnQ, *, queue: str | None, now_ms: int) -> Section | None:
    """``cairnq top``'s ``unserved:`` lines, under the queues (none when every due task
    is served, or the database has no presence table)."""
    return Section(unserved_lines(client.presence.unserved(queue=queue)))
