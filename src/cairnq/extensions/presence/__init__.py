"""Presence: each worker's row in ``cairnq_workers`` (and the task names it serves in
``cairnq_worker_names``), written while it runs and deleted once it has drained.

Everything of the feature is in this folder: the reads and writes (``_ops``: the
workers list, who serves what, the alive window), the statements
(``sql/<dialect>/presence_*.sql``), the migrations it owns (``migrations/<dialect>/``,
x0002 and x0004), the worker's part (``_component``), the orphan watch
(``_orphans``), the client's ``cq.presence`` and ``submit(warn_unserved=True)``'s check
(``_client_async``), and what the dashboard and ``cairnq top`` show of it
(``_surfaces``: the Workers page, the overview's workers tile and unserved notices,
top's ``unserved:`` lines).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from ..._lazy import exports
from .._base import Component, Extension, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._component import PresenceComponent as PresenceComponent
else:
    # The worker's parts are imported when first used.
    __getattr__, __dir__ = exports(__name__, {"PresenceComponent": "._component"})


class Presence(Extension):
    name = "presence"
    migrations = ("x0002_workers.sql", "x0004_worker_names.sql")
    # Without x0004 the row is written without the task names it serves.
    optional = ("x0004_worker_names.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_workers": "not_task_keyed",
        "cairnq_worker_names": "not_task_keyed",
    }
    words = ("presence", "worker_beat", "worker_start", "worker_gone", "cairnq_workers")
    says_when_missing = True  # its writer's line names cairnq_workers
    cli = "cairnq.extensions.presence._surfaces.cli"
    pages = "cairnq.extensions.presence._surfaces.pages"

    def components(self, worker: WorkerView) -> Sequence[Component]:
        from ._component import Presence as Writer
        from ._component import PresenceComponent

        writer = Writer(
            worker.backend,
            worker.worker_id,
            worker.queues,
            worker.concurrency,
            worker.report,
            names=worker.task_names,
        )
        return (PresenceComponent(writer),)
