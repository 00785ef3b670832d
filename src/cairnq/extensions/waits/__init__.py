"""Durable waits: a handler waits for an event (``ctx.wait_for``) or sleeps
(``ctx.sleep``, ``ctx.sleep_until``) with its task parked, holding no worker slot and
spending no attempt; ``cq.events.send`` (and ``cairnq send``) sends the events.

Each wait is a row of ``cairnq_waits`` and each event one of
``cairnq_waits_mailbox`` (migration ``x0019_waits.sql``); a wait's row goes with its
task (a trigger), an event with its retention (the sends sweep expired ones). A send
given an id is remembered in ``cairnq_waits_sends`` (``x0025_waits_send_ids.sql``)
for its event's retention and at least a day, swept by the sends too.

No hook: a wait parks its task through the kernel's ``hand_back`` in the handler's
own owned write, and a send makes a parked task due through ``undefer``, so a
worker's claims and settlements run nothing of this extension. The operations
(``_ops``), the context's methods and the ``Waiting`` signal (``_context_async``,
its blocking twin generated), the client's ``cq.events`` (``_client_async``, twin
generated), the statements (``sql/<dialect>/waits_*.sql``) and the migration are
in this folder, its command and pages in ``_surfaces/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from ..._lazy import exports
from ...protocol.steps import Op
from .._base import Extension, TaskRows
from .._context import Signal

if TYPE_CHECKING:
    from ._context_async import Waiting, WaitTimeout
    from ._context_async import settle_waiting as settle_waiting
    from ._ops import DEFAULT_RETENTION_MS, PARKED_RUN_AT_MS, Sent, WaitRecord
    from ._ops import parked as parked
else:
    # The operations and the handler's signals are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "DEFAULT_RETENTION_MS": "._ops",
            "PARKED_RUN_AT_MS": "._ops",
            "Sent": "._ops",
            "WaitRecord": "._ops",
            "WaitTimeout": "._context_async",
            "Waiting": "._context_async",
            "parked": "._ops",
            "settle_waiting": "._context_async",
        },
    )

__all__ = [
    "DEFAULT_RETENTION_MS",
    "PARKED_RUN_AT_MS",
    "Sent",
    "WaitRecord",
    "WaitTimeout",
    "Waiting",
    "Waits",
]


class Waits(Extension):
    """Durable waits: ``ctx.wait_for``, ``ctx.sleep``, ``ctx.sleep_until``, ``cq.events``."""

    name = "waits"
    migrations = ("x0019_waits.sql", "x0025_waits_send_ids.sql")
    # Without x0025 every wait and send works but a send with an id (``_ops.send``).
    optional = ("x0025_waits_send_ids.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_waits": "trigger",
        "cairnq_waits_mailbox": "swept",
        "cairnq_waits_sends": "not_task_keyed",
    }
    words = ("sleep_until", "cairnq_waits", "waits_", "mailbox", "WaitTimeout")
    cli = "cairnq.extensions.waits._surfaces.cli"
    pages = "cairnq.extensions.waits._surfaces.pages"

    def parked(self, queue: str | None) -> Op[dict[str, int]]:
        from ._ops import parked

        return parked(queue)

    def signals(self) -> Mapping[type[BaseException], Signal]:
        from ._context_async import Waiting, settle_waiting

        return {Waiting: settle_waiting}
