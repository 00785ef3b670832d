"""The layout of a workflow's graph for the task page: layers, positions and edges.

Pure and deterministic: the same nodes and edges (in the same order) give the
same picture. A node's layer is the longest path to it from a root (a node no
edge points to), so every edge points down; a layer wider than ``per_row``
wraps onto more rows. Within a layer, nodes sit in the order of the mean
position of the nodes pointing to them, ties in input order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._ops import Workflow

MAX_NODES = 200
PER_ROW = 6
NODE_WIDTH = 168
NODE_HEIGHT = 40
GAP_X = 20
GAP_ROW = 14
GAP_LAYER = 44
MARGIN = 8
LABEL_CHARS = 22


@dataclass(frozen=True)
class Placed:
    """A drawn node: its task, its text and its box's top-left corner."""

    id: str
    label: str
    short_id: str
    status: str
    parked: bool
    current: bool
    layer: int
    x: int
    y: int


@dataclass(frozen=True)
class Line:
    """A drawn edge from ``source`` to ``target``: ``kind`` is ``after`` or ``child``."""

    source: str
    target: str
    kind: str
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Picture:
    """A laid-out graph: what to draw, the canvas size, and how many tasks were left out."""

    nodes: list[Placed]
    edges: list[Line]
    width: int
    height: int
    left_out: int
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


def layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each node's longest path from a root (``0`` for a root).

    Edges name ``(source, target)``; edges to or from unknown nodes and self-loops
    are ignored. Nodes on a cycle (which a workflow does not form) are placed
    one below the deepest of their already placed sources, in input order.
    """
    known = set(nodes)
    into: dict[str, list[str]] = {n: [] for n in nodes}
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for source, target in edges:
        usable = source in known and target in known and source != target
        if usable and source not in into[target]:
            into[target].append(source)
            out[source].append(target)
    waiting = {n: len(into[n]) for n in nodes}
    layer: dict[str, int] = {}
    ready = [n for n in nodes if waiting[n] == 0]
    while True:
        while ready:
            node = ready.pop(0)
            layer[node] = 1 + max((layer[s] for s in into[node]), default=-1)
            for target in out[node]:
                waiting[target] -= 1
                # A node placed to break a cycle keeps its layer (a parent gathering
                # its children stays above them).
                if waiting[target] == 0 and target not in layer:
                    ready.append(target)
        stuck = [n for n in nodes if n not in layer]
        if not stuck:
            return layer
        # A cycle: place its first node from the sources already placed, go on.
        node = stuck[0]
        layer[node] = 1 + max((layer[s] for s in into[node] if s in layer), default=-1)
        for target in out[node]:
            waiting[target] -= 1
            if waiting[target] == 0 and target not in layer:
                ready.append(target)


def layout(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, str]],
    *,
    labels: Mapping[str, str] | None = None,
    statuses: Mapping[str, str] | None = None,
    parked: frozenset[str] = frozenset(),
    current: str | None = None,
    per_row: int = PER_ROW,
) -> Picture:
    """Positions for ``nodes`` (ids, in a stable order) and ``edges`` ``(source, target, kind)``.

    Args:
        nodes: The node ids, in the order that breaks ties.
        edges: ``(source, target, kind)``; ``kind`` is ``after`` or ``child``.
        labels: The text of each node (its id when missing).
        statuses: Each node's status (its CSS class).
        parked: Nodes drawn as waiting for their dependencies.
        current: The node drawn highlighted.
        per_row: The most nodes on one row before a layer wraps.

    Returns:
        The placed nodes (by layer, then left to right) and edges (in input order).
    """
    labels = labels or {}
    statuses = statuses or {}
    layer_of = layers(nodes, [(s, t) for s, t, _ in edges])
    sources: dict[str, list[str]] = {n: [] for n in nodes}
    for source, target, _ in edges:
        if source in layer_of and target in layer_of and source != target:
            sources[target].append(source)
    index = {n: i for i, n in enumerate(nodes)}
    position: dict[str, float] = {}
    placed: dict[str, Placed] = {}
    depth = 1 + max(layer_of.values(), default=-1)
    y = MARGIN
    widest = 0
    for level in range(depth):
        members = [n for n in nodes if layer_of[n] == level]

        def mean_source(node: str) -> float:
            known = [position[s] for s in sources[node] if s in position]
            return sum(known) / len(known) if known else float(index[node])

        members.sort(key=lambda n: (mean_source(n), index[n]))
        for i, node in enumerate(members):
            row, column = divmod(i, per_row)
            x = MARGIN + column * (NODE_WIDTH + GAP_X)
            node_y = y + row * (NODE_HEIGHT + GAP_ROW)
            position[node] = float(i)
            placed[node] = Placed(
                node,
                _shorten(labels.get(node, node)),
                short_id(node),
                statuses.get(node, ""),
                node in parked,
                node == current,
                level,
                x,
                node_y,
            )
            widest = max(widest, x + NODE_WIDTH)
        rows = -(-len(members) // per_row)
        y += rows * (NODE_HEIGHT + GAP_ROW) - GAP_ROW + GAP_LAYER
    lines: list[Line] = []
    seen: set[tuple[str, str, str]] = set()
    for source, target, kind in edges:
        if source not in placed or target not in placed or source == target:
            continue
        if (source, target, kind) in seen:
            continue
        seen.add((source, target, kind))
        a, b = placed[source], placed[target]
        lines.append(
            Line(
                source,
                target,
                kind,
                a.x + NODE_WIDTH // 2,
                a.y + NODE_HEIGHT,
                b.x + NODE_WIDTH // 2,
                b.y,
            )
        )
    ordered = sorted(placed.values(), key=lambda p: (p.layer, p.y, p.x))
    height = y - GAP_LAYER + MARGIN if depth else 2 * MARGIN
    return Picture(ordered, lines, widest + MARGIN, height, 0)


def short_id(task_id: str) -> str:
    """The last eight characters of an id (the random part of a ULID-like id)."""
    return task_id[-8:]


def _shorten(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def belongs_to_workflow(workflow: Workflow, task_id: str) -> bool:
    """Whether the task has a parent, children, dependencies or dependents in ``workflow``."""
    if any(e.task_id == task_id or e.depends_on_id == task_id for e in workflow.edges):
        return True
    task = workflow.tasks.get(task_id)
    if task is not None and task.parent_id is not None:
        return True
    return any(t.parent_id == task_id for t in workflow.tasks.values())


def picture(workflow: Workflow, current: str, most: int = MAX_NODES) -> Picture:
    """The layout of ``workflow`` around ``current``: at most ``most`` tasks, oldest first.

    ``current`` is always drawn. Dependencies outside the workflow's root are drawn
    too; a purged dependency is not (its task is gone).
    """
    ordered = sorted(workflow.tasks.values(), key=lambda t: (t.created_at_ms, t.id))
    ids = [t.id for t in ordered]
    kept = ids[:most]
    if current in workflow.tasks and current not in kept and most > 0:
        kept = [*kept[: most - 1], current]
        kept.sort(key=ids.index)
    keep = set(kept)
    edges: list[tuple[str, str, str]] = []
    for task in ordered:
        if task.parent_id is not None and task.parent_id in keep and task.id in keep:
            edges.append((task.parent_id, task.id, "child"))
    for edge in workflow.edges:
        if edge.depends_on_id in keep and edge.task_id in keep:
            edges.append((edge.depends_on_id, edge.task_id, "after"))
    waiting = frozenset(
        e.task_id
        for e in workflow.edges
        if e.parked and e.task_id in keep and workflow.tasks[e.task_id].status == "queued"
    )
    drawn = layout(
        kept,
        edges,
        labels={t.id: t.name for t in ordered},
        statuses={t.id: t.status for t in ordered},
        parked=waiting,
        current=current,
    )
    return Picture(drawn.nodes, drawn.edges, drawn.width, drawn.height, len(ids) - len(kept))
