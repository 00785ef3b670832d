"""The worker: its options, and the run that assembles its parts.

Its registration API is ``_registering``'s, its extensions' worker API
``extensions._builtins_worker``'s (the schedules' ``periodic``), and the keywords
its extensions take it hands on unread (``_compat`` types them).

One run of a worker (``_run.Run``) is a claimer (the claim loop and its calls in
flight), a settler (its writes that end claims), and its components
(``_components``): its extensions' (``cairnq.extensions.builtins()`` and any
others it runs), then the heartbeater, recoverer and retention sweeper. A
``Lifecycle`` prepares the components before the first claim, starts their jobs,
and on stop stops them in reverse order around the drain of in-flight calls
(``_run.drain``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _ids, kernel
from .. import extensions as _ext
from .._checks import check_int, check_worker_id
from .._sealing import Codec
from .._wakeups import Subscription, wants_queued
from ..backends import Backend, FileBound, SQLiteBackend, description_of
from ..backoff import DEFAULT_BASE_MS, DEFAULT_MAX_MS
from ..backpressure import DEFAULT_MAX_QUEUE_WAIT_MS, DepthLimit
from ..client import CairnQ
from ..durations import Duration
from ..errors import DatabaseError, DatabaseUnavailable, InvalidArgument, SchemaIncomplete
from ..extensions import BeforeIdle, Component, Extension
from ..extensions._builtins_worker import BuiltinsWorkerAPI
from ..kernel.periodic import ErrorHook
from ..kernel.retention import Retention, RetentionSweeper
from ..store import TaskStore
from . import _compat, _options, _starting
from ._claimer import CLAIM_ERROR_BACKOFF_S, Claimer, ClaimLimits
from ._components import JobComponent
from ._context import Listener, Runtime
from ._executor import Executor
from ._heartbeater import Heartbeater
from ._lifecycle import Lifecycle
from ._recoverer import RECOVERY_BATCHES, Recoverer
from ._registering import Registering
from ._registry import Registry
from ._reporting import default_on_error, safe
from ._run import Run, drain
from ._settling import Settler
from ._signals import SignalCount, handling_signals

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._compat import WorkerOptions

log = logging.getLogger("cairnq.worker")

# The backend options Worker.postgres passes on to a PgExecutor's backend.
_EXECUTOR_KEYS = frozenset({"clock", "migrate", "listen"})

__all__ = ["CLAIM_ERROR_BACKOFF_S", "Worker"]


class Worker(Registering, BuiltinsWorkerAPI, _compat.WorkerAttributes):
    """Claims tasks from the database and runs their handlers.

    Args:
        store: A ``CairnQ`` client, a ``TaskStore`` (``SQLiteStore``,
            ``PostgresStore``), a ``Backend``, or a database URL / SQLite path.
        queues: Queues to serve (``("default",)``); positional or keyword
            (``Worker(store, ["default"])`` as in the reference SDK).
        concurrency: Handler calls running at once (a batch call counts once).
        lease_ms: How long a claim holds a task without a heartbeat (30 s).
        poll_interval_ms: Longest idle wait between claims when nothing wakes the worker.
        heartbeat_interval: Lease renewal period, a duration (``lease_ms // 3``, at
            least 50 ms).
        retry_backoff_ms, retry_backoff_max_ms: Retry delay window (1 s doubling to 30 s).
        max_run_ms: Abandon an attempt after this long and fail it as ``handler_timeout``.
        cancel_grace: How long an ``async def`` handler whose task was canceled may
            run on once this worker saw the cancel (on its next heartbeat, or
            when the handler asked ``ctx.canceled()``), a duration (10 s); then
            the worker cancels its coroutine (the handler sees
            ``CancelledError``, its ``finally`` runs) and the attempt ends
            ``canceled``. ``None``: never stopped, only told (``ctx.canceled()``).
            A plain ``def`` handler is never stopped (a thread cannot be),
            unless it runs in a child process (``@worker.task(isolate=True)``).
            Per handler: ``@worker.task(cancel_grace=...)``
            (``docs/cancel-and-versions.md``).
        claim_batch: Most tasks taken per claim draw (default: free capacity).
        max_in_flight_bytes: Stop claiming while this many payload bytes are in flight.
        drain_timeout: On stop, how long in-flight calls may finish, a duration (30 s).
        on_error: ``on_error(exc, context)`` for errors the worker survives
            (claims, heartbeats, settlements, ``EventLoopBlocked``).
        on_event: ``on_event(TaskEvent)`` when a task starts, succeeds, fails, is
            retried, canceled or lost here, or its expired lease is recovered
            here (more listeners: ``subscribe``).
        max_queue_depth, max_queue_wait_ms: Backpressure for ``ctx.submit`` (see
            ``CairnQ``).
        retention: A ``Retention`` this worker sweeps (one process sweeps at a time),
            through its client's store (a ``purge`` replaced on it is each batch).
        recovery_interval: How often this worker moves expired leases out of
            ``running`` for every queue, even while it is busy, a duration
            (``lease_ms // 2``, at most 30 s).
        resources: Ceilings shared by several task names in this worker,
            ``{"gpu": 1}``: at most that many calls of all names registered with
            ``resource="gpu"`` run at once. Each capacity must be >= 1.
        extensions: Extensions this worker runs, with their options, besides its
            client's (``CairnQ(extensions=...)``; one given to both counts once):
            their hooks in its claims and settlements while each is ready, their
            parts in its lifecycle. cairnq's own always run; one given here replaces
            its default: ``Limits([Limit.concurrency(...)])`` declares limits,
            ``Snoozing(max_snoozes=5)`` bounds snoozes, ``History(record=False)``
            records no attempts, ``Schedules(evaluate=False)`` leaves schedules to
            other workers (all in ``cairnq.extensions``). Each option is checked
            when the extension is built (a bad one is an ``InvalidArgument``).
        codec: A payload codec (``cairnq.encryption.Encrypting``) for payloads,
            results and event payloads, given to the worker's client when that has
            none (``docs/encryption.md``); another codec than the client's is an
            ``InvalidArgument``, and so is, when it runs, a limit keyed by a payload path.
        **options: Deprecated, kept for one release: an extension's option as a
            keyword of ``Worker`` (``schedules``, ``max_snoozes``, ``limits``,
            ``record_attempts``, or another extension's), which warns once
            (``CairnQDeprecationWarning``) and wins over the extension's own; a
            keyword no extension takes is a ``TypeError``; and the old spellings
            ``heartbeat_interval_ms``, ``drain_timeout_ms``, ``recovery_interval_ms``
            (int ms), which warn once each. A duration is a ``timedelta``, a string
            with a unit (``"5s"``) or a number of seconds (``docs/durations.md``).

    Example::

        worker = Worker.sqlite("tasks.db", queues=["default"], concurrency=8)

        @worker.task
        async def send_email(ctx, payload):
            await ctx.progress(0.5, "rendering")
            return {"sent": True}

        worker.serve()   # until SIGINT / SIGTERM
    """

    on_error: ErrorHook
    _report: ErrorHook
    # One run's state, set by run() and read by stop() (from any thread).
    _loop: asyncio.AbstractEventLoop | None = None
    _stopping: asyncio.Event | None = None
    _wake: Subscription | None = None
    _running = False
    _started: asyncio.Event | None = None
    _drain_deadline: float | None = None
    # Why the drain was cut short, when it was: said instead of the drain timeout.
    _drain_cut: str | None = None
    # An error no retry can cure (tables gone, the SQLite file gone): the worker
    # stops and run() raises it.
    _fatal: DatabaseError | None = None

    def __init__(
        self,
        store: CairnQ | TaskStore | Backend | str | os.PathLike[str],
        queues: Iterable[str] = ("default",),
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        poll_interval_ms: int = 500,
        heartbeat_interval: Duration | None = None,
        retry_backoff_ms: int = DEFAULT_BASE_MS,
        retry_backoff_max_ms: int = DEFAULT_MAX_MS,
        max_run_ms: int | None = None,
        cancel_grace: Duration | None = _options.DEFAULT_CANCEL_GRACE,
        claim_batch: int | None = None,
        max_in_flight_bytes: int | None = None,
        drain_timeout: Duration | None = None,
        on_error: ErrorHook | None = None,
        on_event: Listener | None = None,
        max_queue_depth: DepthLimit = None,
        max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS,
        retention: Retention | int | None = None,
        recovery_interval: Duration | None = None,
        worker_id: str | None = None,
        resources: Mapping[str, int] | None = None,
        extensions: Sequence[Extension] = (),
        codec: Codec | None = None,
        **options: Unpack[WorkerOptions],
    ) -> None:
        self.client, self._owns_client = _options.client_of(store, codec)
        self.queues = _options.check_queues(queues)
        self.concurrency = _options.check_concurrency(concurrency)
        self.lease_ms = check_int(lease_ms, "lease_ms", low=100, high=2**40)
        self.poll_interval_ms = check_int(poll_interval_ms, "poll_interval_ms", low=1)
        old = _compat.renamed_durations(options)
        periods = _options.periods(
            self.lease_ms, heartbeat_interval, recovery_interval, drain_timeout, old
        )
        self.heartbeat_interval_ms, self.recovery_interval_ms, self.drain_timeout_ms = periods
        self.max_run_ms, self.cancel_grace_ms = _options.run_bounds(max_run_ms, cancel_grace)
        self.claim_batch = _options.check_optional(claim_batch, "claim_batch")
        self.max_in_flight_bytes = _options.check_in_flight_bytes(max_in_flight_bytes)
        self.worker_id = check_worker_id(worker_id, optional=True) or _ids.worker_id()
        self.on_error, self._report = on_error or default_on_error, self._report_error
        self._extensions = _ext.install(_ext.for_worker(self.client.extensions, extensions))
        _compat.deprecated_options(options, self._extensions)
        self._options = _ext.options(self._extensions, options)  # checked, by name
        self._signals = _ext.signals(self._extensions)  # handler signals, by exception class
        self._runtime = Runtime(
            client=self.client,
            worker_id=self.worker_id,
            lease_ms=self.lease_ms,
            retry_backoff_ms=_options.check_ms(retry_backoff_ms, "retry_backoff_ms"),
            retry_backoff_max_ms=_options.check_ms(retry_backoff_max_ms, "retry_backoff_max_ms"),
            gate=_options.queue_gate(self.client, max_queue_depth, max_queue_wait_ms),
            listeners=[] if on_event is None else [on_event],
            options=self._options,
        )
        self.registry, self._retention = Registry(resources), Retention.of(retention)
        self._bind(self.client.backend)

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
        """A worker on a SQLite file (created and migrated on first use).

        ``synchronous``, ``clock``, ``migrate`` and ``file_mode`` go to its
        ``SQLiteBackend``; every other option to ``Worker``.
        """
        backend_keys = {"synchronous", "clock", "migrate", "file_mode"}
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
        """A worker on PostgreSQL: a DSN, the application's psycopg async pool, or a ``PgExecutor``.

        Its connections are named ``cairnq-worker`` (``-heartbeat``, ``-listen``)
        in ``pg_stat_activity``. With a ``PgExecutor`` (``create_pool_executor(dsn)``),
        every operation, heartbeats included, goes through the executor, which the
        worker never closes; ``min_size`` and ``max_size`` apply to a DSN only.

        Example::

            worker = Worker.postgres(create_pool_executor(dsn), queues=["default"])
        """
        from ..backends import PgExecutorBackend, is_executor

        if is_executor(source):
            executor_kw = {k: options.pop(k) for k in list(options) if k in _EXECUTOR_KEYS}
            executor_backend = PgExecutorBackend(source, schema=schema, **executor_kw)
            return cls._owning(executor_backend, queues, concurrency, lease_ms, options)
        from ..backends import PostgresBackend

        backend_keys = {
            "clock",
            "migrate",
            "listen",
            "application_name",
            "listen_health",
            "listen_health_s",
        }
        backend_kw = {k: options.pop(k) for k in list(options) if k in backend_keys}
        backend = PostgresBackend(
            source, schema=schema, min_size=min_size, max_size=max_size, role="worker", **backend_kw
        )
        return cls._owning(backend, queues, concurrency, lease_ms, options)

    def __repr__(self) -> str:
        return f"<Worker {self.worker_id} queues={self.queues} concurrency={self.concurrency}>"

    @property
    def owns_database(self) -> bool:
        """Whether this worker made its client from a URL or path (and closes it)."""
        return self._owns_client

    def _move_to(self, backend: Backend) -> None:
        """Serve ``backend`` instead of the database this worker was built with.

        For ``cairnq worker --db``: only a worker that made its own client and has
        never run, whose client no one else holds. The worker owns ``backend`` from now.

        Raises:
            InvalidArgument: the worker was given a client or backend, or has run.
        """
        if not self._owns_client:
            raise InvalidArgument("this worker was built with an open client; it cannot move")
        if self._running or self._loop is not None:
            raise InvalidArgument("this worker has already run; it cannot move")
        old = self.client
        client = CairnQ(backend, extensions=old.extensions)
        client._owns_backend = True
        self.client = client
        self._runtime.client = client
        if self._runtime.gate is old.gate:
            self._runtime.gate = client.gate
        self._bind(backend)

    def _bind(self, backend: Backend) -> None:
        """Make the parts that hold the database: the recoverer, the sweeper."""
        self._recoverer = Recoverer(
            backend,
            self._runtime,
            worker_id=self.worker_id,
            interval_ms=self.recovery_interval_ms,
            report=self._report,
            give_up=self._give_up,
        )
        # It sweeps through the client's store, so a ``purge`` replaced on it is each batch.
        retention = self._retention
        self.sweeper = RetentionSweeper(self.client.store, retention) if retention else None

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

    def serve(self, *, concurrency: int | None = None, until_idle: bool = False) -> None:
        """Run until SIGINT or SIGTERM, drain in-flight work, then return.

        A second signal stops at once: in-flight tasks are released for retry. The
        same signal again within a second of the first is that one delivered twice
        (GNU ``timeout`` signals the process and its process group) and counts once.

        Args:
            concurrency: Override the worker's handler calls at once (see ``run``).
            until_idle: Also return once nothing is due and nothing runs (see ``run``).

        Raises:
            InvalidArgument: a bad ``concurrency``.

        Example::

            worker.serve(concurrency=4)
        """
        if concurrency is not None:
            check_int(concurrency, "concurrency", low=1, high=100_000)
        asyncio.run(self._serve(until_idle, concurrency))

    async def _serve(self, until_idle: bool, concurrency: int | None = None) -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.ensure_future(self.run(concurrency=concurrency, until_idle=until_idle))
        count = SignalCount()

        def on_signal(signum: int) -> None:
            name = signal.Signals(signum).name
            counted = count.note(signum)
            extra = {"worker_id": self.worker_id}
            if counted is None:
                if count.counted > 1:
                    return  # already stopping now
                log.info(
                    "received %s again within %gs: taken as the same signal (sent to the "
                    "process and to its group); send it again to stop now",
                    name,
                    count.window_s,
                    extra=extra,
                )
            elif counted == 1:
                log.info(
                    "received %s: draining (up to %d ms)", name, self.drain_timeout_ms, extra=extra
                )
                self.stop()
            else:
                log.warning("received %s, a second signal: stopping now", name, extra=extra)
                self._cut_drain(f"a second signal, {name}")

        try:
            with handling_signals(loop, on_signal):
                await main
        finally:
            await self.close()

    @contextlib.asynccontextmanager
    async def background(self, *, concurrency: int | None = None) -> AsyncIterator[Worker]:
        """Run the worker in this event loop for the duration of a ``with`` block.

        Args:
            concurrency: Override the worker's handler calls at once (see ``run``).

        Yields:
            This worker, running.

        Raises:
            InvalidArgument: a bad ``concurrency``.

        Example::

            async with worker.background(concurrency=4):
                print(await cq.call("add", {"a": 1, "b": 2}))
        """
        if concurrency is not None:
            check_int(concurrency, "concurrency", low=1, high=100_000)
        self._started = asyncio.Event()
        main = asyncio.ensure_future(self.run(concurrency=concurrency))
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
                are left queued. Before it stops, its components make due what
                their sweeps would (``BeforeIdle``): parked tasks whose
                dependencies all ended are released, the callbacks of batches
                whose members all ended are submitted, and those run.

        A worker with no handlers registered claims nothing: it idles (logging
        one info line saying so) until ``stop()``, or returns at once with
        ``until_idle``.

        Raises:
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
        if concurrency is not None:
            self.concurrency = _options.check_concurrency(concurrency)
        # Stop requests (signals) count from here, even while the database is opening.
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._drain_deadline = None
        self._drain_cut = None
        self._fatal = None
        self._running = True
        try:
            if await self._open_checked():
                await self._run_components(until_idle)
            else:
                log.info(
                    "worker stopped before it reached %s",
                    description_of(self.client.backend),
                    extra={"worker_id": self.worker_id},
                )
        finally:
            self._running = False
        if self._fatal is not None:
            raise self._fatal

    async def _open_checked(self) -> bool:
        """Open the client and read what the kernel needs; ``False`` when ``stop()`` came first."""
        return await self._open()

    async def _run_components(self, until_idle: bool) -> None:
        """Prepare the components, claim until stopped, drain, and stop them in reverse."""
        run = self._assemble(until_idle)
        components = self._components(run)
        run.claimer.before_idle = [c.before_idle for c in components if isinstance(c, BeforeIdle)]
        lifecycle = Lifecycle(
            components,
            attempt=self._start_step,
            report=self._report,
            context={"worker_id": self.worker_id},
        )
        try:
            ready = await lifecycle.prepare()
        except BaseException:
            run.close()  # a refused start: nothing ran
            raise
        try:
            if ready:
                self._announce(until_idle)
                # No handlers and until_idle: stopped already, so no job starts.
                if not run.claimer.stopping.is_set():
                    lifecycle.start()
                await run.claimer.run()
        finally:
            await lifecycle.stop(
                drain=lambda: self._drain(run), wait=not run.claimer.backend_closed
            )
            run.close()
            log.info("worker stopped", extra={"worker_id": self.worker_id})

    def _assemble(self, until_idle: bool) -> Run:
        """One run's claim loop and what it needs: threads, wake-ups, the settler."""
        stopping = self._stopping
        assert stopping is not None
        backend = self.client.backend
        threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="cairnq-handler"
        )
        executor = Executor(
            max_run_ms=self.max_run_ms,
            threads=threads,
            on_error=self._report,
            scopes=self._runtime.scopes,
            signals=self._signals,
        )
        self._wake = wake = backend.hub.subscribe(
            wants_queued(self.queues), claims=True, channels=("queued",)
        )
        view = self._view(wake.set)
        ready = _ext.Ready(self._extensions)
        points = self._runtime.points = _ext.points(self._extensions, view, ready)
        settler = Settler(backend, self.worker_id, self._report, points=points)
        self._runtime.settler = settler
        claimer = Claimer(
            self.client,
            self.registry,
            self._runtime,
            executor,
            settler,
            self._recoverer,
            self._limits(),
            wake=wake,
            stopping=stopping,
            until_idle=until_idle,
            report=self._report,
            stop=self.stop,
            fail=self._fail,
            points=points,
        )
        executor.on_thread_freed = wake.set
        executor.on_handler_done = claimer.handler_done
        return Run(threads, executor, wake, settler, view, ready, claimer)

    def _view(self, wake: Callable[[], None]) -> _ext.WorkerView:
        """What this worker's extensions see of one run (or of a recovery outside one)."""
        return _ext.WorkerView(
            backend=self.client.backend,
            worker_id=self.worker_id,
            queues=self.queues,
            concurrency=self.concurrency,
            report=self._report,
            task_names=self.registry.names(),
            codec=self.client.codec,
            client=self.client,
            options=self._options,
            wake=wake,
        )

    def _components(self, run: Run) -> list[Component]:
        """This run's components, in start order (the table in ``_components.py``): its
        extensions' parts, the ledger watch, the heartbeater, the recoverer, the retention."""
        backend, report, worker_id = self.client.backend, self._report, self.worker_id
        view = run.view
        heartbeater = Heartbeater(
            backend,
            run.claimer.contexts,
            worker_id=worker_id,
            lease_ms=self.lease_ms,
            interval_ms=self.heartbeat_interval_ms,
            report=report,
        )
        components = _ext.components(self._extensions, view)
        ledger = _ext.LedgerWatch(backend, run.ready, report=report, worker_id=worker_id)
        components.append(ledger)
        components.append(JobComponent("heartbeat", heartbeater, stops_after_drain=True))
        components.append(JobComponent("recovery", self._recoverer))
        if self.sweeper is not None:
            components.append(JobComponent("retention", self.sweeper))
        return components

    def _announce(self, until_idle: bool) -> None:
        """Log the start (and a worker without handlers); with no handlers and
        ``until_idle``, stop at once."""
        names = self.registry.names()
        if not names:
            log.info(
                "worker %s has no task handlers registered: it claims nothing%s",
                self.worker_id,
                "; stopping (until_idle)" if until_idle else " until stopped",
                extra={"worker_id": self.worker_id},
            )
            if until_idle:
                self.stop()
        backend = self.client.backend
        log.info(
            "worker %s started on %s: queues %s, concurrency %d, tasks %s",
            self.worker_id,
            description_of(backend),
            ",".join(self.queues),
            self.concurrency,
            ", ".join(names),
            extra={
                "worker_id": self.worker_id,
                "database": description_of(backend),
                "queues": self.queues,
                "concurrency": self.concurrency,
                "task_names": names,
            },
        )
        if self._started is not None:
            self._started.set()

    async def _open(self) -> bool:
        """Open the client (``_starting.open_client``); ``False`` when ``stop()`` came first."""
        stopping = self._stopping
        assert stopping is not None
        return await _starting.open_client(
            self.client, stopping, abandon_ms=self.drain_timeout_ms, worker_id=self.worker_id
        )

    def _report_error(self, exc: BaseException, context: dict[str, Any]) -> None:
        """Hand a background part's error to ``on_error``, unless it is the lost file.

        The SQLite file gone from its path stops the worker with one error line
        (``_fail``), whichever part meets it first; a part meeting it again while
        the worker stops adds nothing.
        """
        backend = self.client.backend
        if exc is self._fatal:
            log.debug("%s: %s", context.get("phase", "?"), exc, extra=context)
            return
        if isinstance(exc, DatabaseUnavailable) and isinstance(backend, FileBound):
            try:
                backend.check_file()
            except DatabaseUnavailable as lost:
                if not lost.retryable:
                    self._fail(lost, True)
                    return
        safe(self.on_error)(exc, context)

    async def _start_step(self, step: Callable[[], Awaitable[object]], phase: str) -> bool:
        """Run one start-up step (``_starting.start_step``); ``False`` when ``stop()``
        came first."""
        stopping = self._stopping
        assert stopping is not None
        return await _starting.start_step(
            step, phase, backend=self.client.backend, stopping=stopping, worker_id=self.worker_id
        )

    def _limits(self) -> ClaimLimits:
        return ClaimLimits(
            queues=self.queues,
            concurrency=self.concurrency,
            lease_ms=self.lease_ms,
            poll_interval_ms=self.poll_interval_ms,
            claim_batch=self.claim_batch,
            max_in_flight_bytes=self.max_in_flight_bytes,
        )

    def _fail(self, exc: DatabaseError, abandon: bool) -> None:
        """Stop for an error no retry can cure; ``run()`` raises it.

        ``abandon``: nothing in flight can be settled any more (the SQLite file is
        gone), so in-flight calls are given up rather than drained.
        """
        if self._fatal is None:
            self._fatal = exc
            log.error(
                "worker stopping: %s", exc, extra={"worker_id": self.worker_id, "phase": "stop"}
            )
        if abandon:
            self._cut_drain("the worker is stopping for an error")
        self.stop()

    def _cut_drain(self, why: str) -> None:
        """End the drain now, for ``why`` (which the drain's log line gives)."""
        self._drain_deadline = 0.0
        self._drain_cut = why

    def _give_up(self, exc: SchemaIncomplete) -> None:
        self._fail(exc, False)

    async def recover_expired(self, *, batches: int = RECOVERY_BATCHES) -> int:
        """Recover expired leases now, at most ``batches`` x 100 rows; returns how many.

        Each recovered attempt is recorded (outcome ``lost``) where the attempt history exists.
        """
        if not self._running:
            ready = _ext.Ready(self._extensions)
            ready.note(await self.client.backend.arun(kernel.applied_migrations(), write=False))
            view = self._view(lambda: None)
            self._runtime.points = _ext.points(self._extensions, view, ready)
        return await self._recoverer.recover(batches)

    async def _drain(self, run: Run) -> None:
        """Let in-flight calls finish within the drain timeout, then release the rest
        (``_run.drain``)."""
        await drain(
            run,
            timeout_ms=self.drain_timeout_ms,
            deadline=lambda: self._drain_deadline,
            cut_by=lambda: self._drain_cut,
            fatal=lambda: self._fatal is not None,
            worker_id=self.worker_id,
        )
