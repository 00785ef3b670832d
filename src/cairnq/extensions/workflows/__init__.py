"""Workflows: tasks that run after others, graphs submitted at once, fan-out and fan-in.

A task submitted with dependencies (``submit(depends_on=...)``, ``submit_graph``,
``ctx.gather``) waits **parked** (``cairnq_parked``, its edges in
``cairnq_dependencies``) until its dependencies end; the transaction that ends a
task decides its parked dependents (the ``task_end`` hook, ``_ops.after_ended``;
in a worker, for the tasks its gate knows may have one), and the worker's sweep
decides what no such transaction did (``_component``).

Everything of the feature is in this folder: the model (``_model``: ``Graph``,
``Gathering``, ``tree_lines``), the operations (``_ops``), the worker's part, its
sweep and the gate with the run's state it reads (``_component``), the tasks a
client made others wait for lately (``_awaited``), the context's ``spawn``,
``gather`` and ``dependencies`` and the ``Gathering`` signal (``_context_async``,
its blocking twin generated), its statements
(``sql/<dialect>/workflows_*.sql``) and migrations (``migrations/<dialect>/``:
``x0008_workflows.sql``, ``x0010_dependencies_satisfied.sql``,
``x0013_workflows_forget.sql``, ``x0016_workflows_keep_success.sql``), and the
graph card of the dashboard's task page (``_graph``'s layout, ``_surfaces/pages.py``,
with ``templates/``), which the dashboard imports by the name the extension declares
(``Extension.pages``). ``cairnq.workflows`` re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar
from weakref import WeakKeyDictionary

from ..._lazy import exports
from ...protocol.steps import Op
from .._base import Component, Extension, Hooks, TaskRows, WorkerView
from .._context import Signal

if TYPE_CHECKING:
    from ._component import WorkflowsComponent, WorkflowsRun
    from ._component import WorkflowSweeper as WorkflowSweeper
    from ._component import gate as gate
    from ._context_async import settle_gathering as settle_gathering
    from ._model import (
        PARKED_RUN_AT_MS,
        POLICIES,
        Dependency,
        Edge,
        Gathering,
        Graph,
        GraphNode,
        Policy,
        Workflow,
    )
    from ._ops import after_ended as after_ended
    from ._ops import parked_count as parked_count
else:
    # The model, the operations and the worker's parts are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "PARKED_RUN_AT_MS": "._model",
            "POLICIES": "._model",
            "Dependency": "._model",
            "Edge": "._model",
            "Gathering": "._model",
            "Graph": "._model",
            "GraphNode": "._model",
            "Policy": "._model",
            "Workflow": "._model",
            "WorkflowSweeper": "._component",
            "WorkflowsComponent": "._component",
            "WorkflowsRun": "._component",
            "after_ended": "._ops",
            "gate": "._component",
            "parked_count": "._ops",
            "settle_gathering": "._context_async",
        },
    )

__all__ = [
    "PARKED_RUN_AT_MS",
    "POLICIES",
    "Dependency",
    "Edge",
    "Gathering",
    "Graph",
    "GraphNode",
    "Policy",
    "Workflow",
    "Workflows",
    "WorkflowsComponent",
]


class Workflows(Extension):
    name = "workflows"
    migrations = (
        "x0008_workflows.sql",
        "x0010_dependencies_satisfied.sql",
        "x0013_workflows_forget.sql",
        "x0016_workflows_keep_success.sql",
    )
    # Without x0016 every settlement decides dependents (``_component``).
    optional = ("x0013_workflows_forget.sql", "x0016_workflows_keep_success.sql")
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_dependencies": "trigger",
        "cairnq_dependencies_satisfied": "trigger",
        "cairnq_parked": "trigger",
    }
    words = ("workflow", "parked", "depend", "gathering", "spawn")
    cli = "cairnq.extensions.workflows._surfaces.cli"
    pages = "cairnq.extensions.workflows._surfaces.pages"

    def __init__(self) -> None:
        self._runs: WeakKeyDictionary[WorkerView, WorkflowsRun] = WeakKeyDictionary()

    def run(self, worker: WorkerView) -> WorkflowsRun:
        """The workflows state of one run of ``worker``, which its gate and its sweeper share."""
        found = self._runs.get(worker)
        if found is None:
            from ._component import WorkflowsRun

            found = self._runs[worker] = WorkflowsRun(worker.worker_id, worker.client)
        return found

    def hooks(self, worker: WorkerView) -> Hooks:
        from ._component import gate
        from ._ops import after_ended

        in_use, task_end_for = gate(self.run(worker))
        return Hooks(task_end=after_ended, task_end_for=task_end_for, in_use=in_use)

    def ending_hooks(self) -> Hooks:
        from ._ops import after_ended

        # Outside a worker run no look keeps a gate current: decide wherever ready.
        return Hooks(task_end=after_ended)

    def components(self, worker: WorkerView) -> Sequence[Component]:
        from ._component import WorkflowsComponent, WorkflowSweeper

        sweeper = WorkflowSweeper(worker.backend, self.run(worker), report=worker.report)
        return (WorkflowsComponent(sweeper),)

    def parked(self, queue: str | None) -> Op[dict[str, int]]:
        from ._ops import parked_count

        return parked_count(queue)

    def signals(self) -> Mapping[type[BaseException], Signal]:
        from ._context_async import settle_gathering
        from ._model import Gathering

        return {Gathering: settle_gathering}
