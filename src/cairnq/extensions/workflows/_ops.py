"""Operations of workflows (extension tables ``cairnq_dependencies``, ``cairnq_parked``
and ``cairnq_dependencies_satisfied``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A task submitted with dependencies is inserted **parked**: ``queued`` with
``run_at_ms`` at ``PARKED_RUN_AT_MS`` (9999-12-31T00:00:00Z), so no worker
claims it, a reference SDK's included; the delay it was submitted with waits in
``cairnq_parked``. Deciding a parked task reads its dependencies' statuses:

- every dependency succeeded: released, due its delay from now;
- one ended failed or canceled (or was purged without having been seen succeeded)
  under policy ``"cancel"``: canceled;
  under ``"fail"``: failed with a ``dependency_failed`` envelope naming it
  (``"cancel"`` wins when both apply); a canceled or failed dependent is itself an
  ended dependency, so the decision walks down the graph;
- under ``"run"``, released once every dependency ended, whatever the outcomes.

A dependency seen succeeded while its dependent still waits is recorded in
``cairnq_dependencies_satisfied``, and counts as succeeded from then on, even once
retention (a reference SDK's purge included) deleted its row.

``after_ended`` decides in the transaction that ended a task: on a database with
the workflow tables, cairnq's settlements (``complete``, ``succeed``, ``fail``,
``complete_held``) and cancels (``cancel``, ``cancel_by_key``, a submit's
``conflict="replace"``) run it as their ``task_end`` hook (or through their
``workflows`` flag), from the worker, the clients and the store alike: after that
commit, a released dependent is already due, and one still waiting has the success
recorded. ``sweep`` decides and records what such a transaction did not (a
reference SDK's worker ended the dependency, or lease recovery did).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ... import kernel
from ..._checks import check_text
from ...errors import InvalidArgument, InvalidGraph, SchemaIncomplete, error_envelope
from ...kernel.points import ending_with
from ...models import TERMINAL_STATUSES, Lease, Task
from ...protocol.steps import NOW, Call, Op, Row

WORKFLOWS_MIGRATION = "x0008_workflows.sql"
SATISFIED_MIGRATION = "x0010_dependencies_satisfied.sql"
WORKFLOWS_MIGRATIONS = (WORKFLOWS_MIGRATION, SATISFIED_MIGRATION)
# A purge of a succeeded dependency records the success for its parked dependents.
KEEP_SUCCESS_MIGRATION = "x0016_workflows_keep_success.sql"
# 9999-12-31T00:00:00Z: a parked task is due then, which no worker's clock reaches.
PARKED_RUN_AT_MS = 253_402_214_400_000
SWEEP_LIMIT = 1000

Policy = Literal["cancel", "fail", "run"]
POLICIES: tuple[Policy, ...] = ("cancel", "fail", "run")


def check_policy(value: Any, what: str = "on_dependency_failure") -> Policy:
    """A dependency policy: ``"cancel"``, ``"fail"`` or ``"run"``."""
    if value == "cancel":
        return "cancel"
    if value == "fail":
        return "fail"
    if value == "run":
        return "run"
    raise InvalidArgument(f"{what} must be one of cancel, fail, run; got {value!r}")


def dependency_id(value: Any, what: str = "depends_on entry") -> str:
    """The task id a dependency names: a ``Task`` (anything with an ``id``) or an id."""
    found = getattr(value, "id", value)
    return check_text(found, what) or ""


def dependency_ids(values: Any) -> list[str]:
    """``depends_on`` as distinct task ids, in the order given."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgument("depends_on must be a list of tasks or task ids")
    out: list[str] = []
    for value in values:
        task_id = dependency_id(value)
        if task_id not in out:
            out.append(task_id)
    return out


# --- readiness ---------------------------------------------------------------------------


def workflows_ready() -> Op[bool]:
    """Whether the database has the workflow tables (migrations ``x0008_workflows.sql``
    and ``x0010_dependencies_satisfied.sql``)."""
    applied = yield from kernel.applied_migrations()
    return all(name in applied for name in WORKFLOWS_MIGRATIONS)


def missing_message(what: str, missing: Sequence[str] = WORKFLOWS_MIGRATIONS) -> str:
    which = f"migration {missing[0]}" if len(missing) == 1 else f"migrations {', '.join(missing)}"
    return (
        f"{what} needs cairnq's workflow tables ({which}), "
        "which this database lacks; run `cairnq migrate` to add them"
    )


