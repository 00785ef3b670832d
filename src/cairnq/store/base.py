"""``TaskStore``: the protocol's operations one by one, with the reference SDK's signatures.

See ``cairnq.store`` for what the store is and which of its methods, replaced
on an instance or overridden by a subclass, change what the client and the
worker do; ``replaced`` is the one check of that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .. import kernel
from .._checks import (
    MAX_DELAY_MS,
    MAX_LIST_LIMIT,
    check_int,
    check_names,
    check_text,
    check_worker_id,
)
from .._json import DEFAULT_CODEC, JsonCodec
from .._wakeups import wants_done, wants_queued
from ..backends import Backend, InTransactionCompleter
from ..backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit, QueueGate
from ..errors import InvalidArgument, LostLease, SerializationError, UnsupportedBackend
from ..extensions import Endings, Extension
from ..hooks import SubmitHook, after_submit, before_submit
from ..kernel.points import Points
from ..kernel.procedures import afollow
from ..kernel.retention import Retention, RetentionSweeper
from ..kernel.store_calls import StoreCall
from ..models import Lease, Task, TaskRef
from ..protocol.steps import Op, Row
from ._leases import WORKER_CLAIM, WORKER_LEASE, LeaseMemory, current_lease, why_not_held

__all__ = ["ClaimDraw", "TaskStore", "replaced"]

T = TypeVar("T")

# Expired leases a claim moves out of ``running`` before it draws (as the worker's claims).
RECOVER_LIMIT = 100

_TaskList = list[Task]
_Ids = list[str]
_Values = list[Any]

ClaimDraw = Callable[[Sequence[str] | None, int], Awaitable[list[Task]]]
"""``claim_session``'s draw: ``await draw(names, limit)`` claims up to ``limit`` of ``names``."""


def replaced(store: TaskStore, name: str) -> bool:
    """Whether ``store``'s method ``name`` is not ``TaskStore``'s own: set on the instance
    (``store.get = my_get``) or overridden by a subclass.

    Where it is, the client, the worker, ``wait`` and the retention sweeper call
    ``getattr(store, name)`` where the reference SDK calls it; where it is not, they
    take their own path, which does the same with fewer round trips.

    Example::

        store.queue_depth = my_depth
        assert replaced(store, "queue_depth") and not replaced(store, "get")
    """
    return name in store.__dict__ or getattr(type(store), name) is not getattr(TaskStore, name)


