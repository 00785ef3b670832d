"""The store layer: the protocol's operations one by one, as the reference SDK exposes them.

``TaskStore`` runs each operation over a cairnq ``Backend``; ``SQLiteStore`` and
``PostgresStore`` make that backend from a path or a PostgreSQL source, and
``CairnQ.store`` returns the store over any client's backend. The method names,
keyword-only signatures and return shapes are the reference SDK's (protocol
section 5.11), so code that drives its store directly runs on cairnq unchanged;
``CairnQ(store)`` and ``Worker(store, queues)`` take a store as well.

Owned writes (``heartbeat``, ``progress``, ``complete``, ``succeed``, ``fail``)
are fenced on the worker id, as in the reference, and also on the attempt and
the lease token of the claim (cairnq's fence against a stale handler writing
into a later claim under the same worker id). The store remembers the lease of
every claim it made; once that claim is lost or settled, the store's writes for
the task under that worker id raise ``LostLease`` until the store claims it
again, even if another process has since claimed it under the same worker id.
For a task it never claimed (another store or process, the same worker id), it
reads the current lease of the task, and uses it only if the task is running
under that worker id with a live lease. A task held by another worker id, or
claimed by an SDK that keeps no lease token, raises ``LostLease``. A store
remembers its last ``REMEMBERED_LEASES`` claims; one older than that is treated
as one it never claimed.

A write that ends a task or an attempt (``complete``, ``succeed``, ``fail``,
``complete_in``, ``cancel``, ``cancel_by_key``, and the cancel of a
``conflict="replace"`` submit) runs, in its transaction, the ending hooks of the
store's extensions (cairnq's own and those given, ``extensions.Endings``) that are
ready on the database, as cairnq's worker and client do: with the workflow tables
it decides the task's parked dependents (a dependent released is due once the
write returns, and a success is recorded for a dependent still waiting on others,
so a purge cannot undo it); with the attempt history's table a settlement records
the attempt. Where no extension is ready these writes are the protocol's
statements alone.

Example::

    from cairnq import SQLiteStore

    store = SQLiteStore("tasks.db")
    await store.connect()
    await store.submit(name="email.send", payload={"to": "ada@example.com"})
    [task] = await store.claim(queues=["default"], worker_id="w1")
    await store.complete(task_id=task.id, worker_id="w1", result={"sent": True})
    await store.close()
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from . import kernel
from ._checks import MAX_DELAY_MS, MAX_LIST_LIMIT, check_int, check_names, check_text
from ._json import DEFAULT_CODEC, JsonCodec
from ._wakeups import wants_done, wants_queued
from .backends import (
    Backend,
    InTransactionCompleter,
    PgExecutorBackend,
    SQLiteBackend,
    is_executor,
    registration,
)
from .backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit, QueueGate
from .errors import InvalidArgument, LostLease, UnsupportedBackend
from .extensions import Endings, Extension
from .kernel.points import Points
from .kernel.procedures import afollow
from .kernel.retention import Retention, RetentionSweeper
from .models import Lease, Task, TaskRef
from .protocol.steps import NOW, Call, Op, Row

__all__ = ["ClaimDraw", "PostgresStore", "SQLiteStore", "TaskStore"]

T = TypeVar("T")

# Expired leases a claim moves out of ``running`` before it draws (as the worker's claims).
RECOVER_LIMIT = 100
# Claims remembered per store (held, and lost or settled); an evicted one is treated
# as a claim the store never made.
REMEMBERED_LEASES = 65_536

_TaskList = list[Task]
_Ids = list[str]
_Values = list[Any]

ClaimDraw = Callable[[Sequence[str] | None, int], Awaitable[list[Task]]]
"""``claim_session``'s draw: ``await draw(names, limit)`` claims up to ``limit`` of ``names``."""


def _current_lease(task_ids: Sequence[str], worker_id: str) -> Op[dict[str, Lease]]:
    """The lease each task is held under by ``worker_id`` now (running, lease live).

    Tasks held by anyone else, not running, or claimed without a lease token are left out.
    """
    rows = yield Call("lease_states", {"ids": list(task_ids), "now_ms": NOW})
    return {
        str(row["id"]): Lease(str(row["id"]), int(row["attempt"]), int(row["lease_token"]))
        for row in rows
        if row["status"] == "running"
        and row["worker_id"] == worker_id
        and row["lease_token"] is not None
        and row["lease_live"]
    }


