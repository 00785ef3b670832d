# generated from src/cairnq/client/_async.py by scripts/generate_sync.py; do not edit
"""The client's operations, blocking: ``SyncCairnQ`` is built on them."""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from .. import kernel
from .._checks import check_int, check_names
from .._wakeups import LIVE_WAIT_S, Subscription, wants_done
from ..backends import Backend
from ..backpressure import QueueGate
from ..errors import CairnQError, InvalidArgument
from ..extensions.history import _ops as _history
from ..extensions.limits import _ops as _limits
from ..extensions.limits._model import Limit
from ..extensions.pauses import _ops as _pauses
from ..extensions.pauses._ops import Pause, PauseList
from ..extensions.presence import _ops as _presence
from ..extensions.schedules import _ops as _schedules
from ..extensions.schedules._model import DEFAULT_CATCH_UP_MS, Schedule, ScheduleSpec
from ..extensions.snooze import _ops as _snooze
from ..extensions.steps import _ops as _steps
from ..extensions.workflows import _ops as _workflows
from ..extensions.workflows._model import Dependency, Graph, Workflow, check_graph
from ..hooks import after_submit, before_submit
from ..kernel import views as _reads
from ..kernel.procedures import Procedure, follow
from ..kernel.retention import Retention, SyncRetentionSweeper
from ..models import Task, TaskDef, TaskPage, TaskRef
from ..protocol.steps import Emit, Op
from ..store import TaskStore
from ._core import (
    DEFAULT_MAX_POLL_MS,
    DEFAULT_POLL_MS,
    DEFAULT_WAIT_TIMEOUT_MS,
    DEFAULT_WATCH_POLL_MS,
    WATCH_BUFFER,
    ActivityList,
    AttemptList,
    IdList,
    LimitList,
    LimitUsageList,
    ScheduleList,
    SlotList,
    StepList,
    SubmitItem,
    SummaryList,
    TaskList,
    UnservedList,
    WatchSignal,
    WorkerList,
    _ClientCore,
    _outcome,
    _waiting,
    task_or_name,
)

T = TypeVar("T")
C = TypeVar("C", bound="SyncOperations")


