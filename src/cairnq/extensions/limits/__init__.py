"""Limits: concurrency and rate limits every cairnq worker on the database enforces when
it claims.

A limit is stored in the database (``cairnq_limits``, migration
``x0006_limits.sql``): declared by a worker (``Worker(extensions=[Limits([...])])``)
or set by a client (``cq.limits.set``) or ``cairnq limits set``. A limited claim
counts the running tasks per key (for a path key, or none, from each running task's
own JSON) and writes, in the claim's own transaction, the rate buckets it drew on
(``cairnq_rate_buckets``) and the function keys it claimed (``cairnq_limit_keys``),
so every worker's next claim counts them.

Everything of the feature is in this folder: the model (``_model``), the operations
(``_ops``), the limited claim (``_claim``, the ``ClaimGate``), the worker's book of
limits in force (``_component``, the draw claimer its claims go through), its
statements (``sql/<dialect>/limits_*.sql``) and migrations
(``migrations/<dialect>/x0006_limits.sql``, ``x0015_limit_keys_unbound.sql``), the
``cairnq limits`` commands and the dashboard's page (``_surfaces/``, with
``templates/``). The CLI and the dashboard, above the extensions, import those two
by the names the extension declares (``Extension.cli``, ``Extension.pages``).
``cairnq.limits`` re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast
from weakref import WeakKeyDictionary

from ... import kernel
from ..._lazy import exports
from ..._sealing import refuse_payload_path
from .._base import Component, Extension, Hooks, Option, Part, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._component import LimitBook
    from ._component import check_declared as check_declared
    from ._fair import FAIR_MIGRATION as FAIR_MIGRATION
    from ._fair import FairShare
    from ._fair import check_fair as check_fair
    from ._model import Limit, LimitKeyError, LimitUsage
else:
    # The model and the worker's book are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "FAIR_MIGRATION": "._fair",
            "FairShare": "._fair",
            "Limit": "._model",
            "LimitBook": "._component",
            "LimitKeyError": "._model",
            "LimitUsage": "._model",
            "check_declared": "._component",
            "check_fair": "._fair",
        },
    )

__all__ = ["FairShare", "Limit", "LimitKeyError", "LimitUsage", "Limits", "LimitsComponent"]


def _check_declared(limits: Any) -> list[Limit]:
    from ._component import check_declared

    return check_declared(limits)


def _check_fair(shares: Any) -> list[FairShare]:
    from ._fair import check_fair

    return check_fair(shares)


class LimitsComponent(Part):
    """Prepare stores the declared limits, and refuses the start on a database
    without the limits tables when any are declared; the job reloads the stored
    limits once a second (none without the tables)."""

    name = "limits"

    def __init__(self, extension: Extension, book: LimitBook) -> None:
        self.extension = extension
        self.book = book

    async def prepare(self) -> None:
        from ._fair import FAIR_MIGRATION

        missing = await self.extension.amissing(self.book.backend)
        if missing and self.book.declared:
            raise self.extension.refusal(missing, f"{len(self.book.declared)} limit(s)")
        if self.book.fair_declared:
            applied = await self.book.backend.arun(kernel.applied_migrations(), write=False)
            if FAIR_MIGRATION not in applied:
                lacking = (*missing, FAIR_MIGRATION)
                raise self.extension.refusal(
                    lacking, f"{len(self.book.fair_declared)} fair share(s)"
                )
        await self.book.start(ready=not missing)
        self.job = self.book.job if self.book.enabled else None


class Limits(Extension):
    """Claims go through the run's limit book while a limit is in force; the limits a
    worker declares are stored when it starts.

    Args:
        declared: ``Limit`` values (``Limit.concurrency``, ``Limit.rate``) the worker
            stores in the database when it starts, enforced by every cairnq worker on
            it with the limits operators set there. A worker declaring limits refuses
            to start on a database without them (``SchemaIncomplete``).
        fair: ``FairShare`` values: queues whose workers are shared among the values
            of a key (tenants), stored when the worker starts and honoured by every
            cairnq worker claiming from the queue alone (see docs/fair-share.md).
            Needs migration ``x0022_fair_share.sql`` (``SchemaIncomplete`` without it).

    Example::

        worker = Worker(cq, extensions=[Limits([Limit.concurrency(2, queue="emails")])])
        worker = Worker(cq, queues=["reports"], extensions=[Limits(fair=[
            FairShare(queue="reports", key="payload.tenant"),
        ])])
    """

    name = "limits"
    migrations = (
        "x0006_limits.sql",
        "x0015_limit_keys_unbound.sql",
        "x0022_fair_share.sql",
        "x0027_fair_index.sql",
        "x0029_fair_rekey.sql",
    )
    optional = (
        "x0015_limit_keys_unbound.sql",
        "x0022_fair_share.sql",
        "x0027_fair_index.sql",
        "x0029_fair_rekey.sql",
    )
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_limits": "not_task_keyed",
        "cairnq_limit_keys": "swept",
        "cairnq_rate_buckets": "not_task_keyed",
        "cairnq_fair_shares": "not_task_keyed",
        "cairnq_fair_tasks": "trigger",
    }
    words = ("limit_", "claimgate", "cairnq_limits", "limitbook", "fairshare", "cairnq_fair")
    cli = "cairnq.extensions.limits._surfaces.cli"
    pages = "cairnq.extensions.limits._surfaces.pages"
    options: ClassVar[Mapping[str, Option]] = {
        "limits": Option(None, _check_declared),
        "fair": Option(None, _check_fair),
    }

    def __init__(
        self, declared: Iterable[Limit] | None = None, *, fair: Iterable[FairShare] | None = None
    ) -> None:
        given: dict[str, object] = {} if declared is None else {"limits": declared}
        if fair is not None:
            given["fair"] = fair
        super().__init__(**given)
        self._runs: WeakKeyDictionary[WorkerView, LimitBook] = WeakKeyDictionary()

    def book(self, worker: WorkerView) -> LimitBook:
        """The limit book of one run of ``worker``, which its draw claimer and its
        component share, holding the limits the worker declares."""
        found = self._runs.get(worker)
        if found is None:
            from ._component import LimitBook

            declared = cast("list[Limit]", worker.options["limits"])
            fair = cast("list[FairShare]", worker.options["fair"])
            if worker.codec.sealer is not None:
                for limit in declared or ():
                    refuse_payload_path(limit.key, f"limit {limit.id!r}")
                for share in fair or ():
                    refuse_payload_path(share.key, "fair share of queue " + repr(share.queue))
            found = self._runs[worker] = LimitBook(
                worker.backend, declared, worker.worker_id, report=worker.report, fair=fair
            )
        return found

    def hooks(self, worker: WorkerView) -> Hooks:
        # The book governs claims while a limit is in force.
        book = self.book(worker)
        return Hooks(draw_claimer=book, in_use=book.in_use)

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (LimitsComponent(self, self.book(worker)),)