class TaskStore:
    """The protocol's operations over one cairnq backend, with the reference SDK's signatures.

    Every method is a coroutine except ``use_backpressure`` and ``use_retention``.
    Use ``SQLiteStore`` or ``PostgresStore`` to open a database, or
    ``CairnQ.store`` for the store of a client you already have.

    Args:
        backend: The cairnq ``Backend`` the operations run on.
        owns_backend: Whether ``close()`` closes the backend (stores made from a
            path or a DSN own theirs; ``CairnQ.store`` does not).
        codec: JSON limits for payloads, metadata and results (the defaults).
        gate: The backpressure gate ``submit`` passes through (none by default).
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
    ) -> None:
        if not isinstance(backend, Backend):
            raise InvalidArgument(f"a TaskStore runs over a cairnq Backend, got {backend!r}")
        self.backend = backend
        self.owns_backend = owns_backend
        self.codec = codec
        self.gate = gate if gate is not None else QueueGate(None)
        self.sweeper: RetentionSweeper | None = None
        self._leases: OrderedDict[tuple[str, str], Lease] = OrderedDict()
        # When each remembered claim was made (the claimed row's ``updated_at_ms``).
        self._claimed_at: dict[tuple[str, str], int] = {}
        # (task, worker id) whose claim by this store was lost or settled: its writes
        # are refused until this store claims the task again.
        self._ended: OrderedDict[tuple[str, str], None] = OrderedDict()
        # The hooks of the writes that end tasks or attempts, each once its extension is ready.
        self._endings = Endings(extensions)

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
        self.gate = QueueGate(max_queue_depth, max_queue_wait_ms)

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
        self.sweeper = RetentionSweeper(self.backend, policy) if policy else None

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
        """Enqueue a task (through the backpressure gate, if any).

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
        transaction of its own (recovery, then the draw).
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
            self._forget(lost, worker)
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
        encoded = self.codec.encode_optional(result, what="result")
        points = await self._ends()
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
        encoded = self.codec.encode_optional(result, what="result")
        points = await self._ends()
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
                    self.codec.encode_optional(v, what="result"),
                    points=points,
                    started=self._claimed_at.get((lease.id, worker)),
                ),
            )
            return row

        lease = await self._lease(task_id, worker)
        points = await self._ends()
        try:
            row = await settle(lease)
        except LostLease:
            self._forget(lease.id, worker)
            raise
        self._forget(lease.id, worker)
        return Task.from_row(row), (values[0] if values else None)

    # --- internals ------------------------------------------------------------------

    async def _read(self, op: Op[T]) -> T:
        return await self.backend.arun(op, write=False)

    async def _write(self, op: Op[T]) -> T:
        return await self.backend.arun(op, write=True)

    async def _run_step(self, op: Op[Any], write: bool) -> Any:
        return await self.backend.arun(op, write=write)

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
        worker = check_text(worker_id, "worker_id") or ""
        return queue_list, worker, check_int(lease_ms, "lease_ms", low=1, high=2**40)

    @staticmethod
    def _names(names: Iterable[str] | None) -> _Ids | None:
        return None if names is None else check_names(names, "names")

    async def _claim(
        self, queues: _Ids, worker_id: str, lease_ms: int, names: _Ids | None, limit: int
    ) -> _TaskList:
        count = check_int(limit, "limit", low=0, high=MAX_LIST_LIMIT)
        draw = kernel.Draw(names, count)
        rows = await self._write(kernel.claim(queues, worker_id, lease_ms, [draw], RECOVER_LIMIT))
        for row in rows:
            self._remember(Lease.of(row), worker_id, int(row["updated_at_ms"]))
        return [Task.from_row(row) for row in rows]

    def _remember(self, lease: Lease, worker_id: str, claimed_at_ms: int) -> None:
        self._leases[(lease.id, worker_id)] = lease
        self._leases.move_to_end((lease.id, worker_id))
        self._claimed_at[(lease.id, worker_id)] = claimed_at_ms
        self._ended.pop((lease.id, worker_id), None)
        while len(self._leases) > REMEMBERED_LEASES:
            evicted, _ = self._leases.popitem(last=False)
            self._claimed_at.pop(evicted, None)

    def _forget(self, task_id: str, worker_id: str) -> None:
        """This store's claim of ``task_id`` under ``worker_id`` ended (lost or settled)."""
        self._leases.pop((task_id, worker_id), None)
        self._claimed_at.pop((task_id, worker_id), None)
        self._ended[(task_id, worker_id)] = None
        self._ended.move_to_end((task_id, worker_id))
        while len(self._ended) > REMEMBERED_LEASES:
            self._ended.popitem(last=False)

    async def _leases_for(self, task_ids: Sequence[str], worker_id: str) -> dict[str, Lease]:
        """The lease of each task ``worker_id`` holds: remembered from this store's claims,
        else read from the database; tasks it does not hold are left out."""
        known = {
            i: self._leases[(i, worker_id)] for i in task_ids if (i, worker_id) in self._leases
        }
        unknown = [i for i in task_ids if i not in known and (i, worker_id) not in self._ended]
        if unknown:
            known.update(await self._read(_current_lease(unknown, worker_id)))
        return {i: known[i] for i in task_ids if i in known}

    async def _lease(self, task_id: str, worker_id: str) -> Lease:
        task = check_text(task_id, "task id") or ""
        lease = (await self._leases_for([task], worker_id)).get(task)
        if lease is None:
            raise LostLease(task)
        return lease

    async def _owned(
        self,
        task_id: str,
        worker_id: str,
        make: Callable[[Lease, int | None], Op[Row]],
        settles: bool = False,
    ) -> Task:
        """Run ``make(lease, claimed_at_ms)`` on the attempt ``worker_id`` holds (the
        claim's time when this store made it, else ``None``)."""
        worker = check_text(worker_id, "worker_id") or ""
        lease = await self._lease(task_id, worker)
        try:
            row = await self._write(make(lease, self._claimed_at.get((lease.id, worker))))
        except LostLease:
            self._forget(lease.id, worker)
            raise
        if settles:
            self._forget(lease.id, worker)
        return Task.from_row(row)


