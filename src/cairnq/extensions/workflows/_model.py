"""The model of workflows: graphs to submit, what is read back, and ``Gathering``.

``Graph`` describes tasks and the edges between them for ``CairnQ.submit_graph``;
``Dependency``, ``Workflow`` and ``Edge`` are what ``cq.workflows.dependencies`` and
``cq.workflows.get`` read back. ``Gathering`` is what ``ctx.gather`` raises to end the
attempt while its children run (let it propagate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidArgument, InvalidGraph
from ._ops import (
    PARKED_RUN_AT_MS,
    POLICIES,
    Dependency,
    Edge,
    Policy,
    Workflow,
    check_policy,
    dependency_id,
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
]


class Gathering(Exception):
    """Raised by ``ctx.gather`` when children are still running: the attempt is over.

    The parent is parked (queued, not due, its attempt not spent) and re-runs
    when every child has ended; its re-run's ``spawn`` calls return the same
    children and ``gather`` returns their results. Let it propagate out of the
    handler: the worker recognises it and records nothing more.
    """

    def __init__(self, task_id: str, waiting_on: int) -> None:
        super().__init__(f"task {task_id} waits for {waiting_on} child task(s)")
        self.task_id = task_id
        self.waiting_on = waiting_on


@dataclass
class GraphNode:
    """One node of a ``Graph``: ``submit``'s arguments and the nodes or tasks it runs after."""

    name: str
    task: Any
    payload: Any = None
    after: list[str] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    on_dependency_failure: Policy = "cancel"
    options: dict[str, Any] = field(default_factory=dict)


class Graph:
    """Tasks and their dependencies, stored in one transaction by ``submit_graph``.

    Node names are local to the graph; ``after`` names other nodes, and
    ``depends_on`` tasks already stored (``Task`` objects or ids).

    Example::

        graph = Graph()
        graph.add("fetch", "etl.fetch", {"day": "2024-05-01"})
        graph.add("clean", "etl.clean", after=["fetch"])
        graph.add("stats", "etl.stats", after=["fetch"])
        graph.add("report", "etl.report", after=["clean", "stats"])
        tasks = await cq.submit_graph(graph)
        print(tasks["report"].id)
    """

    def __init__(self) -> None:
        self.nodes: dict[str, GraphNode] = {}

    def add(
        self,
        name: str,
        task: Any,
        payload: Any = None,
        *,
        after: Sequence[str] = (),
        depends_on: Sequence[Any] = (),
        on_dependency_failure: str = "cancel",
        **options: Any,
    ) -> Graph:
        """Add a node; returns the graph (calls chain).

        Args:
            name: The node's name in this graph (the key of ``submit_graph``'s result).
            task: The task name, or a ``TaskDef``.
            payload: Any JSON value.
            after: Names of nodes this one runs after.
            depends_on: Stored tasks (or ids) this one runs after.
            on_dependency_failure: ``"cancel"``, ``"fail"`` or ``"run"`` (see ``submit``).
            **options: As for ``submit`` (``queue``, ``key``, ``priority``, ``delay_ms``...).

        Raises:
            InvalidArgument: a name used twice, a bad policy or a bad list.
        """
        if not isinstance(name, str) or not name:
            raise InvalidArgument("a graph node's name must be a non-empty string")
        if name in self.nodes:
            raise InvalidArgument(f"graph node {name!r} is defined twice")
        if isinstance(after, str) or isinstance(depends_on, str):
            raise InvalidArgument("after and depends_on must be lists, not a single string")
        for option in ("conn", "depends_on", "warn_unserved"):
            if option in options:
                raise InvalidArgument(f"a graph node does not take {option}")
        self.nodes[name] = GraphNode(
            name,
            task,
            payload,
            [str(a) for a in after],
            [dependency_id(d) for d in depends_on],
            check_policy(on_dependency_failure),
            dict(options),
        )
        return self

    @classmethod
    def of(cls, nodes: Any) -> Graph:
        """A graph from a ``Graph`` or a dict ``{name: {"task": ..., "after": [...], ...}}``.

        Raises:
            InvalidArgument: not one of those, or a node without ``task``.
        """
        if isinstance(nodes, Graph):
            return nodes
        if not isinstance(nodes, dict):
            raise InvalidArgument("submit_graph takes a Graph or a dict of node name to node")
        graph = cls()
        for name, node in nodes.items():
            if not isinstance(node, dict) or "task" not in node:
                raise InvalidArgument(f"graph node {name!r} must be a dict with a 'task'")
            fields = dict(node)
            graph.add(name, fields.pop("task"), fields.pop("payload", None), **fields)
        return graph


def unknown_nodes(graph: Graph) -> list[str]:
    """Names ``after`` uses that the graph does not define."""
    return sorted({a for node in graph.nodes.values() for a in node.after if a not in graph.nodes})


def check_graph(graph: Graph) -> None:
    """Raise ``InvalidGraph`` for an empty graph (the rest is checked when ordering)."""
    if not graph.nodes:
        raise InvalidGraph("the graph has no nodes")


def tree_lines(workflow: Workflow, focus: str | None = None) -> list[str]:
    """The workflow as indented lines: each task under its parent, with what it runs after.

    A line reads ``<id> <name> <status>``, then ``(parked)`` for a task still
    waiting, ``after <id> <status> [policy]`` per dependency, and ``<-`` on ``focus``.

    Example::

        01J... etl.fetch succeeded
        01J... etl.clean queued (parked) after 01J... running [cancel]
    """
    lines: list[str] = []
    parked = {e.task_id for e in workflow.edges if e.parked}

    def describe(task_id: str) -> str:
        task = workflow.tasks.get(task_id)
        return f"{task_id} (purged)" if task is None else f"{task_id} {task.status}"

    def walk(parent: str | None, depth: int, seen: set[str]) -> None:
        for task in workflow.children(parent):
            if task.id in seen:
                continue
            seen.add(task.id)
            words = [f"{'  ' * depth}{task.id} {task.name} {task.status}"]
            if task.id in parked and task.status == "queued":
                words.append("(parked)")
            for edge in workflow.after(task.id):
                words.append(f"after {describe(edge.depends_on_id)} [{edge.policy}]")
            if task.id == focus:
                words.append("<-")
            lines.append(" ".join(words))
            walk(task.id, depth + 1, seen)

    walk(None, 0, set())
    return lines
