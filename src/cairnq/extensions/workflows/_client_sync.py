# generated from src/cairnq/extensions/workflows/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's workflows, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ... import kernel
from ..._deprecated import renamed
from ...lineage import Lineage
from ...models import Task
from ...protocol.steps import Op
from .._client_sync import ClientView

if TYPE_CHECKING:
    from . import _ops
    from ._awaited import Awaited
    from ._model import Dependency, Graph, Workflow

    DependencyList = list[Dependency]

TaskMap = dict[str, Task]


class _Submitting(ClientView, Protocol):
    """A client that notes the tasks it makes others wait for (``_awaited``): a worker
    built on it decides their dependents in the settlements it prepares after the note."""

    _awaited: Awaited | None


def _store_nodes(client: _Submitting, nodes: list[_ops.Node], conn: Any) -> list[Task]:
    """Store ``nodes`` in one transaction, through the client's submit hooks and gate."""
    from . import _ops
    from ._awaited import note

    def build(specs: list[kernel.NewTask]) -> Op[list[Task]]:
        hooked = [dataclasses.replace(n, spec=s) for n, s in zip(nodes, specs, strict=True)]
        # Before the transaction: a settlement of a dependency that this client's worker
        # prepares from now on decides, one running while this transaction commits
        # included. One prepared before now leaves its dependents to the sweep.
        note(client, [d for n in hooked for d in _dependencies(hooked, n)])
        return _ops.submit_nodes(hooked)

    stored = client._submit_specs([n.spec for n in nodes], build, conn)
    # A node whose key returned an existing task stands for that task, whose id is known
    # only now: a settlement of it prepared before this note leaves its dependents to the
    # sweep.
    reused = {i for i, (n, t) in enumerate(zip(nodes, stored, strict=True)) if t.id != n.spec.id}
    if reused:
        note(client, [stored[i].id for n in nodes for i in n.after if i in reused])
    return stored


def _dependencies(nodes: list[_ops.Node], node: _ops.Node) -> list[str]:
    """The ids ``node`` is to wait for, as submitted."""
    return [nodes[i].spec.id for i in node.after] + list(node.external)


class SyncWorkflows:
    """``cq.workflows``: tasks that run after others, and graphs of them submitted at once."""

    __slots__ = ("_client",)

    def __init__(self, client: _Submitting) -> None:
        self._client = client

    def submit(
        self,
        graph: Graph | dict[str, Any],
        *,
        root_id: str | None = None,
        correlation_id: str | None = None,
        lineage: Lineage | None = None,
        conn: Any = None,
    ) -> TaskMap:
        """Submit a graph of tasks in one transaction: all are stored, or none.

        Every node runs after the nodes it names in ``after`` (and the stored
        tasks in ``depends_on``), as ``submit(depends_on=...)`` does; nodes
        without dependencies are due at once. The nodes share one root (the
        first node's id, unless ``root_id`` is given), so ``cairnq get ID --tree``
        and the dashboard show the graph together.

        Args:
            graph: A ``Graph``, or a dict ``{name: {"task": ..., "payload": ...,
                "after": [names], "depends_on": [tasks], "on_dependency_failure": ...,
                **submit options}}``.
            root_id: The root every node gets (default: the first node's id).
            correlation_id: The correlation id of every node without its own.
            lineage: A ``cairnq.Lineage``: ``root_id`` and ``correlation_id`` as one
                value (give it or them, not both); its ``parent_id`` goes to every
                node without its own.
            conn: PostgreSQL only: the application's connection (see ``submit``).

        Returns:
            The stored tasks by node name.

        Raises:
            InvalidGraph: a cycle, an ``after`` naming no node, or a ``depends_on``
                task that does not exist; nothing is written.
            InvalidArgument, SerializationError: a bad node; nothing is written.
            SchemaIncomplete: the database lacks the workflow tables.

        Example::

            tasks = cq.workflows.submit({
                "fetch": {"task": "etl.fetch"},
                "clean": {"task": "etl.clean", "after": ["fetch"]},
                "stats": {"task": "etl.stats", "after": ["fetch"]},
                "report": {"task": "etl.report", "after": ["clean", "stats"]},
            })
        """
        from . import _ops
        from ._model import Graph, check_graph

        built = Graph.of(graph)
        check_graph(built)
        order = _ops.topological_order(
            list(built.nodes), {name: node.after for name, node in built.nodes.items()}
        )
        index: dict[str, int] = {}
        nodes: list[_ops.Node] = []
        shared = Lineage.of(lineage, root_id=root_id, correlation_id=correlation_id)
        root = shared.root_id
        for name in order:
            node = built.nodes[name]
            options: dict[str, Any] = dict(node.options)
            own = Lineage.pop_from(options)
            options["lineage"] = own.over(dataclasses.replace(shared, root_id=root))
            spec = self._client._item({"task": node.task, "payload": node.payload, **options})
            if root is None:
                root = spec.root_id
            nodes.append(
                _ops.Node(
                    spec,
                    tuple(index[a] for a in node.after),
                    tuple(node.depends_on),
                    node.on_dependency_failure,
                )
            )
            index[name] = len(nodes) - 1
        stored = _store_nodes(self._client, nodes, conn)
        return {name: stored[index[name]] for name in built.nodes}

    def dependencies(self, task_id: str) -> DependencyList:
        """The tasks ``task_id`` runs after, each with its policy and current row.

        Returns:
            One ``Dependency`` per edge, in id order (its ``task`` is ``None``
            once purged); empty for a task without dependencies.

        Raises:
            SchemaIncomplete: the database lacks the workflow tables.
        """
        from . import _ops

        return self._client._run(_ops.dependencies(task_id), write=False)

    def get(self, task_id: str) -> Workflow | None:
        """The workflow of a task: every task of its root and their dependency edges.

        Returns:
            The ``Workflow`` (at most 1,000 tasks), or ``None`` when the task is unknown.
        """
        from . import _ops

        task = self._client.get(task_id)
        if task is None:
            return None
        return self._client._run(_ops.workflow(task), write=False)