class SyncOperations(_ClientCore):
    """Every operation of the client; the client class adds what only its half has."""

    _RUN_ON = "run_on"

    def __init__(
        self,
        backend: Backend | TaskStore | str | os.PathLike[str],
        *,
        retention: Retention | int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(backend, **options)
        policy = Retention.of(retention)
        self.sweeper = SyncRetentionSweeper(self.backend, policy) if policy else None

    def open(self: C) -> C:
        """Connect and migrate now rather than on first use; start retention if configured."""
        self.backend.open()
        if self.sweeper is not None and not self.sweeper.running:
            self.sweeper.start()
        return self

    def sweep(self) -> int:
        """Apply the retention policy now, batch by batch; returns the rows deleted.

        Raises:
            InvalidArgument: this client has no ``retention``.
        """
        if self.sweeper is None:
            raise InvalidArgument("this client has no retention policy; use purge() instead")
        self.backend.open()
        return self.sweeper.sweep()

    def close(self) -> None:
        """Stop retention, then close the backend if this client created it."""
        if self.sweeper is not None:
            self.sweeper.stop()
        if self._owns_backend:
            self.backend.close()

    def __enter__(self: C) -> C:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, op: Op[T], *, write: bool) -> T:
        return self.backend.run(op, write=write)

    def submit(
        self,
        task: str | TaskDef[Any, Any] | None = None,
        payload: Any = None,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        key: str | None = None,
        queue: str | None = None,
        conflict: str = "reuse",
        max_attempts: int | None = None,
        priority: int | None = None,
        metadata: Any = None,
        delay_ms: int = 0,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        conn: Any = None,
        warn_unserved: bool = False,
        depends_on: Iterable[Any] | None = None,
        on_dependency_failure: str = "cancel",
    ) -> Task:
        """Enqueue a task.

        Args:
            task: The handler name, or a ``TaskDef`` (its queue, max_attempts and
                priority become the defaults).
            payload: Any JSON value (``None`` stores ``{}``).
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            key: Idempotency key; ``conflict`` says what happens when it is taken.
            queue: Queue name (``"default"``).
            conflict: ``"reuse"`` (return the live task), ``"reuse-succeeded"``
                (also return a succeeded one), ``"reject"`` (raise ``AlreadyExists``)
                or ``"replace"`` (cancel the live task, enqueue anew).
            max_attempts: Runs allowed, counting crashed ones (3).
            priority: Higher runs first (0).
            metadata: Any JSON value, opaque to cairnq (``{}``).
            delay_ms: Earliest start, from now.
            parent_id, root_id, correlation_id: Lineage (root defaults to the task itself).
            conn: PostgreSQL only: the application's psycopg connection. The task is
                written in that connection's transaction: visible when it commits,
                gone if it rolls back.
            warn_unserved: After storing a queued task, check that a live cairnq
                worker serves its name on its queue; if none does, log a warning
                (logger ``cairnq.client``) and emit an ``UnservedTaskWarning``. The
                task stays submitted either way. Off by default: an application
                often submits before its workers start, and workers of other SDKs
                publish no presence, so a queue they alone serve would warn. The
                ``cairnq submit`` command turns it on (``--no-warn-unserved``).
            depends_on: Tasks (``Task`` objects or ids) this one runs after: it is
                stored parked (queued, due 9999-12-31, so no worker claims it) and
                released, due ``delay_ms`` later, in the transaction where the last
                of them succeeds. Needs the workflow tables (``cairnq migrate``).
            on_dependency_failure: When a dependency ends failed or canceled:
                ``"cancel"`` this task (and, in turn, what depends on it),
                ``"fail"`` it with a ``dependency_failed`` error, or ``"run"`` it
                once every dependency ended (``ctx.dependencies()`` shows how).

        Returns:
            The stored task (for a reused key, the existing one).

        Raises:
            InvalidArgument: a bad name, queue, key or number, or both ``task``
                and ``name``; nothing is written.
            SerializationError: payload or metadata is not portable JSON.
            AlreadyExists: the key is taken and ``conflict="reject"``.
            UnsupportedBackend: ``conn`` given on a backend without shared connections.
            InvalidGraph: a dependency does not exist (or was purged); nothing is written.
            SchemaIncomplete: ``depends_on`` on a database without the workflow tables.

        Example::

            task = cq.submit("email.send", {"to": "ada@example.com"}, warn_unserved=True)
            report = cq.submit("report.build", depends_on=[task])
        """
        spec = self._new_task(
            task_or_name(task, name, "submit"),
            payload,
            key=key,
            queue=queue,
            conflict=conflict,
            max_attempts=max_attempts,
            priority=priority,
            metadata=metadata,
            delay_ms=delay_ms,
            parent_id=parent_id,
            root_id=root_id,
            correlation_id=correlation_id,
        )
        if depends_on is not None:
            stored = self._submit_after(spec, depends_on, on_dependency_failure, conn)
        else:
            stored = self._submit_spec(spec, conn, self.gate)
        if warn_unserved and stored.is_queued:
            self._check_served(stored)
        return stored

    def _check_served(self, task: Task) -> None:
        try:
            workers = self._run(_presence.serving(task.queue, task.name), write=False)
            served = None
            if workers == []:
                served = self._run(_presence.served(), write=False)
        except CairnQError as exc:
            # The task is stored: a failed check must not look like a failed submit.
            self._check_failed(task, exc)
            return
        self._report_served(task, workers, served)

    def unserved(
        self, *, within_ms: int = _presence.ALIVE_WINDOW_MS, queue: str | None = None
    ) -> UnservedList:
        """Due queued tasks that no live cairnq worker serves, grouped by queue and name.

        A cairnq worker publishes the queues and task names it serves while it runs
        (the presence tables); a (queue, name) pair is unserved when no worker seen
        within ``within_ms`` has that queue and that name. A worker that publishes
        no names (an older cairnq) counts as serving every name on its queues;
        workers of other SDKs publish nothing, so tasks they alone serve are listed.
        The read costs an index seek per queue and per distinct queued name, plus a
        count (capped at 10,000) per unserved pair; served backlogs are not read.

        Args:
            within_ms: How recently a worker must have been seen (a minute, the
                dashboard's alive window).
            queue: Only this queue.

        Returns:
            One ``UnservedTasks`` per (queue, name), sorted by queue then name;
            empty when the database has no presence table (another SDK's schema).

        Raises:
            InvalidArgument: a bad window or queue.

        Example::

            for item in cq.unserved():
                print(item.describe())   # emial.send on default: 3 queued, ...
        """
        queues = None if queue is None else [queue]
        return self._run(_presence.unserved(within_ms=within_ms, queues=queues), write=False)

    def _submit_spec(self, spec: kernel.NewTask, conn: Any, gate: QueueGate) -> Task:
        if not self.submit_hooks:
            return self._store_spec(spec, conn, gate)
        (spec,), finishers = before_submit(self.submit_hooks, [spec], self.codec)
        try:
            stored = self._store_spec(spec, conn, gate)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, [stored], None)
        return stored

    def _store_spec(self, spec: kernel.NewTask, conn: Any, gate: QueueGate) -> Task:
        if gate.limit_for(spec.queue) is not None:
            self._follow(gate.admit(spec.queue))
        if spec.key is None:
            op = kernel.insert(spec)
        else:
            op = kernel.submit(spec, points=self._replaced_end([spec]))
        if conn is not None:
            stored: Task = self._transactional(conn)(conn, op)
            return stored
        return self._run(op, write=True)

    def _submit_after(
        self, spec: kernel.NewTask, depends_on: Iterable[Any], policy: Any, conn: Any
    ) -> Task:
        ids = _workflows.dependency_ids(depends_on)
        checked = _workflows.check_policy(policy)
        if not ids:
            return self._submit_spec(spec, conn, self.gate)
        node = _workflows.Node(spec, external=tuple(ids), policy=checked)
        stored = self._store_nodes([node], conn)
        return stored[0]

    def _store_nodes(self, nodes: list[_workflows.Node], conn: Any) -> TaskList:
        finishers = None
        if self.submit_hooks:
            specs, finishers = before_submit(self.submit_hooks, [n.spec for n in nodes], self.codec)
            nodes = [dataclasses.replace(n, spec=s) for n, s in zip(nodes, specs, strict=True)]
        for queue, count in Counter(n.spec.queue for n in nodes).items():
            if self.gate.limit_for(queue) is not None:
                self._follow(self.gate.admit(queue, count))
        op, self.submitted_dependents = _workflows.submit_nodes(nodes), True
        try:
            if conn is not None:
                stored: TaskList = self._transactional(conn)(conn, op)
            else:
                stored = self._run(op, write=True)
        except BaseException as exc:
            if finishers is not None:
                after_submit(finishers, None, exc)
            raise
        if finishers is not None:
            after_submit(finishers, stored, None)
        return stored

    def submit_graph(
        self,
        graph: Graph | dict[str, Any],
        *,
        root_id: str | None = None,
        correlation_id: str | None = None,
        conn: Any = None,
    ) -> dict[str, Task]:
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
            conn: PostgreSQL only: the application's connection (see ``submit``).

        Returns:
            The stored tasks by node name.

        Raises:
            InvalidGraph: a cycle, an ``after`` naming no node, or a ``depends_on``
                task that does not exist; nothing is written.
            InvalidArgument, SerializationError: a bad node; nothing is written.
            SchemaIncomplete: the database lacks the workflow tables.

        Example::

            tasks = cq.submit_graph({
                "fetch": {"task": "etl.fetch"},
                "clean": {"task": "etl.clean", "after": ["fetch"]},
                "stats": {"task": "etl.stats", "after": ["fetch"]},
                "report": {"task": "etl.report", "after": ["clean", "stats"]},
            })
        """
        built = Graph.of(graph)
        check_graph(built)
        order = _workflows.topological_order(
            list(built.nodes), {name: node.after for name, node in built.nodes.items()}
        )
        index: dict[str, int] = {}
        nodes: list[_workflows.Node] = []
        root = root_id
        for name in order:
            node = built.nodes[name]
            options: dict[str, Any] = {
                "root_id": root,
                "correlation_id": correlation_id,
                **node.options,
            }
            spec = self._item({"task": node.task, "payload": node.payload, **options})
            if root is None:
                root = spec.root_id
            nodes.append(
                _workflows.Node(
                    spec,
                    tuple(index[a] for a in node.after),
                    tuple(node.depends_on),
                    node.on_dependency_failure,
                )
            )
            index[name] = len(nodes) - 1
        stored = self._store_nodes(nodes, conn)
        return {name: stored[index[name]] for name in built.nodes}

    def dependencies(self, task_id: str) -> list[Dependency]:
        """The tasks ``task_id`` runs after, each with its policy and current row.

        Returns:
            One ``Dependency`` per edge, in id order (its ``task`` is ``None``
            once purged); empty for a task without dependencies.

        Raises:
            SchemaIncomplete: the database lacks the workflow tables.
        """
        return self._run(_workflows.dependencies(task_id), write=False)

    def workflow(self, task_id: str) -> Workflow | None:
        """The workflow of a task: every task of its root and their dependency edges.

        Returns:
            The ``Workflow`` (at most 1,000 tasks), or ``None`` when the task is unknown.
        """
        task = self.get(task_id)
        if task is None:
            return None
        return self._run(_workflows.workflow(task), write=False)

    def submit_many(self, tasks: Iterable[SubmitItem], *, conn: Any = None) -> TaskList:
        """Submit many tasks in one transaction: all are stored, or none.

        Args:
            tasks: Each a ``(task, payload)`` pair or a dict of ``submit``'s
                arguments (``{"task": "email.send", "payload": {...}, "key": ...}``).
            conn: PostgreSQL only: the application's connection (see ``submit``).

        Returns:
            The stored tasks, in order (a reused key gives the existing task).

        Raises:
            InvalidArgument, SerializationError: an item is bad; nothing is written.
            AlreadyExists: an item's key is taken under ``conflict="reject"``;
                nothing is written.
        """
        specs = self._items(tasks)
        if not self.submit_hooks:
            return self._store_many(specs, conn)
        specs, finishers = before_submit(self.submit_hooks, specs, self.codec)
        try:
            stored = self._store_many(specs, conn)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, stored, None)
        return stored

    def submit_many_ids(self, tasks: Iterable[SubmitItem], *, conn: Any = None) -> IdList:
        """Submit many tasks in one transaction, as ``submit_many``, returning only their ids.

        The tasks written, the key conflicts and the errors are exactly
        ``submit_many``'s; only the answer is lighter: no ``Task`` is built and
        nothing is read back after the writes, which makes it the faster way to
        enqueue in bulk when the caller keeps no more than the ids.

        Args:
            tasks: Each a ``(task, payload)`` pair or a dict of ``submit``'s
                arguments (``{"task": "email.send", "payload": {...}, "key": ...}``).
            conn: PostgreSQL only: the application's connection (see ``submit``).

        Returns:
            The task ids, in the order of ``tasks``; an item whose key is reused
            (``conflict="reuse"`` on a live task, say) gives the existing task's id.

        Raises:
            InvalidArgument, SerializationError: an item is bad; nothing is written.
            AlreadyExists: an item's key is taken under ``conflict="reject"``;
                nothing is written.

        Example::

            ids = cq.submit_many_ids(
                {"task": "email.send", "payload": {"to": to}, "key": f"welcome:{to}"}
                for to in addresses
            )
        """
        specs = self._items(tasks)
        if self.submit_hooks:
            specs, finishers = before_submit(self.submit_hooks, specs, self.codec)
            if finishers:
                # A hook's callback is handed the stored task, so the tasks are built.
                try:
                    stored = self._store_many(specs, conn)
                except BaseException as exc:
                    after_submit(finishers, None, exc)
                    raise
                after_submit(finishers, stored, None)
                return [task.id for task in stored]
        self._admit_many(specs)
        op = kernel.submit_many_ids(specs, points=self._replaced_end(specs))
        if conn is not None:
            ids: IdList = self._transactional(conn)(conn, op)
            return ids
        return self._run(op, write=True)

    def _admit_many(self, specs: list[kernel.NewTask]) -> None:
        """Wait for room in every queue with a depth limit (see ``backpressure``)."""
        if not self.gate.gates_any:
            return
        for queue, count in Counter(spec.queue for spec in specs).items():
            if self.gate.limit_for(queue) is not None:
                self._follow(self.gate.admit(queue, count))

    def _store_many(self, specs: list[kernel.NewTask], conn: Any) -> TaskList:
        self._admit_many(specs)
        op = kernel.submit_many(specs, points=self._replaced_end(specs))
        if conn is not None:
            stored: TaskList = self._transactional(conn)(conn, op)
            return stored
        return self._run(op, write=True)

    def _replaced_end(self, specs: list[kernel.NewTask]) -> kernel.Points:
        """The hooks a submit of ``specs`` runs on the tasks it replaces: ``_ends()`` when
        some item may replace a task (``conflict="replace"``). A submit that replaces
        nothing never asks."""
        if not any(spec.key is not None and spec.conflict == "replace" for spec in specs):
            return kernel.NO_POINTS
        return self._ends()

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        return self._run(kernel.get(task_id), write=False)

    def get_by_key(self, key: str) -> Task | None:
        """The task a key currently points at, or ``None``."""
        return self._run(kernel.get_by_key(key), write=False)

    def get_status(self, task_id: str) -> TaskRef | None:
        """Just ``(id, status)``: a cheap probe that never reads the payload."""
        return self._run(kernel.get_status(task_id), write=False)

    def get_status_by_key(self, key: str) -> TaskRef | None:
        """``(id, status)`` of the task a key points at, or ``None``."""
        return self._run(kernel.get_status_by_key(key), write=False)

    def list(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> TaskList:
        """Tasks matching every given filter, newest first."""
        op = kernel.list_tasks(
            status=status,
            queue=queue,
            name=name,
            root_id=root_id,
            correlation_id=correlation_id,
            limit=limit,
            offset=offset,
        )
        return self._run(op, write=False)

    def cancel(self, task_id: str) -> Task | None:
        """Cancel a task: a queued one at once, a running one cooperatively (cancel wins).

        Returns:
            The task after the request, or ``None`` if it is unknown or already finished.
        """
        # A task canceled here ends in this transaction, which decides its parked dependents.
        op = kernel.cancel(task_id, points=self._ends())
        return self._run(op, write=True)

    def _has_workflows(self) -> bool:
        """Whether the database has the workflow tables (see ``Readiness``)."""
        if self._workflows.stale():
            self._workflows.note(self._run(_workflows.workflows_ready(), write=False))
        return self._workflows.ready

    def _ends(self) -> kernel.Points:
        """What a transaction that ends tasks runs: decide their dependents, where the
        database has the workflow tables."""
        return kernel.ending_with(_workflows.after_ended if self._has_workflows() else None)

    def cancel_by_key(self, key: str) -> Task | None:
        """``cancel`` the task a key points at."""
        op = kernel.cancel_by_key(key, points=self._ends())
        return self._run(op, write=True)

    def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Queue a failed or canceled task again (``reset_attempt`` zeroes its attempts).

        Returns:
            The requeued task, or ``None`` if it is unknown or not failed/canceled.
        """
        return self._run(kernel.retry(task_id, bool(reset_attempt)), write=True)

    def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        """``retry`` the task a key points at."""
        return self._run(kernel.retry_by_key(key, bool(reset_attempt)), write=True)

    def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> IdList:
        """Delete up to ``limit`` finished tasks completed over ``older_than_ms`` ago.

        Returns:
            The ids deleted (their keys go with them).
        """
        op = kernel.purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )
        return self._run(op, write=True)

    def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Task counts ``{queue: {status: n}}``, every status present (zero-filled)."""
        return self._run(kernel.stats(queue), write=False)

    def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom under ``max_depth`` queued tasks of ``queue`` (0 when at or over)."""
        return self._run(kernel.queue_depth(queue, max_depth), write=False)

    # --- schedules ---------------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        task: str | TaskDef[Any, Any],
        *,
        cron: str | None = None,
        every: str | int | datetime.timedelta | None = None,
        tz: str | None = None,
        payload: Any = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 3,
        metadata: Any = None,
        catch_up: str | int | datetime.timedelta = DEFAULT_CATCH_UP_MS,
        catch_up_policy: str = "all",
        overlap: str = "allow",
        jitter: str | int | datetime.timedelta | None = None,
        paused: bool = False,
        replace: bool = False,
    ) -> Schedule:
        """Store a schedule in the database: every cairnq worker on it evaluates it.

        Args:
            name: The schedule's name, unique in the database.
            task: The task name each slot submits, or a ``TaskDef``.
            cron, every, tz, payload, queue, priority, max_attempts, metadata,
                catch_up, catch_up_policy, overlap, jitter: As for
                ``Worker.periodic`` (queue ``"default"``).
            paused: Store it paused (``resume_schedule`` starts it).
            replace: Replace the definition of a stored schedule of that name,
                keeping its cursor, history and paused state.

        Returns:
            The stored schedule. Its first slot is the first after now: a new
            schedule catches nothing up.

        Raises:
            InvalidArgument: a bad cron expression, time zone, interval or option,
                or the name is taken and ``replace`` is false; nothing is stored.
            SerializationError: payload or metadata is not portable JSON.
            SchemaIncomplete: the database lacks the schedules tables (``cairnq migrate``).

        Example::

            cq.add_schedule("nightly-report", "report.build", cron="0 2 * * *",
                                  tz="Europe/Paris", catch_up="6h")
        """
        spec = ScheduleSpec.build(
            self.codec,
            name,
            task.name if isinstance(task, TaskDef) else task,
            cron=cron,
            every=every,
            tz=tz,
            payload=payload,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            metadata=metadata,
            catch_up=catch_up,
            catch_up_policy=catch_up_policy,
            overlap=overlap,
            jitter=jitter,
            paused=paused,
        )
        stored, _ = self._run(_schedules.put(spec, source="api", replace=bool(replace)), write=True)
        return stored

    def get_schedule(self, name: str) -> Schedule | None:
        """One stored schedule with its next slot and last task, or ``None``."""
        return self._run(_schedules.get(name), write=False)

    def list_schedules(self) -> ScheduleList:
        """Every stored schedule, by name."""
        return self._run(_schedules.list_all(), write=False)

    def pause_schedule(self, name: str) -> Schedule | None:
        """Pause a schedule: no slot submits a task until resumed. ``None``: no such schedule."""
        return self._run(_schedules.set_paused(name, True), write=True)

    def resume_schedule(self, name: str) -> Schedule | None:
        """Resume a paused schedule from now: the slots passed while paused are recorded
        as ``paused``, not submitted. ``None``: no such schedule."""
        return self._run(_schedules.set_paused(name, False), write=True)

    def remove_schedule(self, name: str) -> bool:
        """Delete a schedule and its slot record; the tasks it submitted stay.
        ``False``: no such schedule."""
        return self._run(_schedules.remove(name), write=True)

    def schedule_history(self, name: str, *, limit: int = 50) -> SlotList:
        """A schedule's latest slot decisions, newest first (at most ``limit``, <= 500)."""
        return self._run(_schedules.history(name, limit), write=False)

    def run_schedules(self) -> int:
        """Evaluate every due schedule now, as a worker does each second.

        Safe beside running workers: a slot submits one task whoever evaluates it.

        Returns:
            How many tasks were submitted.
        """
        done = self._follow(_schedules.run_due(self.codec))
        return sum(len(d.enqueued) for d in done)

    # --- flow control ------------------------------------------------------------------

    def pause_queue(self, queue: str, *, by: str | None = None) -> Pause:
        """Pause a queue across the deployment: no cairnq worker claims from it until resumed.

        Workers honour it within about a second; calls already running finish.
        Tasks can still be submitted to it. Pausing a paused queue changes nothing.

        Args:
            queue: The queue.
            by: Who paused it, kept with the pause (shown by ``cairnq paused``).

        Returns:
            The pause (the first one, when it was paused already).

        Raises:
            InvalidArgument: a bad queue name.
            SchemaIncomplete: the database lacks the flow-control tables (``cairnq migrate``).

        Example::

            cq.pause_queue("emails", by="ops: provider outage")
        """
        pause, _ = self._run(_pauses.pause("queue", queue, by), write=True)
        return pause

    def resume_queue(self, queue: str) -> Pause | None:
        """Resume a paused queue; ``None`` when it was not paused.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.
        """
        return self._run(_pauses.resume("queue", queue), write=True)

    def pause_task(self, name: str | TaskDef[Any, Any], *, by: str | None = None) -> Pause:
        """Pause a task name across the deployment, in every queue (see ``pause_queue``).

        Example::

            cq.pause_task("invoice.charge")
        """
        target = name.name if isinstance(name, TaskDef) else name
        pause, _ = self._run(_pauses.pause("name", target, by), write=True)
        return pause

    def resume_task(self, name: str | TaskDef[Any, Any]) -> Pause | None:
        """Resume a paused task name; ``None`` when it was not paused."""
        target = name.name if isinstance(name, TaskDef) else name
        return self._run(_pauses.resume("name", target), write=True)

    def paused(self) -> PauseList:
        """Every paused queue and task name: queues first, each by name.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.
        """
        return self._run(_pauses.paused(), write=False)

    def snoozes(self, task_id: str) -> _snooze.Snoozes | None:
        """How many times a task snoozed, and its latest snooze; ``None`` when it never did.

        A snoozed task is ``queued`` with ``run_at_ms`` at the snooze's end and
        its attempt given back.

        Raises:
            SchemaIncomplete: the database lacks the flow-control tables.

        Example::

            snoozes = cq.snoozes(task.id)
            if snoozes:
                print(snoozes.count, snoozes.wake_at_ms)
        """
        return self._run(_snooze.snoozes(task_id), write=False)

    def attempts(self, task_id: str) -> AttemptList:
        """Every attempt of a task cairnq recorded, in the order they ran.

        Each ``Attempt`` has the worker, start and end, outcome (``succeeded``,
        ``failed``, ``retry``, ``canceled``, ``snoozed``, ``lost`` or ``released``)
        and error envelope. Attempts a reference SDK worker ran are not recorded,
        nor attempts on a database without the history table at the time.

        Args:
            task_id: The task.

        Returns:
            The attempts (empty for a task never claimed, or one purged).

        Raises:
            InvalidArgument: a bad task id.
            SchemaIncomplete: the database lacks the history table (``cairnq migrate``).

        Example::

            for attempt in cq.attempts(task.id):
                print(attempt.attempt, attempt.outcome, attempt.error)
        """
        return self._run(_history.attempts(task_id), write=False)

    def steps(self, task_id: str) -> StepList:
        """The durable steps a task recorded (``ctx.step``), in the order they ran.

        Args:
            task_id: The task.

        Returns:
            One ``StepRecord`` per step (name, seq, result, attempt, when).

        Raises:
            InvalidArgument: a bad task id.
            SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).

        Example::

            done = {step.name for step in cq.steps(task.id)}
        """
        return self._run(_steps.steps(task_id), write=False)

    # --- limits --------------------------------------------------------------------------

    def set_limit(self, limit: Limit) -> Limit:
        """Store a concurrency or rate limit that every cairnq worker on the database enforces.

        Replaces a limit of the same id; workers apply the change within about a
        second. A function key is computed only by workers that declare the limit.

        Args:
            limit: ``Limit.concurrency(...)`` or ``Limit.rate(...)``.

        Returns:
            The limit as stored (``source="operator"``).

        Raises:
            InvalidArgument: ``limit`` is not a ``Limit``.
            SchemaIncomplete: the database lacks the limits tables (``cairnq migrate``).

        Example::

            cq.set_limit(Limit.concurrency(2, queue="emails", key="payload.customer"))
        """
        return self._run(_limits.put(limit, source="operator"), write=True)

    def list_limits(self) -> LimitList:
        """Every stored limit (declared by workers or set by operators), by id."""
        return self._run(_limits.list_all(), write=False)

    def remove_limit(self, limit_id: str) -> bool:
        """Delete a stored limit; ``False`` when none has the id.

        A worker that declares it stores it again when it next starts.
        """
        return self._run(_limits.remove(limit_id), write=True)

    def limit_usage(self) -> LimitUsageList:
        """Each stored limit's running tasks per key, waiting tasks and rate tokens, now."""
        return self._run(_limits.usage(), write=False)

    def overview(self) -> SummaryList:
        """Every queue holding a task: counts per status and how late its oldest due task is.

        Returns:
            One ``QueueSummary`` per queue, sorted by queue name; ``counts`` has an
            entry for every status, and ``oldest_queued_age_ms`` is now minus the
            ``run_at_ms`` of the oldest queued task that is due (``None`` if none is).

        Raises:
            DatabaseError: the database could not be read.

        Example::

            for summary in cq.overview():
                print(summary.queue, summary.counts["queued"], summary.oldest_queued_age_ms)
        """
        return self._run(_reads.overview(), write=False)

    def list_page(
        self,
        *,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        key: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        id_prefix: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> TaskPage:
        """One page of tasks matching every given filter, newest first (keyset pagination).

        Tasks are ordered by id, descending: an id starts with the millisecond its
        task was submitted (``task_`` + ULID), so this is newest first to the
        millisecond, by the submitting process's clock (tasks of one millisecond
        come in no particular order). The primary key serves that order, so a
        page reads about ``limit`` rows however large the table is, unfiltered or
        filtered by ``id_prefix``; ``status``, ``queue`` and ``name`` filters use
        their index when few tasks match and otherwise walk the key, checking each
        row. Unlike ``list``'s offset, a cursor stays correct while tasks are
        added and costs the same on the thousandth page as on the first. Listed
        tasks leave out payload, result and metadata (``None``); ``get`` reads
        one whole.

        Args:
            status, queue, name, root_id, correlation_id: Exact matches.
            key: Only the task this idempotency key points at.
            id_prefix: Ids starting with this text (matched as text, never a pattern).
            cursor: ``next_cursor`` of the previous page (an opaque string); ``None``
                for the first.
            limit: Tasks per page, 1 to 1000 (50).

        Returns:
            A ``TaskPage``: the tasks and the cursor of the next page (``None`` at the end).

        Raises:
            InvalidArgument: a bad filter, limit or cursor.

        Example::

            page = cq.list_page(status="failed", limit=100)
            while page.next_cursor:
                page = cq.list_page(status="failed", limit=100, cursor=page.next_cursor)
        """
        op = _reads.list_page(
            status=status,
            queue=queue,
            name=name,
            key=key,
            root_id=root_id,
            correlation_id=correlation_id,
            id_prefix=id_prefix,
            cursor=cursor,
            limit=limit,
        )
        return self._run(op, write=False)

    def activity(
        self, *, window_ms: int = 3_600_000, bucket_ms: int = 300_000, queue: str | None = None
    ) -> ActivityList:
        """Tasks finished per queue and time bucket over the last ``window_ms``.

        Counts come from ``completed_at_ms``, split by outcome (succeeded, failed,
        canceled). Only queues that finished something appear, unless ``queue``
        names one. Purged tasks no longer count.

        Args:
            window_ms: How far back (an hour); the buckets end now.
            bucket_ms: Width of a bucket (5 minutes); at most 1000 buckets.
            queue: Only this queue.

        Returns:
            One ``QueueActivity`` per queue, sorted by name.

        Raises:
            InvalidArgument: a bad window, bucket or queue.

        Example::

            for series in cq.activity(window_ms=3_600_000, bucket_ms=60_000):
                print(series.queue, series.finished, series.failure_rate)
        """
        op = _reads.activity(window_ms=window_ms, bucket_ms=bucket_ms, queue=queue)
        return self._run(op, write=False)

    def workers(self, *, within_ms: int = _presence.ALIVE_WINDOW_MS) -> WorkerList:
        """Workers alive now: cairnq workers seen within ``within_ms``, and every lease holder.

        A cairnq worker records itself on its heartbeat timer and removes itself
        when it stops cleanly; workers of other SDKs appear through the running
        tasks they hold a live lease on.

        Args:
            within_ms: How recent a cairnq worker's last heartbeat must be (a minute).

        Returns:
            ``WorkerInfo`` per worker, sorted by id, each with its running tasks.

        Raises:
            InvalidArgument: a bad window.

        Example::

            for info in cq.workers():
                print(info.worker_id, info.queues, [t.name for t in info.running])
        """
        return self._run(_presence.workers(within_ms=within_ms), write=False)

    def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Wait until a task is finished (succeeded, failed or canceled) and return it.

        Raises:
            TaskTimeout: not finished within ``timeout_ms``; the task is unaffected.
        """
        with self.backend.hub.subscribe(wants_done(task_id), channels=("done",)) as sub:
            sub.until_live(LIVE_WAIT_S)
            procedure = _waiting(
                lambda: kernel.get_status(task_id),
                sub,
                task_id=task_id,
                key=None,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
                where=self._where(),
            )
            return self._follow(procedure, sub)

    def wait_by_key(
        self,
        key: str,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Like ``wait``, following the key to whichever task it points at as it changes."""
        with self.backend.hub.subscribe(lambda e: e.channel == "done", channels=("done",)) as sub:
            sub.until_live(LIVE_WAIT_S)
            procedure = _waiting(
                lambda: kernel.get_status_by_key(key),
                sub,
                task_id=None,
                key=key,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
                where=self._where(),
            )
            return self._follow(procedure, sub)

    def _follow(self, procedure: Procedure[T], sub: Subscription | None = None) -> T:
        return follow(procedure, self._run_step, sub)

    def _run_step(self, op: Op[Any], write: bool) -> Any:
        return self.backend.run(op, write=write)

    def call(
        self,
        task: str | TaskDef[Any, Any] | None = None,
        payload: Any = None,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        **submit_options: Any,
    ) -> Any:
        """Submit, wait, and return the task's result.

        Args:
            task: The handler name or a ``TaskDef`` (as for ``submit``).
            payload: Any JSON value.
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            timeout_ms, poll_ms, max_poll_ms: As for ``wait``.
            **submit_options: As for ``submit``.

        Returns:
            The task's result.

        Raises:
            InvalidArgument: a bad argument, or both ``task`` and ``name``.
            TaskFailed: the task ended failed (carries its error envelope).
            TaskCanceled: the task ended canceled.
            TaskTimeout: it did not finish within ``timeout_ms``.

        Example::

            total = cq.call("add", {"a": 1, "b": 2}, timeout_ms=5_000)
        """
        submitted = self.submit(task_or_name(task, name, "call"), payload, **submit_options)
        done = self.wait(
            submitted.id, timeout_ms=timeout_ms, poll_ms=poll_ms, max_poll_ms=max_poll_ms
        )
        return _outcome(done)

    def watch(
        self, queues: Iterable[str] = ("default",), *, poll_ms: int = DEFAULT_WATCH_POLL_MS
    ) -> Iterator[WatchSignal]:
        """Signals that something may have changed: push when possible, a timer otherwise.

        Yields ``WatchSignal("queued", queue)`` when a task becomes queued on one of
        ``queues``, ``WatchSignal("done", task_id)`` when any task finishes, and
        ``WatchSignal("poll", "")`` after ``poll_ms`` without either. Pushes come
        from this process's own writes and, on PostgreSQL, from NOTIFY; they are
        hints, so re-read the database when one arrives.

        Example::

            for signal in cq.watch(["emails"]):
                if signal.kind != "done":
                    print(cq.stats("emails"))
        """
        wanted = frozenset(check_names(queues, "queues"))
        interval = check_int(poll_ms, "poll_ms", low=1) / 1000
        self.open()

        def match(emit: Emit) -> bool:
            return emit.channel == "done" or emit.value in wanted

        with self.backend.hub.subscribe(match, buffer=WATCH_BUFFER) as sub:
            while True:
                sub.wait(interval)
                sub.clear()
                events = sub.drain()
                if not events:
                    yield WatchSignal("poll", "")
                for event in events:
                    yield WatchSignal(event.channel, event.value)