def _require(what: str) -> Op[None]:
    applied = yield from kernel.applied_migrations()
    missing = tuple(name for name in WORKFLOWS_MIGRATIONS if name not in applied)
    if missing:
        raise SchemaIncomplete(missing_message(what, missing), missing=missing)


# --- submit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One task of a submitted graph: its submission and what it runs after.

    ``after`` names other nodes of the graph (by their index in the submission)
    and ``external`` ids of tasks already stored; ``policy`` applies to every one.
    """

    spec: kernel.NewTask
    after: tuple[int, ...] = ()
    external: tuple[str, ...] = ()
    policy: Policy = "cancel"


def topological_order(names: Sequence[str], after: Mapping[str, Sequence[str]]) -> list[str]:
    """``names`` with every node after the nodes it depends on (stable otherwise).

    Raises:
        InvalidGraph: a node depends on a node not in ``names``, or the edges form a cycle.
    """
    known = set(names)
    missing = sorted({d for n in names for d in after.get(n, ()) if d not in known})
    if missing:
        raise InvalidGraph(
            f"the graph depends on nodes it does not define: {', '.join(missing)}", missing=missing
        )
    waiting = {n: len(set(after.get(n, ()))) for n in names}
    dependents: dict[str, list[str]] = {n: [] for n in names}
    for n in names:
        for d in set(after.get(n, ())):
            dependents[d].append(n)
    ready = [n for n in names if waiting[n] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for child in dependents[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(order) < len(names):
        cycle = _a_cycle([n for n in names if waiting[n] > 0], after)
        raise InvalidGraph(f"the graph has a cycle: {' -> '.join(cycle)}", cycle=cycle)
    return order


def _a_cycle(left: Sequence[str], after: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle among ``left`` (nodes that never became ready), as a closed path."""
    pending = set(left)
    node = left[0]
    path: list[str] = []
    seen: dict[str, int] = {}
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(d for d in after.get(node, ()) if d in pending)
    loop = [*path[seen[node] :], node]
    return list(reversed(loop))


def submit_nodes(nodes: Sequence[Node]) -> Op[list[Task]]:
    """Submit tasks with their dependencies in one transaction; returns them in order.

    Nodes must come dependencies first (``topological_order``). A node whose key
    returns an existing task stands for that task: nothing of it is recorded
    again. Dependencies that already ended are decided at once.

    Raises:
        InvalidGraph: an external dependency does not exist; nothing is written.
        SchemaIncomplete: the database lacks the workflow tables.
        AlreadyExists: a key is taken under ``conflict="reject"``.
    """
    yield from _require("depends_on (or a graph of tasks)")
    own = {node.spec.id for node in nodes}
    external = sorted({d for node in nodes for d in node.external if d not in own})
    if external:
        # Locked (PostgreSQL), so a dependency cannot end between this read and the
        # commit without its transaction then seeing the edges recorded here.
        found = yield Call("lock_tasks", {"ids": external})
        missing = sorted(set(external) - {str(r["id"]) for r in found})
        if missing:
            raise InvalidGraph(
                f"depends_on names tasks that do not exist (or were purged): {', '.join(missing)}",
                missing=missing,
            )
    stored = yield from kernel.submit_many(
        [node.spec for node in nodes], points=ending_with(after_ended)
    )
    actual = [task.id for task in stored]
    edges: list[list[str]] = []
    parked: list[list[Any]] = []
    for node, task in zip(nodes, stored, strict=True):
        if task.id != node.spec.id:
            continue  # a reused key: the existing task stays as it is
        ids = [actual[i] for i in node.after] + list(node.external)
        ids = list(dict.fromkeys(i for i in ids if i != task.id))
        if ids:
            edges.extend([task.id, d, node.policy] for d in ids)
            parked.append([task.id, "dependencies", node.spec.delay_ms])
    if not parked:
        return list(stored)
    yield Call("workflows_edges_put", {"rows": _json(edges)})
    yield Call("workflows_parked_put", {"rows": _json(parked), "now_ms": NOW})
    ids = [str(p[0]) for p in parked]
    rows = yield from kernel.defer(ids, PARKED_RUN_AT_MS)
    latest = {str(r["id"]): Task.from_row(r) for r in rows}
    changed = yield from _decide_rounds([], ids)
    latest.update({str(r["id"]): Task.from_row(r) for r in changed})
    return [latest.get(task.id, task) for task in stored]


