# generated from src/cairnq/client/_async.py by scripts/generate_sync.py; do not edit
"""The client's operations, blocking: ``SyncCairnQ`` is built on them."""

from __future__ import annotations

import datetime
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from .. import kernel
from .._checks import check_int, check_names
from .._events import Latch
from .._wakeups import LIVE_WAIT_S, wants_done
from ..backends import Backend
from ..backpressure import QueueGate
from ..durations import Duration, duration_or_ms
from ..errors import InvalidArgument
from ..extensions._submit_path import spec_for_submit, with_also
from ..hooks import after_submit, before_submit
from ..kernel import views as _reads
from ..kernel.procedures import Procedure, follow
from ..kernel.retention import Retention, SyncRetentionSweeper
from ..kernel.store_calls import StoreCall
from ..lineage import Lineage
from ..models import Task, TaskDef, TaskPage, TaskRef
from ..protocol.steps import Emit, Op
from ..store import TaskStore
from . import _streaming
from ._checks import task_or_name
from ._codec import opened_tasks
from ._core import (
    DEFAULT_MAX_POLL_MS,
    DEFAULT_POLL_MS,
    DEFAULT_WATCH_POLL_MS,
    WATCH_BUFFER,
    ActivityList,
    DoneWake,
    IdList,
    SubmitItem,
    SummaryList,
    TaskList,
    WatchSignal,
    _ClientCore,
    _outcome,
    _waiting,
    activity_spans,
    wait_timeout_ms,
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
        # It sweeps through the store, so a ``purge`` replaced on ``cq.store`` is called.
        self.sweeper = SyncRetentionSweeper(self.store, policy) if policy else None

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
        found = self.backend.run(op, write=write)
        return found if self.codec.sealer is None else opened_tasks(self.codec, found)

    def _on_conn(self, conn: Any, op: Op[T]) -> T:
        """Run ``op`` on the application's connection ``conn``; tasks it returns are read
        through this client's codec, as ``_run``'s are."""
        found: T = self._transactional(conn)(conn, op)
        return found if self.codec.sealer is None else opened_tasks(self.codec, found)

    def submit(
        self,
        task: str | TaskDef[Any, Any] | Callable[..., Any] | None = None,
        payload: Any = None,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        key: str | None = None,
        queue: str | None = None,
        conflict: str = "reuse",
        max_attempts: int | None = None,
        priority: int | None = None,
        metadata: Any = None,
        delay_ms: int | None = None,
        delay: Duration | None = None,
        run_at: datetime.datetime | None = None,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        lineage: Lineage | None = None,
        conn: Any = None,
    ) -> Task:
        """Enqueue a task, with the kernel's options only.

        ``SyncCairnQ.submit`` (the built-in extensions') takes these and the
        extensions' own keywords; its docstring describes them all.
        """
        spec = spec_for_submit(
            self,
            task, payload, name, key, queue, conflict, max_attempts, priority, metadata,
            delay_ms, delay, run_at, parent_id, root_id, correlation_id, lineage,
        )  # fmt: skip
        return self._submit_one(spec, conn)

    def _submit_one(self, spec: kernel.NewTask, conn: Any) -> Task:
        """Store one task through this client's submit hooks and backpressure gate."""
        return self._submit_spec(spec, conn, self.gate)

    def _submit_specs(
        self,
        specs: list[kernel.NewTask],
        build: Callable[[list[kernel.NewTask]], Op[TaskList]],
        conn: Any,
    ) -> TaskList:
        """Store tasks in one transaction with the op ``build`` makes of them, after this
        client's submit hooks (which may change them) and backpressure gate."""
        finishers = None
        if self.submit_hooks:
            specs, finishers = before_submit(self.submit_hooks, specs, self.codec)
        self._admit_many(specs)
        op = with_also(build(specs), specs)
        try:
            if conn is not None:
                stored: TaskList = self._on_conn(conn, op)
            else:
                stored = self._run(op, write=True)
        except BaseException as exc:
            if finishers is not None:
                after_submit(finishers, None, exc)
            raise
        if finishers is not None:
            after_submit(finishers, stored, None)
        return stored

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
        if gate.gates_any:
            self._follow(gate.admit(spec.queue))
        if spec.key is None:
            op = kernel.insert(spec)
        else:
            op = kernel.submit(spec, points=self._replaced_end([spec]))
        op = with_also(op, [spec])
        if conn is not None:
            stored: Task = self._on_conn(conn, op)
            return stored
        return self._run(op, write=True)

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

        The tasks written, the key conflicts and the errors are ``submit_many``'s;
        only the answer is lighter: no ``Task`` is built and nothing is read back
        after the writes, which makes it the faster way to enqueue in bulk when the
        caller keeps no more than the ids. On PostgreSQL a batch of more than 250
        items is built 250 at a time while the server inserts the part before, in
        the one transaction; there a taken key under ``conflict="reject"`` may raise
        before a bad item in a later part is seen, and each part's tasks take their
        own creation time.

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
        items = list(tasks)  # a copy: the parts are read while the batch is written
        plan = _streaming.stream_plan(self, items, conn)
        if plan is not None:
            points = self._ends() if plan.replaces else kernel.NO_POINTS
            parts = _streaming.parts(items, self._built)
            op = kernel.submit_many_ids_streamed(parts, keys=plan.keys, points=points)
            return self._run(op, write=True)
        specs = self._items(items)
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
            self._follow(self.gate.admit(queue, count))

    def _store_many(self, specs: list[kernel.NewTask], conn: Any) -> TaskList:
        self._admit_many(specs)
        op = kernel.submit_many(specs, points=self._replaced_end(specs))
        if conn is not None:
            stored: TaskList = self._on_conn(conn, op)
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
        store = self._overriding("get")
        if store is not None:
            task: Task | None = store.get(task_id)
            return task
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
        # A task canceled here ends in this transaction, which runs the task-end hooks.
        op = kernel.cancel(task_id, points=self._ends())
        return self._run(op, write=True)

    def _ends(self) -> kernel.Points:
        """What a transaction that ends tasks runs: the ending hooks of this client's
        extensions (``extensions.Endings``), those ready on this database; the ledger
        is read at most once a second while one is not."""
        endings = self._endings
        if endings.stale():
            return endings.note(self._run(kernel.applied_migrations(), write=False))
        return endings.points

    def cancel_by_key(self, key: str) -> Task | None:
        """``cancel`` the task a key points at."""
        op = kernel.cancel_by_key(key, points=self._ends())
        return self._run(op, write=True)

    def retry(
        self, task_id: str, *, reset_attempt: bool = False, from_step: str | None = None
    ) -> Task | None:
        """Queue a failed or canceled task again (``reset_attempt`` zeroes its attempts).

        With ``from_step``, a replay (docs/replay.md): the task's recorded durable steps
        from that step on are forgotten and run again, those before it are kept and
        replayed, in the same transaction as the requeue.

        Args:
            task_id: The task.
            reset_attempt: Zero its attempt count.
            from_step: The name of a step the task recorded (``ctx.step``), or ``None``.

        Returns:
            The requeued task, or ``None`` if it is unknown or not failed/canceled
            (without ``from_step``).

        Raises:
            InvalidArgument: with ``from_step``: a bad name, an unknown task, a task not
                failed or canceled (a succeeded one is never queued again), or one that
                recorded no such step; nothing is changed.

        Example::

            cq.retry(task.id, from_step="charge")
        """
        if from_step is not None:
            return self._replay_from(task_id, from_step, bool(reset_attempt))
        return self._run(kernel.retry(task_id, bool(reset_attempt)), write=True)

    def _replay_from(self, task_id: str, from_step: str, reset_attempt: bool) -> Task | None:
        """``retry`` from a recorded step: the steps extension's client part replaces it."""
        raise InvalidArgument("retry(from_step=...) needs the durable steps' client part")

    def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        """``retry`` the task a key points at."""
        return self._run(kernel.retry_by_key(key, bool(reset_attempt)), write=True)

    def purge(
        self,
        *,
        older_than_ms: int | None = None,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1000,
        older_than: Duration | None = None,
    ) -> IdList:
        """Delete up to ``limit`` finished tasks completed over ``older_than`` ago.

        Args:
            older_than_ms: The age, in milliseconds (the reference SDK's; 0: any age).
            queue, status, name: Only tasks that match (``status`` a finished one).
            limit: The most tasks deleted by this call.
            older_than: The age as a duration (``"7d"``, ``timedelta``, seconds as
                a number); give it or ``older_than_ms``.

        Returns:
            The ids deleted (their keys go with them).

        Raises:
            InvalidArgument: both ``older_than`` and ``older_than_ms``, or a bad value.

        Example::

            cq.purge(older_than="7d", status="succeeded")
        """
        older_than_ms = duration_or_ms(older_than, older_than_ms, "older_than") or 0
        store = self._overriding("purge")
        if store is not None:
            ids: IdList = store.purge(
                older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
            )
            return ids
        op = kernel.purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )
        return self._run(op, write=True)

    def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Task counts ``{queue: {status: n}}``, every status present (zero-filled)."""
        return self._run(kernel.stats(queue), write=False)

    def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom under ``max_depth`` queued tasks of ``queue`` (0 when at or over)."""
        store = self._overriding("queue_depth")
        if store is not None:
            headroom: int = store.queue_depth(queue, max_depth)
            return headroom
        return self._run(kernel.queue_depth(queue, max_depth), write=False)

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
        self,
        *,
        window: Duration | None = None,
        bucket: Duration | None = None,
        queue: str | None = None,
        window_ms: int | None = None,
        bucket_ms: int | None = None,
    ) -> ActivityList:
        """Tasks finished per queue and time bucket over the last ``window``.

        Counts come from ``completed_at_ms``, split by outcome (succeeded, failed,
        canceled). Only queues that finished something appear, unless ``queue``
        names one. Purged tasks no longer count.

        Args:
            window: How far back, a duration (``"1h"``, a ``timedelta``, seconds
                as a number; an hour); the buckets end now.
            bucket: Width of a bucket, a duration (5 minutes); at most 1000 buckets.
            queue: Only this queue.
            window_ms, bucket_ms: The old spellings (int ms), kept for one
                release; each warns once.

        Returns:
            One ``QueueActivity`` per queue, sorted by name.

        Raises:
            InvalidArgument: a bad window, bucket or queue.

        Example::

            for series in cq.activity(window="1h", bucket="1m"):
                print(series.queue, series.finished, series.failure_rate)
        """
        window_of, bucket_of = activity_spans(window, bucket, window_ms, bucket_ms)
        op = _reads.activity(window_ms=window_of, bucket_ms=bucket_of, queue=queue)
        return self._run(op, write=False)

    def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int | None = None,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        timeout: Duration | None = None,
    ) -> Task:
        """Wait until a task is finished (succeeded, failed or canceled) and return it.

        Args:
            task_id: The task to wait for.
            timeout_ms: How long to wait, in milliseconds (the reference SDK's; 30 s).
            poll_ms, max_poll_ms: The first and the longest interval between reads.
            timeout: How long to wait, as a duration (``"5m"``, ``timedelta``,
                seconds as a number); give it or ``timeout_ms``.

        Raises:
            InvalidArgument: both ``timeout`` and ``timeout_ms``, or a bad value.
            TaskTimeout: not finished within the timeout; the task is unaffected.

        Example::

            task = cq.wait(task_id, timeout="2m")
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
                timeout=timeout,
            )
            store = self._overriding("task_done_wake")
            if store is not None:
                return self._follow(procedure, DoneWake(store, task_id, sub))
            return self._follow(procedure, sub)

    def wait_by_key(
        self,
        key: str,
        *,
        timeout_ms: int | None = None,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        timeout: Duration | None = None,
    ) -> Task:
        """Like ``wait``, following the key to whichever task it points at as it changes.

        On the async client, a ``task_done_wake`` replaced on the store is the sleep
        between looks, on the task the key pointed at on the last look (``cairnq.store``).
        """
        with self.backend.hub.subscribe(lambda e: e.channel == "done", channels=("done",)) as sub:
            sub.until_live(LIVE_WAIT_S)
            store = self._overriding("task_done_wake")
            wake = None if store is None else DoneWake(store, None, sub)
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
                seen=None if wake is None else wake.follow,
                timeout=timeout,
            )
            return self._follow(procedure, sub if wake is None else wake)

    def _follow(self, procedure: Procedure[T], sub: Latch | None = None) -> T:
        return follow(procedure, self._run_step, sub)

    def _run_step(self, op: Op[Any], write: bool) -> Any:
        if isinstance(op, StoreCall):
            # The step stands for a store method: a replaced one answers it.
            store = self._overriding(op.method)
            if store is not None:
                return getattr(store, op.method)(*op.args, **op.kwargs)
            op = op.inner
        found = self.backend.run(op, write=write)
        return found if self.codec.sealer is None else opened_tasks(self.codec, found)

    def call(
        self,
        task: str | TaskDef[Any, Any] | None = None,
        payload: Any = None,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        timeout_ms: int | None = None,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        timeout: Duration | None = None,
        **submit_options: Any,
    ) -> Any:
        """Submit, wait, and return the task's result.

        Args:
            task: The handler name or a ``TaskDef`` (as for ``submit``).
            payload: Any JSON value.
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            timeout_ms, poll_ms, max_poll_ms, timeout: As for ``wait``.
            **submit_options: As for ``submit``.

        Returns:
            The task's result.

        Raises:
            InvalidArgument: a bad argument (nothing is submitted), both ``task``
                and ``name``, or both ``timeout`` and ``timeout_ms``.
            TaskFailed: the task ended failed (carries its error envelope).
            TaskCanceled: the task ended canceled.
            TaskTimeout: it did not finish within the timeout.

        Example::

            total = cq.call("add", {"a": 1, "b": 2}, timeout="5s")
        """
        timeout_ms = wait_timeout_ms(timeout, timeout_ms)
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