class TaskStore:
    """The protocol's operations over one cairnq backend, with the reference SDK's signatures.

    Every method is a coroutine except ``use_backpressure`` and ``use_retention``.
    Use ``SQLiteStore`` or ``PostgresStore`` to open a database, or
    ``CairnQ.store`` for the store of a client you already have. Replace ``get``,
    ``queue_depth``, ``task_done_wake``, ``purge``, ``complete`` or
    ``claim_session`` on an instance, or override it in a subclass, and the
    client, the worker, ``wait`` and the retention sweeper over this store call
    yours (see ``cairnq.store``).

    Args:
        backend: The cairnq ``Backend`` the operations run on.
        owns_backend: Whether ``close()`` closes the backend (stores made from a
            path or a DSN own theirs; ``CairnQ.store`` does not).
        codec: JSON limits for payloads, metadata and results (the defaults).
        gate: The backpressure gate ``submit`` passes through (none by default).
        submit_hooks: The hooks every ``submit`` runs (``CairnQ.store`` shares the
            client's list, so a hook added with ``cq.add_submit_hook`` runs on
            ``cq.store.submit`` too).
        extensions: Extensions besides cairnq's own whose ending hooks its writes
            that end tasks run (``CairnQ.store`` passes the client's).

    Raises:
        InvalidArgument: ``backend`` is not a cairnq ``Backend``.

    Example::

        store = TaskStore(SQLiteBackend("tasks.db"), owns_backend=True)
        async with store:
            task = await store.submit(name="report.build")
            assert (await store.get_status(task.id)).status == "queued"
    """

    def __init__(
        self,
        backend: Backend,
        *,
        owns_backend: bool = False,
        codec: JsonCodec = DEFAULT_CODEC,
        gate: QueueGate | None = None,
        extensions: Sequence[Extension] = (),
        submit_hooks: list[SubmitHook] | None = None,
    ) -> None:
        if not isinstance(backend, Backend):
            raise InvalidArgument(f"a TaskStore runs over a cairnq Backend, got {backend!r}")
        self.backend = backend
        self.owns_backend = owns_backend
        self.codec = codec
        self.gate = gate if gate is not None else QueueGate(None)
        self.sweeper: RetentionSweeper | None = None
        # Run by every submit; the list itself is shared with a client over this store.
        self.submit_hooks: list[SubmitHook] = [] if submit_hooks is None else submit_hooks
        self._memory = LeaseMemory()
        # The hooks of the writes that end tasks or attempts, each once its extension is ready.
        self._endings = Endings(extensions)
        self._extensions = tuple(extensions)

    async def __aenter__(self) -> TaskStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- lifecycle ------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect and migrate (or verify); start the retention sweeper if one is installed."""
        await self.backend.aopen()
        if self.sweeper is not None and not self.sweeper.running:
            self.sweeper.start()

    async def close(self) -> None:
        """Stop retention; close the backend if this store made it (then: ``StoreClosed``)."""
        if self.sweeper is not None:
            await self.sweeper.stop()
        if self.owns_backend:
            await self.backend.aclose()

    async def protocol_version(self) -> int:
        """The database's ``protocol_version`` (0 when the meta row is missing)."""
        return await self._read(kernel.protocol_version())

    def use_backpressure(
        self, max_queue_depth: DepthLimit, *, max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS
    ) -> None:
        """Gate ``submit``: a queue holding ``max_queue_depth`` queued tasks makes it wait.

        Args:
            max_queue_depth: An int for every queue, ``{queue: int}``, or ``None`` (off).
            max_queue_wait_ms: How long a submit waits for room before ``QueueFull``.

        Raises:
            InvalidArgument: a limit below 1 or a negative wait.

        Example::

            store.use_backpressure({"emails": 10_000}, max_queue_wait_ms=5_000)
        """
        self.gate = QueueGate(max_queue_depth, max_queue_wait_ms, extensions=self._extensions)

    def use_retention(self, retention: Retention | int | None) -> None:
        """Sweep finished tasks while the store is connected (``None`` turns it off).

        Takes a ``Retention`` (or an int: milliseconds to keep finished tasks); the
        sweeper starts on the store's next ``connect()`` (call it again on a connected
        store to start it now) and stops on ``close()``. Install it before connecting:
        a client over this store (``CairnQ(store)``) does not connect the store, so
        connect the store yourself.

        Example::

            store.use_retention(Retention(older_than_ms=7 * 86_400_000))
        """
        policy = Retention.of(retention)
        self.sweeper = RetentionSweeper(self, policy) if policy else None

    # --- submit and reads -----------------------------------------------------------

    async def submit(
        self,
        *,
        name: str,
        payload: Any = None,
        queue: str = "default",
        key: str | None = None,
        conflict: str = "reuse",
        max_attempts: int = 3,
        priority: int = 0,
        metadata: Any = None,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        delay_ms: int = 0,
    ) -> Task:
        """Enqueue a task (through the store's submit hooks and backpressure gate, if any).

        Args:
            name: The handler name.
            payload, metadata: JSON values (``None`` stores ``{}``).
            queue, key, conflict, max_attempts, priority, delay_ms: As ``CairnQ.submit``.
            parent_id, root_id, correlation_id: Lineage (root defaults to the task).

        Returns:
            The stored task (for a reused key, the existing one).

        Raises:
            InvalidArgument: a bad argument; nothing is written.
            SerializationError: payload or metadata is not portable JSON.
            AlreadyExists: the key is taken and ``conflict="reject"``.
            QueueFull: backpressure waited ``max_queue_wait_ms`` for room.

        Example::

            task = await store.submit(name="email.send", payload={"to": "a@b.c"}, key="k1")
        """
        spec = kernel.new_task(
            self.codec,
            name,
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
            return await self._store(spec)
        (spec,), finishers = before_submit(self.submit_hooks, [spec], self.codec)
        try:
            stored = await self._store(spec)
        except BaseException as exc:
            after_submit(finishers, None, exc)
            raise
        after_submit(finishers, [stored], None)
        return stored

    async def _store(self, spec: kernel.NewTask) -> Task:
        if self.gate.gates_any:
            await afollow(self.gate.admit(spec.queue), self._run_step)
        if spec.key is None:
            return await self._write(kernel.insert(spec))
        points = await self._ends() if spec.conflict == "replace" else kernel.NO_POINTS
        return await self._write(kernel.submit(spec, points=points))

    async def get(self, task_id: str) -> Task | None:
        """The task, or ``None`` when there is none with that id."""
        return await self._read(kernel.get(task_id))

    async def get_by_key(self, key: str) -> Task | None:
        """The task the key points at, or ``None``."""
        return await self._read(kernel.get_by_key(key))

    async def get_status(self, task_id: str) -> TaskRef | None:
        """``TaskRef(id, status)`` of the task, or ``None``: a cheap probe."""
        return await self._read(kernel.get_status(task_id))

    async def get_status_by_key(self, key: str) -> TaskRef | None:
        """``TaskRef(id, status)`` of the task the key points at, or ``None``."""
        return await self._read(kernel.get_status_by_key(key))

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
    ) -> _TaskList:
        """Tasks matching every filter given, newest first.

        Raises:
            InvalidArgument: an unknown status, or a negative limit or offset.
        """
        return await self._read(
            kernel.list_tasks(
                status=status,
                queue=queue,
                name=name,
                root_id=root_id,
                correlation_id=correlation_id,
                limit=limit,
                offset=offset,
            )
        )

    async def stats(self, queue: str | None = None) -> dict[str, dict[str, int]]:
        """``{queue: {status: count}}``, zero-filled; a named queue always appears."""
        return await self._read(kernel.stats(queue))

    async def queue_depth(self, queue: str, max_depth: int) -> int:
        """Headroom of ``queue`` under ``max_depth`` queued tasks (0 when full).

        Raises:
            InvalidArgument: ``max_depth`` is negative (it must be >= 0).
        """
        return await self._read(kernel.queue_depth(queue, max_depth))

    # --- client writes --------------------------------------------------------------

    async def cancel(self, task_id: str) -> Task | None:
        """Cancel a queued task at once, or request a running one's cancel; ``None`` if terminal."""
        return await self._write(kernel.cancel(task_id, points=await self._ends()))

    async def cancel_by_key(self, key: str) -> Task | None:
        """``cancel`` of the task the key points at; ``None`` for an unknown key."""
        return await self._write(kernel.cancel_by_key(key, points=await self._ends()))

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        """Queue a failed or canceled task again; ``None`` for any other status."""
        return await self._write(kernel.retry(task_id, reset_attempt))

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        """``retry`` of the task the key points at; ``None`` for an unknown key."""
        return await self._write(kernel.retry_by_key(key, reset_attempt))

    async def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1000,
    ) -> _Ids:
        """Delete up to ``limit`` finished tasks older than ``older_than_ms``; returns their ids.

        Raises:
            InvalidArgument: a negative age, a limit below 1, or a status that is not terminal.
        """
        return await self._write(
            kernel.purge(
                older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
            )
        )

    # --- claiming -------------------------------------------------------------------

    async def claim(
        self,
        *,
        queues: Iterable[str],
        worker_id: str,
        lease_ms: int = 30_000,
        limit: int = 1,
        names: Iterable[str] | None = None,
    ) -> _TaskList:
        """Recover expired leases, then claim up to ``limit`` due tasks, in one transaction.

        Extensions' limits do not apply: only a worker's claims go through them
        (see ``cairnq.store``).

        Args:
            queues: The queues to claim from.
            worker_id: The claimant; owned writes are fenced on it.
            lease_ms: How long the claim holds each task without a heartbeat.
            limit: Most tasks to claim.
            names: Only these task names (``[]`` claims nothing; ``None``: any).

        Returns:
            The claimed tasks, now ``running``, in priority order.

        Example::

            tasks = await store.claim(queues=["default"], worker_id="w1", limit=10)
        """
        queue_list, worker, lease = self._claim_args(queues, worker_id, lease_ms)
        return await self._claim(queue_list, worker, lease, self._names(names), limit)

    async def claim_session(
        self,
        *,
        queues: Iterable[str],
        worker_id: str,
        lease_ms: int = 30_000,
        names: Iterable[str] | None,
        plan: Callable[[ClaimDraw], Awaitable[T]],
    ) -> T | None:
        """Probe for work; if there is any, run ``plan(draw)``; ``await draw(names, limit)`` claims.

        Returns ``None`` without claiming when the probe finds nothing due and no
        expired lease; else whatever ``plan`` returns. Each draw is a claim
        transaction of its own (recovery, then the draw). Called directly, its draws
        claim without extensions' limits, as ``claim`` does.

        A worker over this store claims through it when it is replaced: the
        worker's plan draws its draws, and ``draw`` then claims with the worker's
        limits and draw claimers (the kernel claim the worker's own path runs),
        handing the worker the rows it claimed. A replacement that does not call
        ``draw`` claims nothing for the worker.
        """
        queue_list, worker, lease = self._claim_args(queues, worker_id, lease_ms)
        listed = self._names(names)
        if listed == []:
            return None
        if not await self._read(kernel.probe(queue_list, listed)):
            return None

        async def draw(draw_names: Sequence[str] | None, limit: int) -> _TaskList:
            return await self._claim(queue_list, worker, lease, self._names(draw_names), limit)

        return await plan(draw)

    async def claim_wake(self, queues: Iterable[str], timeout_ms: int) -> None:
        """Sleep up to ``timeout_ms``, waking early when a task is queued on one of ``queues``.

        Wake-ups come from this process's writes, and on PostgreSQL from NOTIFY when
        the backend listens; polling again after the wait is still needed.
        """
        queue_list = check_names(queues, "queues")
        ms = check_int(timeout_ms, "timeout_ms", low=0, high=2**40)
        with self.backend.hub.subscribe(
            wants_queued(queue_list), claims=True, channels=("queued",)
        ) as sub:
            await sub.wait_async(ms / 1000)

    async def task_done_wake(self, task_id: str, timeout_ms: int) -> None:
        """Sleep up to ``timeout_ms``, waking early when the task finishes (as ``claim_wake``)."""
        ms = check_int(timeout_ms, "timeout_ms", low=0, high=2**40)
        with self.backend.hub.subscribe(wants_done(task_id), channels=("done",)) as sub:
            await sub.wait_async(ms / 1000)

    # --- owned writes ---------------------------------------------------------------

    async def heartbeat(self, *, task_id: str, worker_id: str, lease_ms: int = 30_000) -> Task:
        """Extend an owned lease to now + ``lease_ms``; the task carries any pending cancel.

        Raises:
            LostLease: ``worker_id`` no longer holds the task.
        """
        lease_ms = check_int(lease_ms, "lease_ms", low=1, high=2**40)
        return await self._owned(
            task_id, worker_id, lambda lease, _: kernel.heartbeat(lease, worker_id, lease_ms)
        )

    async def heartbeat_batch(
        self, *, task_ids: Iterable[str], worker_id: str, lease_ms: int = 30_000
    ) -> dict[str, bool]:
        """Renew many leases in one statement; returns ``{task_id: cancel_requested}``.

        A task missing from the answer is no longer held by ``worker_id``.
        """
        ids = [check_text(i, "task id") or "" for i in task_ids]
        worker = check_text(worker_id, "worker_id") or ""
        lease_ms = check_int(lease_ms, "lease_ms", low=1, high=2**40)
        leases = await self._leases_for(ids, worker)
        beat = await self._write(kernel.heartbeat_batch(list(leases.values()), worker, lease_ms))
        for lost in leases.keys() - beat.keys():
            self._memory.forget(lost, worker)
        return {i: bool(beat[i]) for i in ids if i in beat}

    async def progress(
        self, *, task_id: str, worker_id: str, progress: float | None, message: str | None
    ) -> Task:
        """Record progress and/or a message on an owned task (``None`` leaves either alone).

        Raises:
            LostLease: ``worker_id`` no longer holds the task.
        """
        return await self._owned(
            task_id,
            worker_id,
            lambda lease, _: kernel.progress(lease, worker_id, progress, message),
        )

    async def complete(self, *, task_id: str, worker_id: str, result: Any) -> Task:
        """Settle an owned task: succeeded with ``result``, or canceled when a cancel is pending.

        Raises:
            LostLease: ``worker_id`` no longer holds the task; nothing is written.
            SerializationError: ``result`` is not portable JSON.
        """
        encoded = self.codec.seal_optional(result, what="result")
        points = await self._settling_points(task_id, worker_id)
        return await self._owned(
            task_id,
            worker_id,
            lambda lease, started: kernel.complete(
                lease, worker_id, encoded, points=points, started=started
            ),
            True,
        )

    async def succeed(self, *, task_id: str, worker_id: str, result: Any) -> Task:
        """Settle an owned task as succeeded, whatever cancel is pending (the low-level primitive).

        Raises:
            LostLease: ``worker_id`` no longer holds the task.
            SerializationError: ``result`` is not portable JSON.
        """
        encoded = self.codec.seal_optional(result, what="result")
        points = await self._settling_points(task_id, worker_id)
        return await self._owned(
            task_id,
            worker_id,
            lambda lease, started: kernel.succeed(
                lease, worker_id, encoded, points=points, started=started
            ),
            True,
        )

    async def fail(
        self,
        *,
        task_id: str,
        worker_id: str,
        error: Mapping[str, Any],
        retryable: bool = True,
        delay_ms: int = 0,
    ) -> Task:
        """Settle a failed attempt: queued again after ``delay_ms`` when retryable with
        attempts left, else failed; canceled when a cancel is pending.

        ``error`` is stored as given (an envelope ``{type, code, message, retryable,
        details}``); one that is not JSON is stored stripped to its strings.

        Raises:
            LostLease: ``worker_id`` no longer holds the task.
            InvalidArgument: a negative ``delay_ms``.
        """
        delay = check_int(delay_ms, "delay_ms", low=0, high=MAX_DELAY_MS)
        encoded = self.codec.encode_error(error, retryable=bool(retryable))
        points = await self._ends()
        return await self._owned(
            task_id,
            worker_id,
            lambda lease, started: kernel.fail(
                lease,
                worker_id,
                encoded,
                retryable=bool(retryable),
                delay_ms=delay,
                points=points,
                started=started,
            ),
            True,
        )

    async def complete_in(
        self,
        *,
        task_id: str,
        worker_id: str,
        write: Callable[[Any], Awaitable[Any]],
    ) -> tuple[Task, Any]:
        """PostgreSQL: ``await write(conn)``, then ``complete`` with its value, in one transaction.

        ``conn`` is the transaction's psycopg ``AsyncConnection``. With a cancel
        already pending, ``write`` is not called and the task ends canceled.

        Returns:
            ``(task, value)``: the settled task and what ``write`` returned (``None`` if not run).

        Raises:
            UnsupportedBackend: the backend cannot (SQLite).
            LostLease: the lease was gone; ``write``'s changes rolled back.
        """
        if not isinstance(self.backend, InTransactionCompleter):
            raise UnsupportedBackend(
                f"complete_in needs PostgreSQL: {self.backend.dialect} cannot share a transaction "
                "between the handler's writes and the task's completion"
            )
        completer = self.backend
        worker = check_text(worker_id, "worker_id") or ""
        values: _Values = []

        async def run(conn: Any) -> Any:
            value = await write(conn)
            values.append(value)
            return value

        async def settle(lease: Lease) -> Row:
            row: Row = await completer.arun_around_write(
                kernel.hold(lease, worker),
                run,
                lambda v: kernel.complete_held(
                    lease,
                    worker,
                    self.codec.seal_optional(v, what="result"),
                    points=points,
                    started=started,
                ),
            )
            return row

        lease, started = await self._held(task_id, worker)
        points = await self._ends()
        try:
            row = await settle(lease)
        except LostLease:
            self._memory.forget(lease.id, worker)
            raise
        self._memory.forget(lease.id, worker)
        return Task.from_row(row), (values[0] if values else None)

    # --- internals ------------------------------------------------------------------

    async def _read(self, op: Op[T]) -> T:
        return await self.backend.arun(op, write=False)

    async def _write(self, op: Op[T]) -> T:
        return await self.backend.arun(op, write=True)

    async def _run_step(self, op: Op[Any], write: bool) -> Any:
        if isinstance(op, StoreCall):
            # The step stands for one of this store's methods: a replaced one answers it.
            if replaced(self, op.method):
                return await getattr(self, op.method)(*op.args, **op.kwargs)
            op = op.inner
        return await self.backend.arun(op, write=write)

    def _replaces(self, name: str) -> bool:
        """``replaced(self, name)``, for what takes a store without importing this module
        (the retention sweeper)."""
        return replaced(self, name)

    async def _ends(self) -> Points:
        """What a write ending a task or an attempt runs in its transaction: the ending
        hooks of the store's extensions ready on the database (the ledger read at most
        once a second while one is not)."""
        endings = self._endings
        if endings.stale():
            return endings.note(await self._read(kernel.applied_migrations()))
        return endings.points

    @staticmethod
    def _claim_args(queues: Iterable[str], worker_id: str, lease_ms: int) -> tuple[_Ids, str, int]:
        queue_list = check_names(queues, "queues")
        if not queue_list:
            raise InvalidArgument("claim needs at least one queue")
        worker = check_worker_id(worker_id) or ""
        return queue_list, worker, check_int(lease_ms, "lease_ms", low=1, high=2**40)

    @staticmethod
    def _names(names: Iterable[str] | None) -> _Ids | None:
        return None if names is None else check_names(names, "names")

    async def _claim(
        self, queues: _Ids, worker_id: str, lease_ms: int, names: _Ids | None, limit: int
    ) -> _TaskList:
        """One claim transaction: recovery, then the draw (with the extension points of
        the worker claiming through this store, if one is)."""
        count = check_int(limit, "limit", low=0, high=MAX_LIST_LIMIT)
        draws = [kernel.Draw(names, count)]
        handoff = WORKER_CLAIM.get()
        if handoff is not None and handoff.worker_id != worker_id:
            # A claim for another worker id, made inside a worker's replaced
            # claim_session: not the worker's, so neither its points nor its rows.
            handoff = None
        if handoff is None:
            # The store's own claim writes the worker id alone, as the reference's does.
            rows = await self._write(
                kernel.claim(queues, worker_id, lease_ms, draws, RECOVER_LIMIT, bare=True)
            )
        else:
            # The worker's first draw recovers as its own claim would; later ones do not.
            recover_limit, handoff.recover_limit = handoff.recover_limit, 0
            recovered: list[Row] = []
            claim = kernel.claim(
                queues,
                worker_id,
                lease_ms,
                draws,
                recover_limit,
                recovered,
                points=handoff.points,
                alone=handoff.alone,
            )
            rows = await self._write(claim)
            handoff.recovered.extend(recovered)
            handoff.rows.extend(rows)
        for row in rows:
            self._memory.remember(Lease.of(row), worker_id, int(row["updated_at_ms"]))
        if handoff is None:
            return [Task.from_row(row) for row in rows]
        return _tasks_of(rows)

    async def _leases_for(self, task_ids: Sequence[str], worker_id: str) -> dict[str, Lease]:
        """The lease of each task ``worker_id`` holds: the one a worker settling through
        this store holds, else remembered from this store's claims, else read from the
        database; tasks it does not hold are left out."""
        known, unknown = self._memory.split(task_ids, worker_id)
        handed = WORKER_LEASE.get()
        if handed is not None and handed.worker_id == worker_id and handed.lease.id in task_ids:
            known[handed.lease.id] = handed.lease
            unknown = [i for i in unknown if i != handed.lease.id]
        if unknown:
            known.update(await self._read(current_lease(unknown, worker_id)))
        return {i: known[i] for i in task_ids if i in known}

    async def _settling_points(self, task_id: str, worker_id: str) -> Points:
        """The ending hooks a settlement of ``task_id`` runs: those of the worker settling
        it through this store (a ``WorkerLease`` handed for the call), else the store's."""
        handed = WORKER_LEASE.get()
        if handed is not None and handed.lease.id == task_id and handed.worker_id == worker_id:
            return handed.points
        return await self._ends()

    async def _held(self, task_id: str, worker_id: str) -> tuple[Lease, int | None]:
        """The lease ``worker_id`` holds on the task and when it was claimed (``None``
        when unknown); ``LostLease`` when it holds none."""
        task = check_text(task_id, "task id") or ""
        lease = (await self._leases_for([task], worker_id)).get(task)
        if lease is None:
            if self._memory.ended(task, worker_id):
                raise LostLease(task)
            raise LostLease(task, await self._read(why_not_held(task, worker_id)))
        handed = WORKER_LEASE.get()
        if handed is not None and handed.lease == lease and handed.worker_id == worker_id:
            return lease, handed.started
        return lease, self._memory.claimed_at(task, worker_id)

    async def _owned(
        self,
        task_id: str,
        worker_id: str,
        make: Callable[[Lease, int | None], Op[Row]],
        settles: bool = False,
    ) -> Task:
        """Run ``make(lease, claimed_at_ms)`` on the attempt ``worker_id`` holds (the
        claim's time when known, else ``None``)."""
        worker = check_text(worker_id, "worker_id") or ""
        lease, started = await self._held(task_id, worker)
        try:
            row = await self._write(make(lease, started))
        except LostLease:
            self._memory.forget(lease.id, worker)
            raise
        if settles:
            self._memory.forget(lease.id, worker)
        return Task.from_row(row)


def _tasks_of(rows: Sequence[Row]) -> _TaskList:
    """The tasks of a worker's draw: a row refused by a draw claimer, or whose JSON cannot
    be read, is the worker's to fail, and is left out."""
    tasks: _TaskList = []
    for row in rows:
        if isinstance(row, dict) and row.get("refusal") is not None:
            continue
        try:
            tasks.append(Task.from_row(row))
        except SerializationError:
            continue
    return tasks
