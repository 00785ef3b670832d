# generated from src/cairnq/extensions/snooze/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's snoozes, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

from ..._deprecated import renamed
from .._client_sync import ClientView
from . import _ops
from ._ops import Snoozes


class SyncSnooze:
    """``cq.snooze``: what tasks' snoozes (``ctx.snooze``, ``raise Snooze(...)``) left."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    def get(self, task_id: str) -> Snoozes | None:
        """How many times a task snoozed, and its latest snooze; ``None`` when it never did.

        A snoozed task is ``queued`` with ``run_at_ms`` at the snooze's end and
        its attempt given back.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.

        Example::

            snoozes = cq.snooze.get(task.id)
            if snoozes:
                print(snoozes.count, snoozes.wake_at_ms)
        """
        return self._client._run(_ops.snoozes(task_id), write=False)


class SyncSnoozeClient:
    """The client's ``snooze`` namespace, and its deprecated flat method."""

    @property
    def snooze(self: ClientView) -> SyncSnooze:
        """What tasks' snoozes left: ``get``."""
        return SyncSnooze(self)

    def snoozes(self: ClientView, task_id: str) -> Snoozes | None:
        """Deprecated: ``cq.snooze.get``, which see."""
        renamed("cq.snoozes(...)", "cq.snooze.get(...)")
        return SyncSnooze(self).get(task_id)