class SyncWorkflowsClient:
    """The client's ``workflows`` namespace, ``submit_graph``, the deprecated flat reads
    (each the same as the namespace's method it names) and ``submit(depends_on=...)``'s store."""

    # The tasks this client made others wait for lately (``_awaited``): a worker built
    # on it decides their dependents in the settlements it prepares after the note,
    # before its look sees them.
    _awaited: Awaited | None = None

    @property
    def workflows(self: _Submitting) -> SyncWorkflows:
        """Tasks that run after others: ``submit`` (a graph), ``dependencies``, ``get``."""
        return SyncWorkflows(self)

    def submit_graph(
        self: _Submitting,
        graph: Graph | dict[str, Any],
        *,
        root_id: str | None = None,
        correlation_id: str | None = None,
        lineage: Lineage | None = None,
        conn: Any = None,
    ) -> TaskMap:
        """Submit a graph of tasks in one transaction, all or none: ``cq.workflows.submit``,
        which see. The client's ways to enqueue are ``submit``, ``submit_many`` and this.

        Example::

            tasks = cq.submit_graph({
                "fetch": {"task": "etl.fetch"},
                "report": {"task": "etl.report", "after": ["fetch"]},
            })
        """
        return SyncWorkflows(self).submit(
            graph, root_id=root_id, correlation_id=correlation_id, lineage=lineage, conn=conn
        )

    def dependencies(self: _Submitting, task_id: str) -> DependencyList:
        """Deprecated: ``cq.workflows.dependencies``."""
        renamed("cq.dependencies(...)", "cq.workflows.dependencies(...)")
        return SyncWorkflows(self).dependencies(task_id)

    def workflow(self: _Submitting, task_id: str) -> Workflow | None:
        """Deprecated: ``cq.workflows.get``."""
        renamed("cq.workflow(...)", "cq.workflows.get(...)")
        return SyncWorkflows(self).get(task_id)

    def _submit_after(
        self: _Submitting,
        spec: kernel.NewTask,
        depends_on: Iterable[Any],
        policy: Any,
        conn: Any,
    ) -> Task:
        """``submit(depends_on=...)``: store ``spec`` parked until its dependencies end."""
        from . import _ops

        ids = _ops.dependency_ids(depends_on)
        checked = _ops.check_policy(policy)
        if not ids:
            return self._submit_one(spec, conn)
        node = _ops.Node(spec, external=tuple(ids), policy=checked)
        stored = _store_nodes(self, [node], conn)
        return stored[0]
