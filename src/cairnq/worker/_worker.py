"""The worker's lifecycle: claim, run, heartbeat, drain, stop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

from .. import _ids
from .._crashpoints import crashpoint
from .._wakeups import Subscription, wants_queued
from ..backends import Backend, SQLiteBackend
from ..backoff import DEFAULT_BASE_MS, DEFAULT_MAX_MS
from ..backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit, QueueGate
from ..client import CairnQ
from ..errors import (
    DatabaseError,
    DatabaseUnavailable,
    EventLoopBlocked,
    InvalidArgument,
    SchemaIncomplete,
    SerializationError,
    error_envelope,
)
from ..models import Task, TaskDef
from ..protocol import ops as _ops
from ..retention import Retention, RetentionSweeper
from ._claiming import group_calls, plan_claim
from ._context import CallScope, Listener, Runtime, TaskContext, TaskEvent
from ._executor import Executor, OnError
from ._presence import Presence
from ._registry import Handler, Registration, Registry
from ._settling import Settler

log = logging.getLogger("cairnq.worker")

F = TypeVar("F", bound=Handler)

RECOVER_LIMIT = 100
RECOVERY_BATCHES = 10
SHUTDOWN_WRITE_TIMEOUT_S = 5.0
CLAIM_ERROR_BACKOFF_S = (0.25, 5.0)


def _default_on_error(exc: BaseException, context: dict[str, Any]) -> None:
    log.error("worker error during %s", context.get("phase", "?"), exc_info=exc, extra=context)


def _safe(on_error: OnError) -> OnError:
    """``on_error``, made unable to take a worker loop down with it."""

    def report(exc: BaseException, context: dict[str, Any]) -> None:
        try:
            on_error(exc, context)
        except Exception:
            log.exception("on_error hook raised; the worker carries on", extra=context)

    return report


class Worker:
    """Claims tasks from the database and runs their handlers.

    Args:
        store: A ``CairnQ`` client, a ``Backend``, or a database URL / SQLite path.
        queues: Queues to serve (``("default",)``).
        concurrency: Handler calls running at once (a batch call counts once).
        lease_ms: How long a claim holds a task without a heartbeat (30 s).
        poll_interval_ms: Longest idle wait between claims when nothing wakes the worker.
        heartbeat_interval_ms: Lease renewal period (``lease_ms // 3``, at least 50 ms).
        retry_backoff_ms, retry_backoff_max_ms: Retry delay window (1 s doubling to 30 s).
        max_run_ms: Abandon an attempt after this long and fail it as ``handler_timeout``.
        claim_batch: Most tasks taken per claim draw (default: free capacity).
        max_in_flight_bytes: Stop claiming while this many payload bytes are in flight.
        drain_timeout_ms: On stop, how long in-flight calls may finish (30 s).
        on_error: ``on_error(exc, context)`` for errors the worker survives
            (claims, heartbeats, settlements, ``EventLoopBlocked``).
        on_event: ``on_event(TaskEvent)`` when a task starts, succeeds, fails, is
            retried, canceled or lost here, or its expired lease is recovered
            here (more listeners: ``subscribe``).
        max_queue_depth, max_queue_wait_ms: Backpressure for ``ctx.submit`` (see
            ``CairnQ``).
        retention: A ``Retention`` this worker sweeps (one process sweeps at a time).
        recovery_interval_ms: How often this worker moves expired leases out of
            ``running`` for every queue, even while it is busy (``lease_ms // 2``,
            at most 30 s).

    Example::

        worker = Worker.sqlite("tasks.db", queues=["default"], concurrency=8)

        @worker.task
        async def send_email(ctx, payload):
            await ctx.progress(0.5, "rendering")
            return {"sent": True}

        worker.serve()   # until SIGINT / SIGTERM
    """

    def __init__(
        self,
        store: CairnQ | Backend | str | os.PathLike[str],
        *,
        queues: Iterable[str] = ("default",),
        concurrency: int = 1,
        lease_ms: int = 30_000,
        poll_interval_ms: int = 500,
        heartbeat_interval_ms: int | None = None,
        retry_backoff_ms: int = DEFAULT_BASE_MS,
        retry_backoff_max_ms: int = DEFAULT_MAX_MS,
        max_run_ms: int | None = None,
        claim_batch: int | None = None,
        max_in_flight_bytes: int | None = None,
        drain_timeout_ms: int = 30_000,
        on_error: OnError | None = None,
        on_event: Listener | None = None,
        max_queue_depth: DepthLimit = None,
        max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS,
        retention: Retention | int | None = None,
        recovery_interval_ms: int | None = None,
        worker_id: str | None = None,
    ) -> None:
        if isinstance(store, CairnQ):
            self.client = store
        else:
            self.client = CairnQ(store)
        # A client made here from a URL owns its backend; closing the worker closes it.
        self._owns_client = not isinstance(store, (CairnQ, Backend))
        self.queues = _ops.check_names(queues, "queues")
        if not self.queues:
            raise InvalidArgument("a worker needs at least one queue")
        self.concurrency = _ops.check_int(concurrency, "concurrency", low=1, high=100_000)
        self.lease_ms = _ops.check_int(lease_ms, "lease_ms", low=100, high=2**40)
        self.poll_interval_ms = _ops.check_int(poll_interval_ms, "poll_interval_ms", low=1)
        if heartbeat_interval_ms is None:
            heartbeat_interval_ms = min(max(50, self.lease_ms // 3), self.lease_ms // 2)
        self.heartbeat_interval_ms = _ops.check_int(
            heartbeat_interval_ms, "heartbeat_interval_ms", low=1, high=self.lease_ms - 1
        )
        self.max_run_ms = (
            None if max_run_ms is None else _ops.check_int(max_run_ms, "max_run_ms", low=1)
        )
        self.claim_batch = (
            None if claim_batch is None else _ops.check_int(claim_batch, "claim_batch", low=1)
        )
        self.max_in_flight_bytes = (
            None
            if max_in_flight_bytes is None
            else _ops.check_int(max_in_flight_bytes, "max_in_flight_bytes", low=1, high=2**62)
        )
        self.drain_timeout_ms = _ops.check_int(drain_timeout_ms, "drain_timeout_ms", low=0)
        self.worker_id = _ops.check_text(worker_id, "worker_id", optional=True) or _ids.worker_id()
        self.on_error: OnError = on_error or _default_on_error
        self._report: OnError = _safe(self.on_error)
        if recovery_interval_ms is None:
            recovery_interval_ms = min(30_000, max(100, self.lease_ms // 2))
        self.recovery_interval_ms = _ops.check_int(
            recovery_interval_ms, "recovery_interval_ms", low=1, high=2**40
        )
        gate = (
            self.client.gate
            if max_queue_depth is None
            else QueueGate(max_queue_depth, max_queue_wait_ms)
        )
        self._runtime = Runtime(
            client=self.client,
            worker_id=self.worker_id,
            lease_ms=self.lease_ms,
            retry_backoff_ms=_ops.check_int(retry_backoff_ms, "retry_backoff_ms", low=0),
            retry_backoff_max_ms=_ops.check_int(
                retry_backoff_max_ms, "retry_backoff_max_ms", low=0
            ),
            gate=gate,
            listeners=[on_event] if on_event is not None else [],
        )
        policy = Retention.of(retention)
        self.sweeper = RetentionSweeper(self.client.backend, policy) if policy else None
        self.registry = Registry()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._wake: Subscription | None = None
        self._running = False
        self._calls: set[asyncio.Task[None]] = set()
        self._settling: set[asyncio.Task[Any]] = set()
        self._backlog = False
        self._until_idle = False
        # An error no retry can cure (tables gone, the SQLite file gone): the worker
        # stops and run() raises it.
        self._fatal: DatabaseError | None = None
        self._contexts: dict[str, TaskContext] = {}
        self._calls_by_name: Counter[str] = Counter()
        self._bytes_in_flight = 0
        self._typical_payload = 1024.0
        self._turn = 0
        self._drain_deadline: float | None = None
        self._started: asyncio.Event | None = None
        self._rejects: set[asyncio.Future[Any]] = set()
        self._beat_sent = 0.0
        self._presence: Presence | None = None

    @classmethod
    def sqlite(
        cls,
        path: str | os.PathLike[str],
        *,
        queues: Iterable[str] = ("default",),
        concurrency: int = 1,
        lease_ms: int = 30_000,
        busy_timeout_ms: int = 5000,
        **options: Any,
    ) -> Worker:
        """A worker on a SQLite file (created and migrated on first use)."""
        backend_keys = {"synchronous", "clock", "migrate"}
        backend_kw = {k: options.pop(k) for k in list(options) if k in backend_keys}
        backend = SQLiteBackend(path, busy_timeout_ms=busy_timeout_ms, **backend_kw)
        return cls._owning(backend, queues, concurrency, lease_ms, options)

    @classmethod
    def _owning(
        cls,
        backend: Backend,
        queues: Iterable[str],
        concurrency: int,
        lease_ms: int,
        options: dict[str, Any],
    ) -> Worker:
        """A worker that closes ``backend`` when it is closed."""
        client = CairnQ(backend)
        client._owns_backend = True
        worker = cls(client, queues=queues, concurrency=concurrency, lease_ms=lease_ms, **options)
        worker._owns_client = True
        return worker

    @classmethod
    def postgres(
        cls,
        source: Any,
        *,
        queues: Iterable[str] = ("default",),
        concurrency: int = 1,
        lease_ms: int = 30_000,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        **options: Any,
    ) -> Worker:
        """A worker on PostgreSQL: a DSN, or the application's psycopg async pool.

        Its connections are named ``cairnq-worker`` (``-heartbeat``, ``-listen``)
        in ``pg_stat_activity``.
        """
        from ..backends.postgres import PostgresBackend

        backend_keys = {"clock", "migrate", "listen", "application_name", "listen_health_s"}
        backend_kw = {k: options.pop(k) for k in list(options) if k in backend_keys}
        backend = PostgresBackend(
            source, schema=schema, min_size=min_size, max_size=max_size, role="worker", **backend_kw
        )
        return cls._owning(backend, queues, concurrency, lease_ms, options)

    def __repr__(self) -> str:
        return f"<Worker {self.worker_id} queues={self.queues} concurrency={self.concurrency}>"

    # --- registration -----------------------------------------------------------------

    @overload
    def task(self, fn: F, /) -> F: ...

    @overload
    def task(
        self,
        name: str | TaskDef[Any, Any] | None = None,
        /,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
    ) -> Callable[[F], F]: ...

    def task(
        self,
        name_or_fn: Any = None,
        /,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
    ) -> Any:
        """Register a handler: ``@worker.task``, ``@worker.task("name")``, ``@worker.task(defn)``.

        Args:
            batch: Deliver up to this many tasks per call as a list of contexts;
                return ``{task_id: result}`` (missing ids succeed with ``None``).
            concurrency: At most this many calls of this name at once in this worker.

        A handler taking two positional parameters gets ``(ctx, payload)``, one
        gets ``(ctx)``. ``async def`` handlers run on the event loop; plain
        ``def`` handlers run in threads with a blocking ``SyncTaskContext``.
        """
        if callable(name_or_fn) and not isinstance(name_or_fn, (str, TaskDef)):
            self.registry.add(None, name_or_fn, batch=batch, concurrency=concurrency)
            return name_or_fn

        def decorate(fn: F) -> F:
            self.registry.add(name_or_fn, fn, batch=batch, concurrency=concurrency)
            return fn

        return decorate

    def register(
        self,
        name: str | TaskDef[Any, Any],
        fn: Handler,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
    ) -> Registration:
        """Register ``fn`` as the handler of ``name`` (the imperative ``task``)."""
        return self.registry.add(name, fn, batch=batch, concurrency=concurrency)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(TaskEvent)`` for every task event here; returns an unsubscribe."""
        self._runtime.listeners.append(listener)
        return lambda: self._runtime.listeners.remove(listener)

    def add_call_scope(self, scope: CallScope) -> Callable[[], None]:
        """Run every handler call inside ``scope(contexts)``, a context manager.

        The scope is entered on the worker's event loop before the call's
        ``started`` events and exited once its settlements are written (or the
        call was abandoned), so every task event of the call arrives while it
        is open.
        Context variables it sets are visible to the handler, plain ``def``
        handlers in their threads included. Tracing uses it to make each
        attempt's span current. A scope that fails to enter goes to ``on_error``
        and the call runs without it.

        Args:
            scope: ``scope(list of TaskContext) -> context manager``.

        Returns:
            A function that removes the scope again.

        Raises:
            InvalidArgument: ``scope`` is not callable.

        Example::

            @contextlib.contextmanager
            def timed(contexts):
                started = time.monotonic()
                yield
                print(contexts[0].name, time.monotonic() - started)

            worker.add_call_scope(timed)
        """
        if not callable(scope):
            raise InvalidArgument(f"a call scope must be callable, got {scope!r}")
        scopes = self._runtime.scopes
        scopes.append(scope)

        def remove() -> None:
            if scope in scopes:
                scopes.remove(scope)

        return remove

    # --- lifecycle --------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming and drain in-flight work; safe from any thread or a signal handler."""
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._begin_stop()
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        """Close the client and backend if this worker created them."""
        if self._owns_client:
            await self.client.close()

    def serve(self, *, until_idle: bool = False) -> None:
        """Run until SIGINT or SIGTERM, drain in-flight work, then return.

        A second signal stops at once: in-flight tasks are released for retry.

        Args:
            until_idle: Also return once nothing is due and nothing runs (see ``run``).
        """
        asyncio.run(self._serve(until_idle))

    async def _serve(self, until_idle: bool) -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.ensure_future(self.run(until_idle=until_idle))
        signals = 0

        def on_signal(signum: int) -> None:
            nonlocal signals
            signals += 1
            if signals == 1:
                log.info(
                    "received %s: draining (up to %d ms)",
                    signal.Signals(signum).name,
                    self.drain_timeout_ms,
                    extra={"worker_id": self.worker_id},
                )
                self.stop()
            else:
                log.warning(
                    "received a second signal: stopping now", extra={"worker_id": self.worker_id}
                )
                self._drain_deadline = 0.0

        installed: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal, sig)
                installed.append(sig)
        try:
            await main
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
            await self.close()

    @contextlib.asynccontextmanager
    async def background(self) -> AsyncIterator[Worker]:
        """Run the worker in this event loop for the duration of a ``with`` block.

        Example::

            async with worker.background():
                print(await cq.call("add", {"a": 1, "b": 2}))
        """
        self._started = asyncio.Event()
        main = asyncio.ensure_future(self.run())
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({main, started}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if main.done():
            main.result()
        try:
            yield self
        finally:
            self.stop()
            await main

    async def run(self, *, concurrency: int | None = None, until_idle: bool = False) -> None:
        """Claim and run tasks until ``stop()``; then drain in-flight calls.

        Args:
            concurrency: Override the worker's handler calls at once.
            until_idle: Also stop once no task of the worker's queues is due and
                none is running: a batch run that empties the queues and returns.
                Tasks delayed into the future (including retries in backoff)
                are left queued.

        Raises:
            InvalidArgument: no handlers are registered.
            RuntimeError: the worker is already running.
            DatabaseUnavailable: the worker stopped because its SQLite file was
                deleted, renamed or replaced while it ran (logged once as an
                error). In-flight calls are abandoned: nothing can settle them.
            SchemaIncomplete: cairnq's tables are missing (at start, or met by a
                claim or a lease recovery later); the worker drains and stops
                instead of retrying, since only a migration can fix it.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        if not len(self.registry):
            raise InvalidArgument("no task handlers are registered on this worker")
        if concurrency is not None:
            self.concurrency = _ops.check_int(concurrency, "concurrency", low=1, high=100_000)
        # Stop requests (signals) count from here, even while the database is opening.
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._drain_deadline = None
        self._until_idle = until_idle
        self._fatal = None
        self._running = True
        try:
            await self.client.open()
            await self.client.backend.arun(_ops.check_lease_tokens(), write=False)
        except BaseException:
            self._running = False
            raise
        threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="cairnq-handler"
        )
        self._executor = Executor(
            max_run_ms=self.max_run_ms,
            threads=threads,
            on_error=self._report,
            scopes=self._runtime.scopes,
        )
        self._wake = self.client.backend.hub.subscribe(wants_queued(self.queues), claims=True)
        self._executor.on_thread_freed = self._wake.set
        self._executor.on_handler_done = self._handler_done
        self._runtime.settler = Settler(self.client.backend, self.worker_id)
        if self._started is not None:
            self._started.set()
        self._presence = Presence(
            self.client.backend, self.worker_id, self.queues, self.concurrency, self._report
        )
        self._presence.start()
        heartbeat = asyncio.ensure_future(self._heartbeat_loop())
        maintenance = asyncio.ensure_future(self._recovery_loop())
        presence = asyncio.ensure_future(self._presence.run())
        if self.sweeper is not None:
            self.sweeper.start()
        log.info(
            "worker started",
            extra={
                "worker_id": self.worker_id,
                "queues": self.queues,
                "concurrency": self.concurrency,
            },
        )
        try:
            await self._claim_loop()
        finally:
            if self.sweeper is not None:
                await self.sweeper.stop()
            maintenance.cancel()
            await self._drain()
            heartbeat.cancel()
            presence.cancel()
            for loop_task in (heartbeat, maintenance, presence):
                with contextlib.suppress(asyncio.CancelledError):
                    await loop_task
            await self._presence.stop()
            threads.shutdown(wait=False, cancel_futures=True)
            self._wake.close()
            self._running = False
            log.info("worker stopped", extra={"worker_id": self.worker_id})
        if self._fatal is not None:
            raise self._fatal

    # --- claiming ---------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        assert self._stopping is not None
        assert self._wake is not None
        wake, stopping = self._wake, self._stopping
        failures = 0
        check_file = getattr(self.client.backend, "check_file", None)
        next_check = 0.0
        while not stopping.is_set():
            if check_file is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + self.poll_interval_ms / 1000
                if not self._store_still_there(check_file):
                    return
            queued = wake.matched()
            # Clear first: a slot freed or a task queued from here on sets the latch again.
            wake.clear()
            # A call whose handler returned holds its slot only until its settlement
            # is written; claiming for it now lets claim and settlement share a commit.
            busy = len(self._calls) - len(self._settling) + self._executor.stuck_threads
            free = self.concurrency - busy
            room = self._byte_headroom()
            draws = self._plan(free, room) if free > 0 and room > 0 else []
            if not draws:
                await wake.wait_async(self.poll_interval_ms / 1000)
                continue
            try:
                rows = await self._claim(draws, probe=not queued)
            except Exception as exc:
                if check_file is not None and not self._store_still_there(check_file):
                    return
                failures += 1
                self._report(exc, {"phase": "claim", "worker_id": self.worker_id})
                if isinstance(exc, SchemaIncomplete):
                    self._give_up(exc)
                    break
                low, high = CLAIM_ERROR_BACKOFF_S
                await self._pause_after_error(min(high, low * 2 ** min(failures - 1, 5)))
                continue
            failures = 0
            if rows:
                self._dispatch(rows)
            elif self._until_idle and not self._calls:
                log.info(
                    "nothing is due; stopping (until_idle)", extra={"worker_id": self.worker_id}
                )
                self.stop()
            else:
                await wake.wait_async(self.poll_interval_ms / 1000)

    async def _pause_after_error(self, seconds: float) -> None:
        """Wait out an error backoff: only ``stop()`` ends it early.

        Wake-ups (a commit the file watcher saw, a NOTIFY, a freed slot) keep
        arriving while the database fails, and a failed SQLite write is itself
        a change the watcher reports: the backoff is a floor, so none of them
        may cut it short. They stay latched for the claim that follows.
        """
        assert self._stopping is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _store_still_there(self, check_file: Callable[[], None]) -> bool:
        """False, after logging once and stopping, when the backend's file is gone for good."""
        try:
            check_file()
        except Exception as exc:
            if not isinstance(exc, DatabaseUnavailable) or exc.retryable:
                return True  # not a lost file; a claim reports it if it persists
            log.error("worker stopping: %s", exc, extra={"worker_id": self.worker_id})
            self._fatal = exc
            # Nothing in flight can be settled any more: abandon it rather than drain.
            self._drain_deadline = 0.0
            self.stop()
            return False
        return True

    def _byte_headroom(self) -> int:
        """How many more tasks fit under ``max_in_flight_bytes``, judged by recent payloads.

        At least one task may always run, so a single oversized payload cannot stall the worker.
        """
        if self.max_in_flight_bytes is None:
            return self.concurrency
        if not self._calls:
            room = self.max_in_flight_bytes
        else:
            room = self.max_in_flight_bytes - self._bytes_in_flight
            if room <= 0:
                return 0
        return max(1 if not self._calls else 0, room // max(1, int(self._typical_payload)))

    def _plan(self, free: int, rows: int | None = None) -> list[_ops.Draw]:
        self._turn += 1
        return plan_claim(
            self.registry,
            free_calls=free,
            row_budget=rows if self.max_in_flight_bytes is not None else None,
            calls_by_name=self._calls_by_name,
            claim_batch=self.claim_batch,
            turn=self._turn,
        )

    async def _claim(self, draws: list[_ops.Draw], *, probe: bool) -> list[Mapping[str, Any]]:
        """Claim for ``draws``; a cheap read first, unless there is reason to expect work.

        The read keeps an idle worker from opening write transactions. A worker
        that just took all it asked for has work waiting, and one woken because a
        task was queued in its queues (``probe=False``) has news of some: both go
        straight on.
        """
        backend = self.client.backend
        if probe and not self._backlog:
            names = self.registry.names()
            if not await backend.arun(_ops.probe(self.queues, names), write=False):
                return []
        recovered: list[Mapping[str, Any]] = []
        rows = await backend.arun(
            _ops.claim(self.queues, self.worker_id, self.lease_ms, draws, RECOVER_LIMIT, recovered),
            write=True,
        )
        if recovered and self._runtime.listeners:
            self._announce_recovered(recovered)
        self._backlog = len(rows) >= sum(draw.limit for draw in draws)
        return rows

    def _dispatch(self, rows: list[Mapping[str, Any]]) -> None:
        for registration, group in group_calls(rows, self.registry):
            contexts: list[TaskContext] = []
            for row in group:
                ctx = self._context_for(row, registration)
                if ctx is not None:
                    contexts.append(ctx)
            if registration is None or not contexts:
                continue
            crashpoint("after_claim")
            call = asyncio.ensure_future(self._run_call(registration, contexts))
            self._calls.add(call)
            self._calls_by_name[registration.name] += 1

    def _context_for(
        self, row: Mapping[str, Any], registration: Registration | None
    ) -> TaskContext | None:
        """A context for a claimed row, or None after failing a row no handler can take."""
        lease = _ops.Lease.of(row)
        if registration is None:
            envelope = error_envelope(
                "NoHandler", "no_handler", f"no handler registered for {row['name']!r}"
            )
            self._reject(lease, envelope)
            return None
        try:
            task = Task.from_row(row)
        except SerializationError as exc:
            self._reject(lease, error_envelope("SerializationError", "invalid_payload", str(exc)))
            return None
        size = self._payload_bytes(row["payload"])
        previous = self._contexts.get(task.id)
        if previous is not None:
            previous.mark_lost()
        ctx = TaskContext(self._runtime, task, lease, size)
        self._contexts[task.id] = ctx
        self._bytes_in_flight += size
        self._typical_payload = 0.8 * self._typical_payload + 0.2 * size
        return ctx

    def _payload_bytes(self, payload: Any) -> int:
        """Encoded size of a payload, measured only when a byte budget needs it."""
        if self.max_in_flight_bytes is None:
            return 0
        if isinstance(payload, str):
            return len(payload.encode("utf-8"))
        return len(payload) if isinstance(payload, bytes) else 0

    def _reject(self, lease: _ops.Lease, envelope: dict[str, Any]) -> None:
        text = self.client.codec.encode_error(envelope, retryable=False)
        op = _ops.fail(lease, self.worker_id, text, retryable=False, delay_ms=0)
        call = asyncio.ensure_future(self.client.backend.arun(op, write=True))
        self._rejects.add(call)
        call.add_done_callback(self._report_reject)

    def _report_reject(self, call: asyncio.Future[Any]) -> None:
        self._rejects.discard(call)
        if not call.cancelled() and call.exception() is not None:
            exc = call.exception()
            assert exc is not None
            self._report(exc, {"phase": "settle", "worker_id": self.worker_id})

    async def _run_call(self, registration: Registration, contexts: list[TaskContext]) -> None:
        try:
            await self._executor.run(registration, contexts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._report(exc, {"phase": "execute", "task_id": contexts[0].task_id})
        finally:
            self._release(registration, contexts)

    def _handler_done(self) -> None:
        current = asyncio.current_task()
        if current is not None and current in self._calls:
            self._settling.add(current)
            if self._wake is not None:
                self._wake.set()

    def _release(self, registration: Registration, contexts: list[TaskContext]) -> None:
        # Bookkeeping happens inside the call's own task, before the claim loop is woken,
        # so the loop never wakes to find the slot still taken.
        current = asyncio.current_task()
        if current is not None:
            self._calls.discard(current)
            self._settling.discard(current)
        self._calls_by_name[registration.name] -= 1
        for ctx in contexts:
            self._bytes_in_flight -= ctx.payload_bytes
            if self._contexts.get(ctx.task_id) is ctx:
                del self._contexts[ctx.task_id]
        if self._wake is not None:
            self._wake.set()

    # --- maintenance ------------------------------------------------------------------

    async def _recovery_loop(self) -> None:
        """Move expired leases out of ``running`` on a timer, whatever this worker is doing.

        The claim path recovers too, but only when this worker has room to claim; this
        keeps a busy worker, or one whose queues are idle, recovering for everyone.
        """
        while True:
            await asyncio.sleep(self.recovery_interval_ms / 1000)
            try:
                await self.recover_expired()
            except Exception as exc:
                self._report(exc, {"phase": "recovery", "worker_id": self.worker_id})
                if isinstance(exc, SchemaIncomplete):
                    self._give_up(exc)
                    return

    def _give_up(self, exc: SchemaIncomplete) -> None:
        if self._fatal is None:
            self._fatal = exc
            log.error("stopping: %s", exc, extra={"worker_id": self.worker_id, "phase": "stop"})
        self.stop()

    async def recover_expired(self, *, batches: int = RECOVERY_BATCHES) -> int:
        """Recover expired leases now, at most ``batches`` x 100 rows; returns how many."""
        backend = self.client.backend
        recovered = 0
        for _ in range(batches):
            if not await backend.arun(_ops.expired_leases_exist(), write=False):
                break
            rows = await backend.arun(_ops.recover(RECOVER_LIMIT), write=True)
            recovered += len(rows)
            if self._runtime.listeners:
                self._announce_recovered(rows)
            if len(rows) < RECOVER_LIMIT:
                break
        if recovered:
            log.info("recovered %d expired leases", recovered, extra={"worker_id": self.worker_id})
        return recovered

    def _announce_recovered(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            try:
                task: Task | None = Task.from_row(row)
            except SerializationError:
                task = None
            self._runtime.emit(
                TaskEvent(
                    kind="recovered",
                    task_id=str(row["id"]),
                    name=row["name"],
                    queue=row["queue"],
                    attempt=int(row["attempt"]),
                    worker_id=self.worker_id,
                    error=task.error if task is not None and task.is_failed else None,
                    task=task,
                )
            )

    # --- heartbeat --------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """Every interval: flag leases past their local deadline, then renew the rest.

        The renewal runs as its own task and is never awaited here, so a database
        that stops answering cannot stop the deadline checks: a handler learns its
        lease is gone on time even while the renewal is stuck.
        """
        interval = self.heartbeat_interval_ms / 1000
        beating: asyncio.Task[None] | None = None
        try:
            while True:
                started = time.monotonic()
                await asyncio.sleep(interval)
                gap = time.monotonic() - started
                if gap > 2 * interval:
                    self._report(
                        EventLoopBlocked(int(gap * 1000), self.heartbeat_interval_ms),
                        {"phase": "heartbeat", "worker_id": self.worker_id},
                    )
                self._expire_overdue()
                if beating is None or beating.done():
                    beating = asyncio.ensure_future(self._beat())
                elif time.monotonic() - self._beat_sent > self.lease_ms / 1000:
                    slow = DatabaseUnavailable(
                        f"heartbeat got no answer for over {self.lease_ms} ms"
                    )
                    self._report(slow, {"phase": "heartbeat", "worker_id": self.worker_id})
        finally:
            if beating is not None:
                beating.cancel()

    def _expire_overdue(self) -> None:
        """Flag every lease whose local deadline passed without a successful renewal."""
        now = time.monotonic()
        for ctx in list(self._contexts.values()):
            if ctx.holds_lease and not ctx.in_transaction and now >= ctx.lease_deadline:
                log.warning(
                    "lease expired without renewal",
                    extra={"task_id": ctx.task_id, "worker_id": self.worker_id},
                )
                ctx.mark_lost()

    async def _beat(self) -> None:
        """Renew every held lease in one statement; flag the ones the database says are gone.

        A renewal extends the local deadline from the moment it was sent, never later
        than the database's own expiry.
        """
        live = [c for c in self._contexts.values() if c.holds_lease and not c.in_transaction]
        if not live:
            return
        backend = self.client.backend
        run = getattr(backend, "arun_reserved", backend.arun)
        self._beat_sent = sent = time.monotonic()
        beat = _ops.heartbeat_batch([c.lease for c in live], self.worker_id, self.lease_ms)
        try:
            held = await run(beat, write=True)
        except Exception as exc:
            self._report(exc, {"phase": "heartbeat", "worker_id": self.worker_id})
            return
        for ctx in live:
            if ctx.task_id in held:
                # A lease held but not renewed (its row locked by a settlement in progress)
                # keeps the deadline it had: the database's expiry did not move.
                if ctx.task_id in held.renewed:
                    ctx.lease_deadline = max(ctx.lease_deadline, sent + self.lease_ms / 1000)
                if held[ctx.task_id]:
                    ctx.mark_cancel_requested()
            elif not ctx.settled:
                log.warning(
                    "lease lost", extra={"task_id": ctx.task_id, "worker_id": ctx.worker_id}
                )
                ctx.mark_lost()

    # --- drain ------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let in-flight calls finish within the drain timeout, then release the rest."""
        if not self._calls:
            return
        deadline = time.monotonic() + self.drain_timeout_ms / 1000
        while self._calls:
            limit = deadline if self._drain_deadline is None else self._drain_deadline
            remaining = limit - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.wait(set(self._calls), timeout=min(remaining, 0.1))
        leftovers = [c for c in self._contexts.values() if not c.settled]
        for call in list(self._calls):
            call.cancel()
        if self._calls:
            await asyncio.wait(set(self._calls))
        # A handler thread that is still running cannot be stopped: its task is not handed
        # back at once (a run started now would overlap it); its lease runs out instead,
        # and the task is lost to this worker (announced: another attempt will run).
        running = [c for c in leftovers if c in self._executor.in_threads]
        for ctx in running:
            ctx.mark_lost()
        if running:
            log.warning(
                "%d handler threads still running at shutdown; their leases will expire",
                len(running),
                extra={"worker_id": self.worker_id},
            )
        leftovers = [c for c in leftovers if c not in self._executor.in_threads]
        for ctx in leftovers:
            ctx.mark_lost(announce=False)
        if leftovers and self._fatal is None:
            await asyncio.wait(
                [asyncio.ensure_future(self._release_unfinished(ctx)) for ctx in leftovers],
                timeout=SHUTDOWN_WRITE_TIMEOUT_S,
            )
        if self._rejects:
            await asyncio.wait(set(self._rejects), timeout=SHUTDOWN_WRITE_TIMEOUT_S)

    async def _release_unfinished(self, ctx: TaskContext) -> None:
        """Hand a task this worker stopped running back to the queue, its attempt uncounted."""
        op = _ops.release(ctx.lease, self.worker_id)
        try:
            await self.client.backend.arun(op, write=True)
        except Exception as exc:
            self._report(exc, {"phase": "shutdown", "task_id": ctx.task_id})