class SQLiteStore(TaskStore):
    """A store on a SQLite file, created and migrated on ``connect()``.

    Args:
        path: The database file (its directory must exist).
        busy_timeout_ms: How long a write waits for another process's lock.
        **options: Further ``SQLiteBackend`` options (``clock``, ``migrate``, ...).

    Example::

        store = SQLiteStore("tasks.db")
        await store.connect()
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000, **options: Any
    ) -> None:
        super().__init__(
            SQLiteBackend(path, busy_timeout_ms=busy_timeout_ms, **options), owns_backend=True
        )


class PostgresStore(TaskStore):
    """A store on PostgreSQL, through a DSN or the application's psycopg pool or connection.

    Args:
        source: A DSN (``postgresql://user@host/db``), a psycopg pool or connection
            (used, never closed).
        min_size, max_size: Pool size when the store makes the pool.
        schema: The schema holding cairnq's tables (see ``PostgresBackend``).
        **options: Further ``PostgresBackend`` options (``migrate``, ``listen``, ...).

    Raises:
        InvalidArgument: ``source`` is none of these.

    Example::

        store = PostgresStore("postgresql://localhost/app", max_size=4)
        await store.connect()
    """

    def __init__(
        self,
        source: Any,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(
            _postgres_backend(
                source, min_size=min_size, max_size=max_size, schema=schema, **options
            ),
            owns_backend=True,
        )


def _postgres_backend(source: Any, **options: Any) -> Backend:
    """The backend a ``PostgresStore`` runs on, for every kind of ``source`` it accepts.

    A ``PgExecutor`` (``create_pool_executor``, or one's own) runs on the executor
    backend, which sizes no pool; anything else is opened through the backend
    registry: the ``postgresql`` opener takes a DSN, a psycopg pool or a connection.
    """
    if is_executor(source):
        options.pop("min_size", None)
        options.pop("max_size", None)
        return PgExecutorBackend(source, **options)
    entry = registration("postgresql")
    if entry is None:  # pragma: no cover - registered when cairnq.backends loads
        raise UnsupportedBackend("no PostgreSQL backend is registered")
    return entry.opener(source, **options)
