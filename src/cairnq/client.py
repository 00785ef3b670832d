"""The application side: submit tasks, look them up, wait for them, act on them.

``CairnQ`` is the async client; ``SyncCairnQ`` has the same operations for code
with no event loop (scripts, WSGI views). Both are thin: validation and every
protocol decision live in ``_ops``; the two classes only run operations and wait.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

from ._clock import SYSTEM_CLOCK, Clock
from ._json import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, JsonCodec
from ._wakeups import Subscription, wants_done
from .backends import Backend, SQLiteBackend, Synchronous, TransactionalRunner, open_backend
from .backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit, QueueGate
from .errors import InvalidArgument, TaskCanceled, TaskFailed, TaskTimeout, UnsupportedBackend
from .hooks import SubmitHook, after_submit, before_submit
from .models import QueueActivity, QueueSummary, Task, TaskDef, TaskPage, TaskRef, WorkerInfo
from .protocol import ops as _ops
from .protocol import reads as _reads
from .protocol.procedures import Nap, Procedure, Run, afollow, follow
from .protocol.steps import Emit, Op
from .retention import Retention, RetentionSweeper

__all__ = ["CairnQ", "SyncCairnQ", "WatchSignal"]

T = TypeVar("T")
C = TypeVar("C", bound="_ClientCore")
TaskList = list[Task]
IdList = list[str]
SummaryList = list[QueueSummary]
ActivityList = list[QueueActivity]
WorkerList = list[WorkerInfo]

DEFAULT_WAIT_TIMEOUT_MS = 30_000
DEFAULT_POLL_MS = 100
DEFAULT_MAX_POLL_MS = 500
DEFAULT_WATCH_POLL_MS = 2000
_SUBMIT_DEFAULTS: dict[str, Any] = {
    "key": None,
    "queue": None,
    "conflict": "reuse",
    "max_attempts": None,
    "priority": None,
    "metadata": None,
    "delay_ms": 0,
    "parent_id": None,
    "root_id": None,
    "correlation_id": None,
}
WATCH_BUFFER = 1024


@dataclass(frozen=True)
class WatchSignal:
    """What ``watch`` yields: ``kind`` is ``"queued"`` (value: the queue),
    ``"done"`` (value: the task id) or ``"poll"`` (the timer; value empty)."""

    kind: Literal["queued", "done", "poll"]
    value: str


class _ClientCore:
    """State and op-building shared by both clients; performs no IO."""

    def __init__(
        self,
        backend: Backend | str | os.PathLike[str],
        *,
        max_payload_bytes: int = DEFAULT_MAX_BYTES,
        max_json_depth: int = DEFAULT_MAX_DEPTH,
        max_queue_depth: DepthLimit = None,
        max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS,
        **backend_options: Any,
    ) -> None:
        if isinstance(backend, (str, os.PathLike)):
            self.backend: Backend = open_backend(backend, **backend_options)
            self._owns_backend = True
        elif isinstance(backend, Backend):
            if backend_options:
                raise InvalidArgument(
                    f"backend options {sorted(backend_options)} only apply when given a URL"
                )
            self.backend = backend
            self._owns_backend = False
        else:
            raise InvalidArgument(f"expected a Backend or a database URL, got {backend!r}")
        self.gate = QueueGate(max_queue_depth, max_queue_wait_ms)
        # Checked once per submit: with no hooks a submit does nothing more.
        self.submit_hooks: list[SubmitHook] = []
        self.codec = JsonCodec(
            max_bytes=_ops.check_int(max_payload_bytes, "max_payload_bytes", low=1, high=2**31),
            max_depth=_ops.check_int(max_json_depth, "max_json_depth", low=1, high=10_000),
        )

    @classmethod
    def sqlite(
        cls: type[C],
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "full",
        clock: Clock | None = None,
        migrate: bool = True,
        **options: Any,
    ) -> C:
        """A client on a SQLite file, created (mode 0600) and migrated on first use.

        Args:
            path: The database file.
            busy_timeout_ms: How long a write waits for another process's lock.
            synchronous: ``"full"`` (default, survives power loss) or ``"normal"``.
            clock: A clock for ``now_ms`` (tests pass a ``FakeClock``).
            migrate: Apply pending migrations when opening (default).
            **options: Client options (``max_payload_bytes``, ``max_json_depth``).
        """
        backend = SQLiteBackend(
            path,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
            clock=clock,
            migrate=migrate,
        )
        client = cls(backend, **options)
        client._owns_backend = True
        return client

    @classmethod
    def postgres(
        cls: type[C],
        source: Any,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        clock: Clock | None = None,
        migrate: bool = True,
        listen: bool = True,
        **options: Any,
    ) -> C:
        """A client on PostgreSQL (needs the ``postgres`` extra).

        Args:
            source: A DSN, or the application's psycopg pool or connection
                (async pool/connection for ``CairnQ``, sync for ``SyncCairnQ``).
                cairnq uses an injected pool and never closes it.
            schema: Schema of cairnq's tables: created if missing and pinned in
                ``search_path`` with a DSN; only checked with a pool or connection.
            min_size, max_size: Size of the pool cairnq makes from a DSN.
            clock: Supply ``now_ms`` from this clock instead of the database's.
            migrate: Apply pending migrations on first use (default).
            listen: Use LISTEN/NOTIFY for wake-ups (default; a DSN is needed).
            **options: Client options (``max_payload_bytes``, ``max_json_depth``).

        Raises:
            InvalidArgument: a bad schema name.
            SchemaMismatch: (on first use) the connection sees another installation.
        """
        from .backends import PostgresBackend

        backend = PostgresBackend(
            source,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            clock=clock,
            migrate=migrate,
            listen=listen,
        )
        client = cls(backend, **options)
        client._owns_backend = True
        return client

    def add_submit_hook(self, hook: SubmitHook) -> Callable[[], None]:
        """Call ``hook(pending)`` for every task this client submits (see ``cairnq.hooks``).

        Hooks see ``submit``, ``submit_many`` and handlers' ``ctx.submit`` on a
        worker's client; they run in the order added and may add metadata keys.
        Metrics and tracing (``cairnq.telemetry``) attach themselves this way.

        Args:
            hook: ``hook(PendingSubmit) -> done | None``.

        Returns:
            A function that removes the hook again.

        Raises:
            InvalidArgument: ``hook`` is not callable.

        Example::

            remove = cq.add_submit_hook(lambda pending: print(pending.name) or None)
        """
        if not callable(hook):
            raise InvalidArgument(f"a submit hook must be callable, got {hook!r}")
        self.submit_hooks.append(hook)

        def remove() -> None:
            if hook in self.submit_hooks:
                self.submit_hooks.remove(hook)

        return remove

    def _clock(self) -> Clock:
        """The clock task times come from (the host's when the database keeps time)."""
        return self.backend.clock or SYSTEM_CLOCK

    def _transactional(self, conn: Any) -> Any:
        """The backend's way to run an operation on the application's connection."""
        backend = self.backend
        if not isinstance(backend, TransactionalRunner):
            raise UnsupportedBackend(
                f"submitting inside the application's transaction needs PostgreSQL; "
                f"the {self.backend.dialect} backend has no shared connection"
            )
        return backend.arun_on if isinstance(self, CairnQ) else backend.run_on

    @classmethod
    def connect(cls: type[C], url: str | os.PathLike[str], **options: Any) -> C:
        """A client for a database URL (``sqlite:///tasks.db``, ``postgresql://...``).

        Options other than the client's own go to the backend.
        """
        return cls(url, **options)

    def _item(self, item: SubmitItem) -> _ops.NewTask:
        """A ``submit_many`` item: ``(task, payload)`` or a dict of ``submit``'s arguments."""
        if isinstance(item, tuple) and len(item) == 2:
            return self._new_task(item[0], item[1], **_SUBMIT_DEFAULTS)
        if isinstance(item, dict):
            options = dict(item)
            if "task" not in options:
                raise InvalidArgument("each submit_many dict needs a 'task' (the task name)")
            task = options.pop("task")
            payload = options.pop("payload", None)
            unknown = set(options) - set(_SUBMIT_DEFAULTS)
            if unknown:
                raise InvalidArgument(f"unknown submit_many fields: {sorted(unknown)}")
            return self._new_task(task, payload, **{**_SUBMIT_DEFAULTS, **options})
        raise InvalidArgument(
            "submit_many takes (task, payload) pairs or dicts of submit arguments"
        )

    def _new_task(
        self,
        task: str | TaskDef[Any, Any],
        payload: Any,
        *,
        key: str | None,
        queue: str | None,
        conflict: str,
        max_attempts: int | None,
        priority: int | None,
        metadata: Any,
        delay_ms: int,
        parent_id: str | None,
        root_id: str | None,
        correlation_id: str | None,
    ) -> _ops.NewTask:
        if isinstance(task, TaskDef):
            name: Any = task.name
            queue = queue if queue is not None else task.queue
            max_attempts = max_attempts if max_attempts is not None else task.max_attempts
            priority = priority if priority is not None else task.priority
        else:
            name = task
        return _ops.new_task(
            self.codec,
            name,
            payload,
            key=key,
            queue="default" if queue is None else queue,
            conflict=conflict,
            max_attempts=3 if max_attempts is None else max_attempts,
            priority=0 if priority is None else priority,
            metadata=metadata,
            delay_ms=delay_ms,
            parent_id=parent_id,
            root_id=root_id,
            correlation_id=correlation_id,
        )


SubmitItem = tuple[Any, Any] | dict[str, Any]


def _waiting(
    lookup: Callable[[], Op[TaskRef | None]],
    sub: Subscription,
    *,
    task_id: str | None,
    key: str | None,
    timeout_ms: int,
    poll_ms: int,
    max_poll_ms: int,
    clock: Clock,
) -> Procedure[Task]:
    """The wait loop, shared by both clients: probe the status, nap, grow the interval.

    A nap ends early when this process settles a task (the subscription), so a
    waiter in the same process as the worker sees the result at once.
    """
    _ops.check_int(timeout_ms, "timeout_ms", low=0, high=2**62)
    interval = _ops.check_int(poll_ms, "poll_ms", low=1)
    ceiling = max(interval, _ops.check_int(max_poll_ms, "max_poll_ms", low=1))
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        sub.clear()
        ref: TaskRef | None = yield Run(lookup())
        if ref is not None and ref.status in ("succeeded", "failed", "canceled"):
            task: Task | None = yield Run(_ops.get(ref.id))
            if task is not None and task.is_terminal:
                return task
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            snapshot = None if ref is None else (yield Run(_ops.get(ref.id)))
            raise TaskTimeout(
                task_id or (ref.id if ref else None),
                timeout_ms=timeout_ms,
                task=snapshot,
                key=key,
                detail=_why_not_done(snapshot, key, clock.now_ms()),
            )
        yield Nap(min(interval / 1000, remaining))
        interval = min(ceiling, max(interval + 1, int(interval * 1.5)))


def _why_not_done(task: Task | None, key: str | None, now_ms: int) -> str:
    if task is None:
        return f"no task is stored under key {key!r}" if key else "no task with that id exists"
    if task.is_queued and task.attempt == 0:
        return (
            f"still queued and never claimed; is a worker serving queue {task.queue!r} "
            f"with a handler for {task.name!r} on this database?"
        )
    if task.is_queued:
        wait_ms = max(0, task.run_at_ms - now_ms)
        return (
            f"queued for another attempt ({task.attempt}/{task.max_attempts}), "
            f"next run in ~{wait_ms} ms"
        )
    if task.cancel_requested:
        return "cancel requested; waiting for the handler to stop"
    return f"still running on {task.worker_id} (attempt {task.attempt}/{task.max_attempts})"


def _outcome(task: Task) -> Any:
    """What ``call`` returns for a finished task, or the error it raises."""
    if task.is_succeeded:
        return task.result
    if task.is_canceled:
        raise TaskCanceled(task.id)
    raise TaskFailed(task.error, task_id=task.id)


class CairnQ(_ClientCore):
    """The async client.

    Args:
        backend: A ``Backend``, a database URL (``sqlite:///tasks.db``,
            ``postgresql://...``) or a SQLite file path.
        max_payload_bytes: Largest encoded payload, metadata or result accepted (1 MiB).
        max_json_depth: Deepest nesting accepted in JSON values (64).
        max_queue_depth: Backpressure: an int for every queue or ``{queue: int}``;
            a submit to a queue holding that many queued tasks waits, then raises
            ``QueueFull`` after ``max_queue_wait_ms`` (10 minutes).
        retention: A ``Retention`` (or an int: milliseconds to keep finished
            tasks) swept in the background while the client is open.
        **backend_options: Options for a backend made from a URL (``busy_timeout_ms``, ...).

    Example::

        async with CairnQ.sqlite("tasks.db") as cq:
            task = await cq.submit("email.send", {"to": "a@example.com"}, key="welcome:42")
            done = await cq.wait(task.id, timeout_ms=10_000)
    """

    def __init__(
        self,
        backend: Backend | str | os.PathLike[str],
        *,
        retention: Retention | int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(backend, **options)
        policy = Retention.of(retention)
        self.sweeper = RetentionSweeper(self.backend, policy) if policy else None

    async def open(self) -> CairnQ:
        """Connect and migrate now rather than on first use; start retention if configured."""
        await self.backend.aopen()
        if self.sweeper is not None and not self.sweeper.running:
            self.sweeper.start()
        return self

    async def sweep(self) -> int:
        """Apply the retention policy now, batch by batch; returns the rows deleted.

        Raises:
            InvalidArgument: this client has no ``retention``.
        """
        if self.sweeper is None:
            raise InvalidArgument("this client has no retention policy; use purge() instead")
        await self.backend.aopen()
        return await self.sweeper.sweep()

    def __await__(self) -> Generator[Any, None, CairnQ]:
        return self.open().__await__()

    async def close(self) -> None:
        """Stop retention, then close the backend if this client created it."""
        if self.sweeper is not None:
            await self.sweeper.stop()
        if self._owns_backend:
            await self.backend.aclose()

    async def __aenter__(self) -> CairnQ:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _run(self, op: Op[T], *, write: bool) -> T:
        return await self.backend.arun(op, write=write)

    async def submit(
        self,
        task: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
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
    ) -> Task:
        """Enqueue a task.

        Args:
            task: The handler name, or a ``TaskDef`` (its queue, max_attempts and
                priority become the defaults).
            payload: Any JSON value (``None`` stores ``{}``).
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

        Returns:
            The stored task (for a reused key, the existing one).

        Raises:
            InvalidArgument: a bad name, queue, key or number; nothing is written.
            SerializationError: payload or metadata is not portable JSON.
            AlreadyExists: the key is taken and ``conflict="reject"``.
            UnsupportedBackend: ``conn`` given on a backend without shared connections.
        """
        spec = self._new_task(
            task,
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
        return await self._submit_spec(spec, conn, self.gate)

    async def _submit_spec(self, spec: _ops.NewTask, conn: Any, gate: QueueGate) -> Task:
        if not self.submit_hooks:
            return await self._store_spec(spec, conn, gate)
        (spec,), finishers = before_submit(self.submit_hooks, [spec], self.codec)
        try:
            stored = await self._store_spec(spec, conn, gate)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, [stored], None)
        return stored

    async def _store_spec(self, spec: _ops.NewTask, conn: Any, gate: QueueGate) -> Task:
        if gate.limit_for(spec.queue) is not None:
            await self._follow(gate.admit(spec.queue))
        op = _ops.insert(spec) if spec.key is None else _ops.submit(spec)
        if conn is not None:
            stored: Task = await self._transactional(conn)(conn, op)
            return stored
        return await self._run(op, write=True)

    async def submit_many(self, tasks: Iterable[SubmitItem], *, conn: Any = None) -> TaskList:
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
        specs = [self._item(item) for item in tasks]
        if not self.submit_hooks:
            return await self._store_many(specs, conn)
        specs, finishers = before_submit(self.submit_hooks, specs, self.codec)
        try:
            stored = await self._store_many(specs, conn)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, stored, None)
        return stored

    async def _store_many(self, specs: list[_ops.NewTask], conn: Any) -> TaskList:
        for queue, count in Counter(spec.queue for spec in specs).items():
            if self.gate.limit_for(queue) is not None:
                await self._follow(self.gate.admit(queue, count))
        if conn is not None:
            stored: TaskList = await self._transactional(conn)(conn, _ops.submit_many(specs))
            return stored
        return await self._run(_ops.submit_many(specs), write=True)

    async def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        return await self._run(_ops.get(task_id), write=False)

    async def get_by_key(self, key: str) -> Task | None:
        """The task a key currently points at, or ``None``."""
        return await self._run(_ops.get_by_key(key), write=False)

    async def get_status(self, task_id: str) -> TaskRef | None:
        """Just ``(id, status)``: a cheap probe that never reads the payload."""
        return await self._run(_ops.get_status(task_id), write=False)

    async def get_status_by_key(self, key: str) -> TaskRef | None:
        """``(id, status)`` of the task a key points at, or ``None``."""
        return await self._run(_ops.get_status_by_key(key), write=False)

    async def list(
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
        op = _ops.list_tasks(
            status=status,
            queue=queue,
            name=name,
            root_id=root_id,
            correlation_id=correlation_id,
            limit=limit,
            offset=offset,
        )
        return await self._run(op, write=False)

    async def cancel(self, task_id: str) -> Task | None:
        """Cancel a task: a queued one at once, a running one cooperatively (cancel wins).

        Returns:
            The task after the request, or ``None`` if it is unknown or already finished.
        """
        return await self._run(_ops.cancel(task_id), write=True)

    async def cancel_by_key(self, key: str) -> Task | None:
        """``cancel`` the task a key points at."""
        return await self._run(_ops.cancel_by_key(key), write=True)

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Queue a failed or canceled task again (``reset_attempt`` zeroes its attempts).

        Returns:
            The requeued task, or ``None`` if it is unknown or not failed/canceled.
        """
        return await self._run(_ops.retry(task_id, bool(reset_attempt)), write=True)

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        """``retry`` the task a key points at."""
        return await self._run(_ops.retry_by_key(key, bool(reset_attempt)), write=True)

    async def purge(
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
        op = _ops.purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )
        return await self._run(op, write=True)

    async def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Task counts ``{queue: {status: n}}``, every status present (zero-filled)."""
        return await self._run(_ops.stats(queue), write=False)

    async def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom under ``max_depth`` queued tasks of ``queue`` (0 when at or over)."""
        return await self._run(_ops.queue_depth(queue, max_depth), write=False)

    async def overview(self) -> SummaryList:
        """Every queue holding a task: counts per status and how late its oldest due task is.

        Returns:
            One ``QueueSummary`` per queue, sorted by queue name; ``counts`` has an
            entry for every status, and ``oldest_queued_age_ms`` is now minus the
            ``run_at_ms`` of the oldest queued task that is due (``None`` if none is).

        Raises:
            DatabaseError: the database could not be read.

        Example::

            for summary in await cq.overview():
                print(summary.queue, summary.counts["queued"], summary.oldest_queued_age_ms)
        """
        return await self._run(_reads.overview(), write=False)

    async def list_page(
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

            page = await cq.list_page(status="failed", limit=100)
            while page.next_cursor:
                page = await cq.list_page(status="failed", limit=100, cursor=page.next_cursor)
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
        return await self._run(op, write=False)

    async def activity(
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

            for series in await cq.activity(window_ms=3_600_000, bucket_ms=60_000):
                print(series.queue, series.finished, series.failure_rate)
        """
        op = _reads.activity(window_ms=window_ms, bucket_ms=bucket_ms, queue=queue)
        return await self._run(op, write=False)

    async def workers(self, *, within_ms: int = 60_000) -> WorkerList:
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

            for info in await cq.workers():
                print(info.worker_id, info.queues, [t.name for t in info.running])
        """
        return await self._run(_reads.workers(within_ms=within_ms), write=False)

    async def wait(
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
        with self.backend.hub.subscribe(wants_done(task_id)) as sub:
            procedure = _waiting(
                lambda: _ops.get_status(task_id),
                sub,
                task_id=task_id,
                key=None,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
            )
            return await self._follow(procedure, sub)

    async def wait_by_key(
        self,
        key: str,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Like ``wait``, following the key to whichever task it points at as it changes."""
        with self.backend.hub.subscribe(lambda e: e.channel == "done") as sub:
            procedure = _waiting(
                lambda: _ops.get_status_by_key(key),
                sub,
                task_id=None,
                key=key,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
            )
            return await self._follow(procedure, sub)

    async def _follow(self, procedure: Procedure[T], sub: Subscription | None = None) -> T:
        return await afollow(procedure, self._run_step, sub)

    async def _run_step(self, op: Op[Any], write: bool) -> Any:
        return await self.backend.arun(op, write=write)

    async def call(
        self,
        task: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        **submit_options: Any,
    ) -> Any:
        """Submit, wait, and return the task's result.

        Raises:
            TaskFailed: the task ended failed (carries its error envelope).
            TaskCanceled: the task ended canceled.
            TaskTimeout: it did not finish within ``timeout_ms``.
        """
        submitted = await self.submit(task, payload, **submit_options)
        done = await self.wait(
            submitted.id, timeout_ms=timeout_ms, poll_ms=poll_ms, max_poll_ms=max_poll_ms
        )
        return _outcome(done)

    async def watch(
        self, queues: Iterable[str] = ("default",), *, poll_ms: int = DEFAULT_WATCH_POLL_MS
    ) -> AsyncIterator[WatchSignal]:
        """Signals that something may have changed: push when possible, a timer otherwise.

        Yields ``WatchSignal("queued", queue)`` when a task becomes queued on one of
        ``queues``, ``WatchSignal("done", task_id)`` when any task finishes, and
        ``WatchSignal("poll", "")`` after ``poll_ms`` without either. Pushes come
        from this process's own writes and, on PostgreSQL, from NOTIFY; they are
        hints, so re-read the database when one arrives.

        Example::

            async for signal in cq.watch(["emails"]):
                if signal.kind != "done":
                    print(await cq.stats("emails"))
        """
        wanted = frozenset(_ops.check_names(queues, "queues"))
        interval = _ops.check_int(poll_ms, "poll_ms", low=1) / 1000
        await self.open()

        def match(emit: Emit) -> bool:
            return emit.channel == "done" or emit.value in wanted

        with self.backend.hub.subscribe(match, buffer=WATCH_BUFFER) as sub:
            while True:
                await sub.wait_async(interval)
                sub.clear()
                events = sub.drain()
                if not events:
                    yield WatchSignal("poll", "")
                for event in events:
                    yield WatchSignal(event.channel, event.value)


class SyncCairnQ(_ClientCore):
    """The blocking client: ``CairnQ``'s operations for code without an event loop.

    Example::

        with SyncCairnQ.sqlite("tasks.db") as cq:
            task = cq.submit("report.build", {"month": "2026-11"})
            print(cq.wait(task.id).result)
    """

    def open(self) -> SyncCairnQ:
        """Connect and migrate now rather than on first use."""
        self.backend.open()
        return self

    def close(self) -> None:
        """Close the backend if this client created it."""
        if self._owns_backend:
            self.backend.close()

    def __enter__(self) -> SyncCairnQ:
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
        task: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
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
    ) -> Task:
        """Enqueue a task; see ``CairnQ.submit``."""
        spec = self._new_task(
            task,
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
        if not self.submit_hooks:
            return self._store_spec(spec, conn)
        (spec,), finishers = before_submit(self.submit_hooks, [spec], self.codec)
        try:
            stored = self._store_spec(spec, conn)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, [stored], None)
        return stored

    def _store_spec(self, spec: _ops.NewTask, conn: Any) -> Task:
        if self.gate.limit_for(spec.queue) is not None:
            self._follow(self.gate.admit(spec.queue))
        op = _ops.insert(spec) if spec.key is None else _ops.submit(spec)
        if conn is not None:
            result: Task = self._transactional(conn)(conn, op)
            return result
        return self._run(op, write=True)

    def submit_many(self, tasks: Iterable[SubmitItem], *, conn: Any = None) -> TaskList:
        """Submit many tasks in one transaction; see ``CairnQ.submit_many``."""
        specs = [self._item(item) for item in tasks]
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

    def _store_many(self, specs: list[_ops.NewTask], conn: Any) -> TaskList:
        for queue, count in Counter(spec.queue for spec in specs).items():
            if self.gate.limit_for(queue) is not None:
                self._follow(self.gate.admit(queue, count))
        if conn is not None:
            result: TaskList = self._transactional(conn)(conn, _ops.submit_many(specs))
            return result
        return self._run(_ops.submit_many(specs), write=True)

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        return self._run(_ops.get(task_id), write=False)

    def get_by_key(self, key: str) -> Task | None:
        """The task a key currently points at, or ``None``."""
        return self._run(_ops.get_by_key(key), write=False)

    def get_status(self, task_id: str) -> TaskRef | None:
        """Just ``(id, status)``."""
        return self._run(_ops.get_status(task_id), write=False)

    def get_status_by_key(self, key: str) -> TaskRef | None:
        """``(id, status)`` of the task a key points at."""
        return self._run(_ops.get_status_by_key(key), write=False)

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
        op = _ops.list_tasks(
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
        """Cancel a task; see ``CairnQ.cancel``."""
        return self._run(_ops.cancel(task_id), write=True)

    def cancel_by_key(self, key: str) -> Task | None:
        """``cancel`` the task a key points at."""
        return self._run(_ops.cancel_by_key(key), write=True)

    def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Queue a failed or canceled task again; see ``CairnQ.retry``."""
        return self._run(_ops.retry(task_id, bool(reset_attempt)), write=True)

    def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        """``retry`` the task a key points at."""
        return self._run(_ops.retry_by_key(key, bool(reset_attempt)), write=True)

    def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> IdList:
        """Delete finished tasks; see ``CairnQ.purge``."""
        op = _ops.purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )
        return self._run(op, write=True)

    def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """Task counts ``{queue: {status: n}}``."""
        return self._run(_ops.stats(queue), write=False)

    def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom under ``max_depth`` queued tasks of ``queue``."""
        return self._run(_ops.queue_depth(queue, max_depth), write=False)

    def overview(self) -> SummaryList:
        """Every queue with its counts and oldest due queued age; see ``CairnQ.overview``."""
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
        """One keyset page of tasks, newest first; see ``CairnQ.list_page``."""
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
        """Tasks finished per queue and time bucket; see ``CairnQ.activity``."""
        op = _reads.activity(window_ms=window_ms, bucket_ms=bucket_ms, queue=queue)
        return self._run(op, write=False)

    def workers(self, *, within_ms: int = 60_000) -> WorkerList:
        """Workers alive now and what they run; see ``CairnQ.workers``."""
        return self._run(_reads.workers(within_ms=within_ms), write=False)

    def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
    ) -> Task:
        """Block until the task is finished; see ``CairnQ.wait``."""
        with self.backend.hub.subscribe(wants_done(task_id)) as sub:
            procedure = _waiting(
                lambda: _ops.get_status(task_id),
                sub,
                task_id=task_id,
                key=None,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
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
        """Block until the key's task is finished; see ``CairnQ.wait_by_key``."""
        with self.backend.hub.subscribe(lambda e: e.channel == "done") as sub:
            procedure = _waiting(
                lambda: _ops.get_status_by_key(key),
                sub,
                task_id=None,
                key=key,
                timeout_ms=timeout_ms,
                poll_ms=poll_ms,
                max_poll_ms=max_poll_ms,
                clock=self._clock(),
            )
            return self._follow(procedure, sub)

    def _follow(self, procedure: Procedure[T], sub: Subscription | None = None) -> T:
        return follow(procedure, self._run_step, sub)

    def _run_step(self, op: Op[Any], write: bool) -> Any:
        return self.backend.run(op, write=write)

    def call(
        self,
        task: str | TaskDef[Any, Any],
        payload: Any = None,
        *,
        timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        max_poll_ms: int = DEFAULT_MAX_POLL_MS,
        **submit_options: Any,
    ) -> Any:
        """Submit, wait, and return the result; see ``CairnQ.call``."""
        submitted = self.submit(task, payload, **submit_options)
        done = self.wait(
            submitted.id, timeout_ms=timeout_ms, poll_ms=poll_ms, max_poll_ms=max_poll_ms
        )
        return _outcome(done)