def _json(rows: Any) -> str:
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


# --- deciding ----------------------------------------------------------------------------


def after_ended(rows: Iterable[Row]) -> Op[list[Row]]:
    """Decide the parked dependents of the tasks in ``rows`` that just ended.

    Run in the transaction that ended them. One statement when none of them has
    a parked dependent. Returns the rows of the dependents it changed.
    """
    ended = [str(r["id"]) for r in rows if r["status"] in TERMINAL_STATUSES]
    if not ended:
        return []
    return (yield from _decide_rounds(ended, []))


def _decide_rounds(ended: list[str], candidates: list[str]) -> Op[list[Row]]:
    """Decide parked tasks round by round: a dependent canceled or failed by one round
    is an ended dependency for the next. The successes of a task left waiting are
    recorded (``workflows_satisfy``), so a purge of its dependencies cannot undo them."""
    changed: list[Row] = []
    while ended or candidates:
        locked = yield Call("workflows_lock_parked", {"ended": ended, "candidates": candidates})
        ids = [str(r["task_id"]) for r in locked]
        delays = {str(r["task_id"]): int(r["delay_ms"]) for r in locked}
        ended, candidates = [], []
        if not ids:
            break
        edges = yield Call("workflows_decide", {"ids": ids})
        release, cancel, fail, gone = decide(edges)
        decided = release + cancel + [task_id for task_id, _ in fail] + gone
        # A task left waiting keeps its dependencies' successes whatever retention deletes.
        waiting = set(ids) - set(decided)
        fresh = [
            [str(r["task_id"]), str(r["depends_on_id"])]
            for r in edges
            if str(r["task_id"]) in waiting
            and r["depends_on_status"] == "succeeded"
            and not r["satisfied"]
        ]
        if fresh:
            yield Call("workflows_satisfy", {"rows": _json(fresh)})
        if release:
            released = yield from kernel.undefer({i: delays[i] for i in release}, PARKED_RUN_AT_MS)
            changed.extend(released)
        for task_id in cancel:
            rows = yield from kernel.cancel_rows(task_id)
            changed.extend(rows)
            ended.extend(str(r["id"]) for r in rows if r["status"] in TERMINAL_STATUSES)
        for task_id, error in fail:
            rows = yield from kernel.fail_queued(task_id, error)
            changed.extend(rows)
            ended.extend(str(r["id"]) for r in rows)
        if decided:
            yield Call("workflows_unpark", {"ids": decided})
    return changed


def dependency_failed_error(task_id: str, dependency: str, status: str | None) -> str:
    """The envelope (encoded) of a task failed because a dependency ended badly."""
    how = "was purged" if status is None else f"ended {status}"
    return json.dumps(
        error_envelope(
            "DependencyFailed",
            "dependency_failed",
            f"dependency {dependency} {how}, so task {task_id} was failed without running "
            "(on_dependency_failure='fail')",
            retryable=False,
            details={"dependency": dependency, "dependency_status": status},
        ),
        separators=(",", ":"),
    )


def decide(
    edges: Sequence[Row],
) -> tuple[list[str], list[str], list[tuple[str, str]], list[str]]:
    """Sort parked tasks by the statuses of their dependencies (``workflows_decide`` rows).

    Returns ``(release, cancel, fail, gone)``: tasks to release, to cancel, to
    fail (with the encoded envelope), and tasks no longer queued to forget.
    Tasks with a dependency still queued or running and none ended badly under
    ``cancel`` or ``fail`` appear in none. A dependency recorded satisfied counts as
    succeeded whether its row is still there or was purged; one purged without that
    record counts as ended badly.
    """
    by_task: dict[str, list[Row]] = {}
    for row in edges:
        by_task.setdefault(str(row["task_id"]), []).append(row)
    release: list[str] = []
    cancel: list[str] = []
    fail: list[tuple[str, str]] = []
    gone: list[str] = []
    for task_id, rows in by_task.items():
        if rows[0]["status"] != "queued":
            gone.append(task_id)
            continue
        deps = [r for r in rows if r["depends_on_id"] is not None]
        bad = [
            r
            for r in deps
            if not r["satisfied"]
            and (r["depends_on_status"] is None or r["depends_on_status"] in ("failed", "canceled"))
        ]
        if any(r["policy"] == "cancel" for r in bad):
            cancel.append(task_id)
        elif any(r["policy"] == "fail" for r in bad):
            first = next(r for r in bad if r["policy"] == "fail")
            error = dependency_failed_error(
                task_id, str(first["depends_on_id"]), first["depends_on_status"]
            )
            fail.append((task_id, error))
        elif all(
            r["depends_on_status"] is None or r["depends_on_status"] in TERMINAL_STATUSES
            for r in deps
        ):
            release.append(task_id)
    return release, cancel, fail, gone


def waited_on_by_parked(limit: int) -> Op[frozenset[str] | None]:
    """The tasks some parked task waits on (ended ones included): a settlement of any
    other has no dependent to decide. ``None`` when parked tasks have more than
    ``limit`` dependency edges (any task may then have one). Reads the parked tasks'
    edges alone, never those of tasks no longer parked."""
    rows = yield Call("workflows_waited_on", {"limit": limit + 1})
    if sum(int(r["edges"]) for r in rows) > limit:
        return None
    return frozenset(str(r["depends_on_id"]) for r in rows)


def parked_count(queue: str | None) -> Op[dict[str, int]]:
    """Per queue (``queue`` alone when given), the tasks parked now on their dependencies
    or on the children they gather (queued, not yet due)."""
    rows = yield Call("workflows_parked_count", {"queue": queue, "now_ms": NOW})
    return {str(r["queue"]): int(r["parked"]) for r in rows}


def sweep(limit: int = SWEEP_LIMIT) -> Op[list[Row]]:
    """Decide parked tasks whose dependencies ended in a transaction that did not.

    The fallback for a dependency ended by a reference SDK's worker (or by a path
    without the decision, such as lease recovery). Returns the changed rows;
    nothing on a database without the workflow tables.
    """
    ready = yield from workflows_ready()
    if not ready:
        return []
    changed, _ = yield from sweep_turn(limit)
    return changed


def sweep_turn(limit: int = SWEEP_LIMIT) -> Op[tuple[list[Row], bool]]:
    """``sweep`` on a database known to have the workflow tables (no ledger read), and
    whether it read ``limit`` stalled tasks (more may wait: a turn that only recorded
    successes changed no task)."""
    rows = yield Call("workflows_stalled", {"limit": limit})
    ids = [str(r["task_id"]) for r in rows]
    if not ids:
        return [], False
    changed = yield from _decide_rounds([], ids)
    return changed, len(ids) >= limit


# --- fan-out and fan-in ------------------------------------------------------------------


def spawn_key(parent_id: str, index: int) -> str:
    """The key of a parent's ``index``-th spawned child: the same on every run of the parent."""
    return f"cairnq.spawn:{parent_id}:{index}"


def spawn(spec: kernel.NewTask) -> Op[Task]:
    """Submit a child under its spawn key, or return the task the key already points at
    (whatever its status): a re-run of the parent gets the same children."""
    yield from _require("spawn")
    task = yield from kernel.submit_first(spec)
    return task


@dataclass(frozen=True)
class Gathered:
    """What ``gather`` found: the children when all ended, else the parent's parked row."""

    children: list[Task] | None
    parked: Row | None


def gather(lease: Lease, worker_id: str, child_ids: Sequence[str]) -> Op[Gathered]:
    """The children when every one ended; else park the owned attempt until they do.

    Parking hands the attempt back unspent (as a snooze does), fenced on the lease,
    and records the parent as depending on each child under policy ``"run"``:
    the last child to end releases it, and its re-run gathers again.

    Raises:
        InvalidGraph: a child does not exist; nothing is written.
        LostLease: the attempt is no longer owned; nothing is written.
        SchemaIncomplete: the database lacks the workflow tables.
    """
    yield from _require("gather")
    ids = list(dict.fromkeys(child_ids))
    locked: Sequence[Row] = []
    if ids:
        locked = yield Call("lock_tasks", {"ids": sorted(ids)})
    status = {str(r["id"]): str(r["status"]) for r in locked}
    missing = [i for i in ids if i not in status]
    if missing:
        raise InvalidGraph(
            f"gather names tasks that do not exist (or were purged): {', '.join(missing)}",
            missing=missing,
        )
    if all(status[i] in TERMINAL_STATUSES for i in ids):
        rows: Sequence[Row] = []
        if ids:
            rows = yield Call("get_many", {"ids": ids})
        by_id = {str(r["id"]): Task.from_row(r) for r in rows}
        return Gathered([by_id[i] for i in ids], None)
    row = yield from kernel.hand_back(lease, worker_id, run_at_ms=PARKED_RUN_AT_MS)
    if row["status"] != "queued":
        return Gathered(None, row)
    yield Call("workflows_edges_put", {"rows": _json([[lease.id, i, "run"] for i in ids])})
    yield Call("workflows_parked_put", {"rows": _json([[lease.id, "gather", 0]]), "now_ms": NOW})
    return Gathered(None, row)


# --- reads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dependency:
    """One dependency of a task: its id, the policy, and the task (``None`` once purged)."""

    id: str
    policy: str
    task: Task | None

    @property
    def status(self) -> str | None:
        return None if self.task is None else self.task.status


def dependencies(task_id: Any) -> Op[list[Dependency]]:
    """A task's dependencies, in id order (empty for a task without any).

    Raises:
        SchemaIncomplete: the database lacks the workflow tables.
    """
    return _dependencies(check_text(task_id, "task id") or "")


def _dependencies(task_id: str) -> Op[list[Dependency]]:
    yield from _require("dependencies")
    rows = yield Call("workflows_dependencies", {"id": task_id})
    return [
        Dependency(
            str(r["depends_on_id"]),
            str(r["policy"]),
            None if r["id"] is None else Task.from_row(r),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Edge:
    """A dependency edge: ``task_id`` runs after ``depends_on_id`` (``parked``: still waiting)."""

    task_id: str
    depends_on_id: str
    policy: str
    parked: bool


@dataclass(frozen=True)
class Workflow:
    """A task's workflow: the tasks sharing its root, and the dependency edges among them.

    ``tasks`` also holds dependencies outside the root (another graph's task).
    """

    root_id: str
    tasks: dict[str, Task]
    edges: list[Edge]

    def children(self, task_id: str | None) -> list[Task]:
        """Tasks whose parent is ``task_id`` (``None``: the tasks without a parent in here),
        each after the tasks it depends on, then oldest first."""
        if task_id is None:
            found = [
                t
                for t in self.tasks.values()
                if t.parent_id is None or t.parent_id not in self.tasks
            ]
        else:
            found = [t for t in self.tasks.values() if t.parent_id == task_id]
        depth = self._depths()
        return sorted(found, key=lambda t: (depth.get(t.id, 0), t.created_at_ms, t.id))

    def _depths(self) -> dict[str, int]:
        """Each task's longest chain of dependencies (0 for a task without any)."""
        after: dict[str, list[str]] = {}
        for edge in self.edges:
            after.setdefault(edge.task_id, []).append(edge.depends_on_id)
        depth: dict[str, int] = {}

        def of(task_id: str, trail: frozenset[str]) -> int:
            if task_id not in depth:
                parents = [d for d in after.get(task_id, ()) if d not in trail]
                depth[task_id] = 1 + max((of(d, trail | {task_id}) for d in parents), default=-1)
            return depth[task_id]

        for task_id in self.tasks:
            of(task_id, frozenset())
        return depth

    def after(self, task_id: str) -> list[Edge]:
        """The edges of the tasks ``task_id`` runs after."""
        return [e for e in self.edges if e.task_id == task_id]


MAX_WORKFLOW_TASKS = 1000


def workflow(task: Task) -> Op[Workflow]:
    """The workflow ``task`` belongs to (at most 1,000 tasks of its root, oldest first).

    On a database without the workflow tables, the tasks with no edges.
    """
    root = task.root_id or task.id
    listed = yield from kernel.list_tasks(root_id=root, limit=MAX_WORKFLOW_TASKS)
    tasks = {t.id: t for t in sorted(listed, key=lambda t: (t.created_at_ms, t.id))}
    tasks.setdefault(task.id, task)
    ready = yield from workflows_ready()
    edges: list[Edge] = []
    if ready:
        rows = yield Call("workflows_edges", {"ids": sorted(tasks)})
        edges = [
            Edge(str(r["task_id"]), str(r["depends_on_id"]), str(r["policy"]), bool(r["parked"]))
            for r in rows
        ]
        outside = sorted({e.depends_on_id for e in edges} | {e.task_id for e in edges})
        outside = [i for i in outside if i not in tasks]
        if outside:
            more = yield Call("get_many", {"ids": outside})
            tasks.update({str(r["id"]): Task.from_row(r) for r in more})
    return Workflow(root, tasks, edges)
