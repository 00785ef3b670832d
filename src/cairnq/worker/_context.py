"""What a handler sees of its task: ``TaskContext`` (async) and ``SyncTaskContext``."""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from .. import kernel
from ..backends import InTransactionCompleter
from ..backoff import retry_delay_ms
from ..backpressure import QueueGate
from ..client._core import _outcome, task_or_name
from ..errors import (
    InvalidArgument,
    LostLease,
    TaskError,
    UnsupportedBackend,
    error_envelope,
    safe_str,
)
from ..extensions.history import _hooks as _history
from ..extensions.snooze import _ops as _snooze
from ..extensions.steps import _context as _steps
from ..extensions.steps._ops import record_step, recorded_steps
from ..extensions.workflows import _ops as _workflows
from ..extensions.workflows._model import Gathering
from ..kernel.points import NO_POINTS, Points
from ..models import Lease, Task
from ..protocol.steps import Op

log = logging.getLogger("cairnq.worker")

if TYPE_CHECKING:
    from ..client import CairnQ

T = TypeVar("T")
# Guards the lazily made threading.Event of every context (rarely taken: lease loss,
# or a sync handler asking for the event).
_LOST_EVENT_LOCK = threading.Lock()


EventKind = Literal[
    "started", "succeeded", "failed", "retried", "snoozed", "canceled", "lost", "recovered"
]
SETTLED_AS: dict[str, EventKind] = {
    "succeeded": "succeeded",
    "failed": "failed",
    "canceled": "canceled",
    "queued": "retried",
}


@dataclass(frozen=True)
class TaskEvent:
    """Something that happened to a task in this worker, for metrics and tracing hooks.

    ``kind`` is ``started``, ``succeeded``, ``failed``, ``retried`` (failed, queued
    again), ``snoozed`` (queued again after a delay, no attempt spent),
    ``canceled``, ``lost`` (the lease was lost; another attempt may run) or
    ``recovered`` (this worker's maintenance moved the task, whose lease had
    expired elsewhere, out of ``running``: ``task.status`` says to what).
    ``duration_ms`` is the attempt's run time so far; ``error`` the envelope recorded.
    ``task`` is the task as this attempt claimed it (status ``running``; its
    ``run_at_ms``, ``updated_at_ms`` (the claim instant, by the database clock)
    and ``metadata``), or as recovered; ``None`` when the row could not be read.
    """

    kind: EventKind
    task_id: str
    name: str
    queue: str
    attempt: int
    worker_id: str
    duration_ms: float | None = None
    error: dict[str, Any] | None = None
    task: Task | None = field(default=None, repr=False)


Listener = Callable[[TaskEvent], None]
CallScope = Callable[[Sequence["TaskContext"]], AbstractContextManager[object]]
"""``scope(contexts)``: a context manager a worker enters around each handler call."""


class GroupSettler(Protocol):
    """Where returned handlers' successes are written together (the worker's ``Settler``)."""

    async def complete(
        self, lease: Lease, result: str | None, started: int | None = None
    ) -> Mapping[str, Any]:
        """Settle ``lease`` in the next group write; returns its row.

        Raises:
            LostLease: the attempt was no longer owned when the group was written.
        """
        ...


@dataclass
class Runtime:
    """What every context of one worker shares."""

    client: CairnQ
    worker_id: str
    lease_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    gate: QueueGate
    listeners: list[Listener] = field(default_factory=list)
    scopes: list[CallScope] = field(default_factory=list)
    settler: GroupSettler | None = None
    max_snoozes: int = _snooze.DEFAULT_MAX_SNOOZES
    # Task names registered with their own max_snoozes.
    max_snoozes_by_name: dict[str, int] = field(default_factory=dict)
    # The hooks of the worker's extensions that its settlements run (compiled per run).
    points: Points = NO_POINTS
    # The database has the workflow tables.
    workflows: bool = False
    # A task is parked (the workflows' component looks about once a second).
    parked: bool = False

    @property
    def submitted_dependents(self) -> bool:
        """Whether the worker's client made a task wait for others (a ``gather`` here
        included): its settlements then decide dependents without waiting for a look."""
        return self.client.submitted_dependents

    def max_snoozes_for(self, name: str) -> int:
        return self.max_snoozes_by_name.get(name, self.max_snoozes)

    def delay_after(self, attempt: int) -> int:
        return retry_delay_ms(
            attempt, base_ms=self.retry_backoff_ms, max_ms=self.retry_backoff_max_ms
        )

    def emit(self, event: TaskEvent) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                log.exception("task event listener failed", extra={"task_id": event.task_id})


def envelope_for(error: Any, *, retryable: bool = True) -> tuple[dict[str, Any], bool]:
    """The envelope recorded for ``error`` and whether the failure is retryable.

    A ``TaskError`` carries its own envelope and retryability; a string becomes a
    ``task_error`` with ``retryable``; a ready envelope dict is used as given; any
    other exception becomes a ``handler_error`` of its class name. Whatever it
    holds, the envelope can be recorded (``JsonCodec.encode_error``).
    """
    if isinstance(error, TaskError):
        return error.envelope(), error.retryable
    if isinstance(error, BaseException):
        name = type(error).__name__
        message = safe_str(error) or name
        return error_envelope(name, "handler_error", message, retryable=retryable), retryable
    if isinstance(error, dict):
        return dict(error), bool(error.get("retryable", retryable))
    return error_envelope(
        "TaskError", "task_error", safe_str(error), retryable=retryable
    ), retryable


class TaskContext:
    """A handler's handle on the task it runs: its data, progress, cancel and settlement.

    Every write is fenced on this attempt: once the lease is lost (another
    worker may now own the task) or the task is settled, writes raise
    ``LostLease`` without touching the database.

    Example::

        @worker.task
        async def transcode(ctx, payload):
            for i, chunk in enumerate(chunks(payload["url"])):
                if await ctx.canceled():
                    return None
                await ctx.progress((i + 1) / total, f"chunk {i + 1}")
            return {"ok": True}
    """

    def __init__(self, runtime: Runtime, task: Task, lease: Lease, payload_bytes: int) -> None:
        self._runtime = runtime
        self.task = task
        self.lease = lease
        self.payload_bytes = payload_bytes
        self.lease_lost = asyncio.Event()
        self._lost = False
        self._abandoned = False
        # Inside succeed_in's transaction, which holds the task's row: the lock is the
        # ownership, so the worker neither renews nor expires the lease meanwhile.
        self.in_transaction = False
        self._lost_event: threading.Event | None = None  # made when a sync handler asks
        self._settled = False
        # How the attempt was settled (the row's status) and, when requeued, after how long.
        self.settled_status: str | None = None
        self.retry_delay_ms: int | None = None
        # Set when the attempt was settled by a snooze: its delay and the counts after it.
        self.snoozed_ms: int | None = None
        self.snoozes: _snooze.Snoozes | None = None
        # Set when the attempt was parked by gather: how many children it waits for.
        self.waiting_on: int | None = None
        # Children spawned so far by this run: the next spawn's index (its key).
        self._spawned = 0
        self._cancel_seen = task.cancel_requested_at_ms is not None
        # Durable steps: the results earlier attempts recorded (read at the first step),
        # and the names this run used so far (their count is the next step's seq).
        self._recorded_steps: dict[str, Any] | None = None
        self._step_names: list[str] = []
        self.started = time.monotonic()
        # When the lease runs out by this host's clock, renewed by each successful beat
        # (from the moment the beat was sent: never later than the database's expiry).
        self.lease_deadline = self.started + runtime.lease_ms / 1000

    def __repr__(self) -> str:
        return f"<TaskContext {self.task.id} {self.task.name!r} attempt={self.task.attempt}>"

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def queue(self) -> str:
        return self.task.queue

    @property
    def attempt(self) -> int:
        return self.task.attempt

    @property
    def max_attempts(self) -> int:
        return self.task.max_attempts

    @property
    def worker_id(self) -> str:
        return self._runtime.worker_id

    @property
    def payload(self) -> Any:
        return self.task.payload

    @property
    def metadata(self) -> Any:
        return self.task.metadata

    @property
    def root_id(self) -> str | None:
        return self.task.root_id

    @property
    def parent_id(self) -> str | None:
        return self.task.parent_id

    @property
    def correlation_id(self) -> str | None:
        return self.task.correlation_id

    @property
    def claimed_at_ms(self) -> int:
        """When this attempt was claimed (epoch ms, the database's clock)."""
        return self.task.updated_at_ms

    @property
    def settled(self) -> bool:
        """Whether this attempt has been settled (by the handler or the worker)."""
        return self._settled

    @property
    def lost_lease(self) -> bool:
        """Whether the handler's writes are refused: the lease is lost, or the attempt abandoned."""
        return self._lost or self._abandoned

    @property
    def holds_lease(self) -> bool:
        """Whether the worker still renews this attempt's lease (an abandoned one included)."""
        return not self._settled and not self._lost

    def _thread_lost_event(self) -> threading.Event:
        """The lease-lost flag as a ``threading.Event``, for a handler in a thread."""
        with _LOST_EVENT_LOCK:
            if self._lost_event is None:
                self._lost_event = threading.Event()
                if self._lost or self._abandoned:
                    self._lost_event.set()
            return self._lost_event

    # --- state changes, called by the worker ----------------------------------------------

    def mark_lost(self, *, announce: bool = True) -> None:
        """Refuse the handler's further writes; ``announce`` tells listeners the lease is gone.

        The worker silences the announcement when it takes the task back itself
        (``max_run_ms``, shutdown) and settles the attempt right after.
        """
        with _LOST_EVENT_LOCK:
            if self._lost:
                return
            self._lost = True
            event = self._lost_event
        if event is not None:
            event.set()
        self.lease_lost.set()
        if announce and not self._settled:
            self._emit("lost")

    def abandon(self) -> None:
        """Refuse the handler's further writes and tell it to stop, while the worker keeps
        renewing the lease: a handler thread past ``max_run_ms`` cannot be stopped, so the
        attempt stays this worker's until the thread returns and the worker settles it.
        """
        with _LOST_EVENT_LOCK:
            self._abandoned = True
            event = self._lost_event
        if event is not None:
            event.set()
        self.lease_lost.set()

    def _emit(self, kind: EventKind, error: dict[str, Any] | None = None) -> None:
        if self._runtime.listeners:
            self._runtime.emit(
                TaskEvent(
                    kind=kind,
                    task_id=self.task.id,
                    name=self.task.name,
                    queue=self.task.queue,
                    attempt=self.task.attempt,
                    worker_id=self._runtime.worker_id,
                    duration_ms=None
                    if kind == "started"
                    else (time.monotonic() - self.started) * 1000,
                    error=error,
                    task=self.task,
                )
            )

    def _settled_as(self, row: Any, *, snoozed: bool = False) -> Task:
        """Record that this attempt is settled; tell listeners how it ended."""
        self._settled = True
        task = Task.from_row(row)
        self.settled_status = task.status
        error = None if task.status == "succeeded" else task.error
        if snoozed and task.status == "queued":
            self._emit("snoozed")
        else:
            self._emit(SETTLED_AS.get(task.status, "failed"), error)
        return task

    def mark_cancel_requested(self) -> None:
        self._cancel_seen = True

    def _guard(self) -> None:
        if self._settled or self._lost or self._abandoned:
            raise LostLease(self.task.id)

    async def _owned(self, op: Op[T], *, force: bool = False) -> T:
        """Run an owned write; ``force`` skips the local flag (the database still fences)."""
        if not force:
            self._guard()
        try:
            return await self._runtime.client.backend.arun(op, write=True)
        except LostLease:
            self.mark_lost()
            raise

    # --- handler API ----------------------------------------------------------------------

    async def progress(self, value: float | None, message: str | None = None) -> Task:
        """Record progress (a fraction) and/or a message; ``None`` keeps the current one.

        Args:
            value: The fraction done (not range-checked), or ``None``.
            message: A line for people watching, or ``None``.

        Returns:
            The task as updated (its ``progress``, ``message`` and ``cancel_requested``).

        Raises:
            InvalidArgument: a value that is not a finite number, or a bad message.
            LostLease: this worker no longer owns the task.

        Example::

            task = await ctx.progress(0.5, "halfway")
            if task.cancel_requested:
                return None
        """
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgument("progress must be a number or None")
            if not math.isfinite(value):
                raise InvalidArgument("progress must be finite")
        if message is not None and (not isinstance(message, str) or "\x00" in message):
            raise InvalidArgument("message must be a string without NUL characters")
        row = await self._owned(
            kernel.progress(
                self.lease,
                self.worker_id,
                None if value is None else float(value),
                message,
            )
        )
        task = Task.from_row(row)
        if task.cancel_requested:
            self._cancel_seen = True
        return task

    async def heartbeat(self) -> Task:
        """Renew this task's lease now (the worker also does it on its own)."""
        sent = time.monotonic()
        row = await self._owned(
            kernel.heartbeat(self.lease, self.worker_id, self._runtime.lease_ms)
        )
        self.lease_deadline = sent + self._runtime.lease_ms / 1000
        task = Task.from_row(row)
        if task.cancel_requested:
            self._cancel_seen = True
        return task

    async def canceled(self) -> bool:
        """Whether a cancel was requested (a vanished task counts as canceled)."""
        if self._cancel_seen:
            return True
        seen = await self._runtime.client.backend.arun(
            kernel.cancel_requested(self.task.id), write=False
        )
        if seen:
            self._cancel_seen = True
        return seen

    async def succeed(self, result: Any = None) -> Task | None:
        """Settle now with ``result`` (canceled instead if a cancel is pending).

        Settling twice is a no-op returning ``None``.

        Raises:
            SerializationError: the result is not portable JSON (nothing is written).
            LostLease: this worker no longer owns the task.
        """
        if self._settled:
            return None
        encoded = self._runtime.client.codec.encode_optional(result, what="result")
        return await self.succeed_encoded(encoded)

    complete = succeed

    async def succeed_encoded(self, result: str | None, *, grouped: bool = False) -> Task | None:
        """Settle with a result already encoded as JSON text.

        ``grouped`` (the worker settling a returned handler) joins the worker's
        group write and returns ``None`` instead of the re-read task.
        """
        settler = self._runtime.settler if grouped else None
        if settler is None:
            op = kernel.complete(
                self.lease,
                self.worker_id,
                result,
                points=self._runtime.points,
                started=self.claimed_at_ms,
            )
            row = await self._owned(op)
            return self._settled_as(row)
        self._guard()
        try:
            row = await settler.complete(self.lease, result, self.claimed_at_ms)
        except LostLease:
            self.mark_lost()
            raise
        self._settled = True
        self.settled_status = row["status"]
        self._emit(SETTLED_AS.get(row["status"], "failed"))
        return None

    async def succeed_in(self, write: Callable[[Any], Awaitable[Any]]) -> Task | None:
        """Run ``write(connection)`` and settle in one transaction (PostgreSQL only).

        ``write``'s changes commit exactly when the task succeeds. If a cancel is
        pending, ``write`` is not called and the task ends canceled (check the
        returned task's ``status``); a cancel requested meanwhile waits for the commit.
        The transaction holds the task's row from its start: however long ``write``
        takes, the attempt is this worker's until the commit.

        Args:
            write: ``async def write(conn)``, run on the settling transaction's
                connection; its return value is the task's result.

        Returns:
            The settled task (``succeeded``, or ``canceled``).

        Raises:
            LostLease: this worker no longer owns the task; nothing of ``write`` is kept.
            UnsupportedBackend: the backend has no shared transaction (SQLite).
        """
        backend = self._runtime.client.backend
        if not isinstance(backend, InTransactionCompleter):
            raise UnsupportedBackend(
                f"succeed_in needs PostgreSQL: {backend.dialect} cannot share a transaction "
                "between the handler's writes and the task's completion"
            )
        self._guard()
        self.in_transaction = True
        try:
            encode = functools.partial(self._runtime.client.codec.encode_optional, what="result")
            points, started = self._runtime.points, self.claimed_at_ms
            row = await backend.arun_around_write(
                kernel.hold(self.lease, self.worker_id),
                write,
                lambda value: kernel.complete_held(
                    self.lease, self.worker_id, encode(value), points=points, started=started
                ),
            )
        except LostLease:
            self.mark_lost()
            raise
        finally:
            self.in_transaction = False
        return self._settled_as(row)

    complete_in = succeed_in

    async def fail(self, error: Any = "task failed", *, retryable: bool = True) -> Task | None:
        """Fail this attempt now; requeued with backoff while attempts remain and retryable.

        ``error`` may be a message, an exception, a ``TaskError`` (its own
        ``retryable`` wins) or a ready envelope dict. Settling twice is a no-op.
        """
        if self._settled:
            return None
        envelope, retryable = envelope_for(error, retryable=retryable)
        return await self._record_failure(envelope, retryable=retryable)

    async def _record_failure(
        self,
        envelope: dict[str, Any],
        *,
        retryable: bool,
        force: bool = False,
        delay_ms: int | None = None,
    ) -> Task:
        text = self._runtime.client.codec.encode_error(envelope, retryable=retryable)
        if delay_ms is None:
            delay_ms = self._runtime.delay_after(self.attempt) if retryable else 0
        op = kernel.fail(
            self.lease,
            self.worker_id,
            text,
            retryable=retryable,
            delay_ms=delay_ms,
            points=self._runtime.points,
            started=self.claimed_at_ms,
        )
        row = await self._owned(op, force=force)
        self.retry_delay_ms = delay_ms if retryable else None
        return self._settled_as(row)

    async def snooze(self, delay: Any = None, *, delay_ms: int | None = None) -> Task | None:
        """Settle now by snoozing: the task is queued again after ``delay``, no attempt spent.

        For a service that answers "not now" (an HTTP 429 with ``Retry-After``):
        the claim's attempt is given back, so ``ctx.attempt`` is the same next
        time. Each task may snooze ``max_snoozes`` times (the worker's option,
        or the handler's own, 20 by default); the snooze past that fails the
        task for good with a ``snooze_limit`` error. A pending cancel wins: the
        task ends canceled. Return from the handler after it; further writes
        raise ``LostLease``. Settling twice is a no-op returning ``None``.

        Args:
            delay: Seconds (a number), a ``timedelta``, or a duration such as
                ``"30s"``; give it or ``delay_ms``.
            delay_ms: The delay in milliseconds.

        Returns:
            The task as written: ``queued`` (snoozed), ``failed`` (over
            ``max_snoozes``) or ``canceled``.

        Raises:
            InvalidArgument: no delay, both, or a bad one; nothing is written.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the flow-control tables (``cairnq migrate``).

        Example::

            if response.status_code == 429:
                return await ctx.snooze(float(response.headers["Retry-After"]))
        """
        if self._settled:
            return None
        ms = _snooze.snooze_delay_ms(delay, delay_ms)
        codec = self._runtime.client.codec
        limit = self._runtime.max_snoozes_for(self.name)

        def limit_error(count: int) -> str:
            return codec.encode_error(_snooze.snooze_limit_error(count, limit), retryable=False)

        hooks = self._runtime.points.ending().attempt
        outcome = await self._owned(
            _history.snooze(
                self.lease,
                self.worker_id,
                ms,
                max_snoozes=limit,
                limit_error=limit_error,
                started=self.claimed_at_ms,
                hooks=hooks,
            )
            if hooks
            else _snooze.snooze(
                self.lease, self.worker_id, ms, max_snoozes=limit, limit_error=limit_error
            )
        )
        if outcome.snoozes is not None:
            self.snoozed_ms = ms
            self.snoozes = outcome.snoozes
        return self._settled_as(outcome.row, snoozed=outcome.snoozes is not None)

    # --- durable steps ----------------------------------------------------------------------

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: Any = 1.0,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once per task: its result is recorded, and a later
        attempt (a retry, a run after a crash) gets the recorded result back instead.

        The result is written fenced on this attempt's lease, so a stale attempt's
        write is refused. It must be JSON the client's codec can encode (the same
        rules as a task's result); it is returned as read back from JSON, so the
        first run and a replay see the same value (a tuple comes back a list).
        Each step name may be used once per run; a name used twice raises.

        ``fn`` may be a plain or a coroutine function. An exception from ``fn`` is
        retried ``retries`` times, waiting ``backoff`` (doubling each time); after
        that it propagates, and the attempt fails like any handler error (nothing
        is recorded, so the next attempt runs the step again). A permanent error
        (``errors.is_permanent``: an ``InvalidArgument`` such as a result that is
        not JSON, a name used twice or a bad option) is not retried: it fails the
        task at once, whatever attempts are left.

        With ``transactional=True``, ``fn(conn, *args, **kwargs)`` runs inside the
        transaction that records the step, so its writes commit exactly when the
        step is recorded: on PostgreSQL ``conn`` is the ``psycopg.AsyncConnection``
        (``fn`` may be async); on SQLite it is the ``sqlite3.Connection`` of the
        write transaction (``fn`` must be a plain function; use it for tables in
        the same database file). ``fn`` must not commit or roll back.

        Args:
            name: The step's name, unique within the task (``"fetch-invoice"``).
            fn: What the step does.
            *args: Positional arguments for ``fn``.
            retries: How many times to retry ``fn`` after an exception (0 by default).
            backoff: The wait before the first retry: seconds, a ``timedelta`` or
                ``"2s"`` (1 second by default), doubling for each further retry.
            transactional: Run ``fn`` inside the recording transaction.
            **kwargs: Keyword arguments for ``fn`` (other than the names above).

        Returns:
            The step's result: recorded now, or by an earlier attempt.

        Raises:
            InvalidArgument: a bad name or option, or a name this run used already
                (nothing is written).
            SerializationError: the result is not JSON the codec accepts (nothing is written).
            LostLease: this attempt no longer owns the task; nothing is recorded.
            SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).
            UnsupportedBackend: ``transactional=True`` on a backend without it.

        Example::

            @worker.task
            async def bill(ctx, payload):
                invoice = await ctx.step("fetch-invoice", fetch_invoice, payload["id"])
                charge = await ctx.step("charge", charge_card, invoice, retries=3)
                await ctx.step("email", send_receipt, charge)
        """
        options = _steps.step_options(name, fn, retries, backoff)
        recorded, seq = await self._step_begin(options.name)
        if recorded is not _steps.UNRECORDED:
            return recorded
        if transactional:
            return await self._transaction_step(options, seq, fn, args, kwargs)
        value = await _steps.run_step(
            options, fn, args, kwargs, guard=self._guard, task_id=self.task.id
        )
        return await self._step_record(options.name, seq, value)

    transaction_step = functools.partialmethod(step, transactional=True)

    async def steps(self) -> dict[str, Any]:
        """The results every attempt of this task recorded so far, by step name."""
        self._guard()
        rows = await self._runtime.client.backend.arun(recorded_steps(self.task.id), write=False)
        decode = self._runtime.client.codec.decode
        return {str(r["name"]): decode(r["result"], what="step result") for r in rows}

    async def _step_begin(self, name: str) -> tuple[Any, int]:
        """Claim ``name`` for this run; returns its recorded result (or ``_steps.UNRECORDED``)
        and its seq."""
        self._guard()
        if name in self._step_names:
            raise InvalidArgument(
                f"step name {name!r} is used twice in one run of task {self.task.id}; "
                "give each step its own name (for a loop, put the index in the name)"
            )
        if self._recorded_steps is None:
            self._recorded_steps = await self.steps()
        self._step_names.append(name)
        return self._recorded_steps.get(name, _steps.UNRECORDED), len(self._step_names)

    async def _step_record(self, name: str, seq: int, value: Any) -> Any:
        codec = self._runtime.client.codec
        encoded = codec.encode(value, what=f"result of step {name!r}")
        await self._owned(record_step(self.lease, self.worker_id, name, seq, encoded))
        return codec.decode(encoded, what="step result")

    async def _transaction_step(
        self,
        options: _steps.StepOptions,
        seq: int,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any],
    ) -> Any:
        runtime = self._runtime
        try:
            return await _steps.run_transactional(
                runtime.client.backend,
                runtime.client.codec,
                self.lease,
                self.worker_id,
                options,
                seq,
                fn,
                args,
                kwargs,
                guard=self._guard,
            )
        except LostLease:
            self.mark_lost()
            raise

    async def submit(
        self, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
    ) -> Task:
        """Submit a child task: parent is this task, root and correlation id are inherited.

        Args:
            task: The task name or a ``TaskDef``.
            payload: Any JSON value.
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            **options: As for ``CairnQ.submit``.

        Returns:
            The stored child task.

        Raises:
            InvalidArgument: a bad argument, or both ``task`` and ``name``.
            LostLease: this worker no longer owns the task.

        Example::

            child = await ctx.submit("thumbnail.make", {"image": payload["image"]})
        """
        task = task_or_name(task, name, "submit")
        if self._lost or self._abandoned:
            raise LostLease(self.task.id)
        options.setdefault("parent_id", self.task.id)
        options.setdefault("root_id", self.task.root_id or self.task.id)
        options.setdefault("correlation_id", self.task.correlation_id)
        depends_on = options.pop("depends_on", None)
        policy = options.pop("on_dependency_failure", "cancel")
        client = self._runtime.client
        spec = client._item({"task": task, "payload": payload, **options})
        if depends_on is not None:
            return await client._submit_after(spec, depends_on, policy, None)
        return await client._submit_spec(spec, None, self._runtime.gate)

    async def spawn(
        self, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
    ) -> Task:
        """Submit a child for ``gather``: the same child on every run of this task.

        The n-th spawn of a run gets the key ``cairnq.spawn:<this id>:<n>``, so a
        re-run (after ``gather`` parked this task, or a retry) returns the child
        the first run spawned, whatever its status, instead of a duplicate. Spawn
        in the same order on every run. Lineage as for ``submit``.

        Args:
            task: The task name or a ``TaskDef``.
            payload: Any JSON value.
            name: Another spelling of ``task``.
            **options: As for ``CairnQ.submit``, but not ``key`` (spawn sets it).

        Returns:
            The child task.

        Raises:
            InvalidArgument: a bad argument, or a ``key``.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the workflow tables.

        Example::

            parts = [await ctx.spawn("resize", {"part": i}) for i in range(10)]
            sizes = await ctx.gather(parts)
        """
        task = task_or_name(task, name, "spawn")
        if "key" in options or "depends_on" in options:
            raise InvalidArgument("spawn takes no key or depends_on: it keys the child itself")
        if self._lost or self._abandoned:
            raise LostLease(self.task.id)
        options.setdefault("parent_id", self.task.id)
        options.setdefault("root_id", self.task.root_id or self.task.id)
        options.setdefault("correlation_id", self.task.correlation_id)
        options["key"] = _workflows.spawn_key(self.task.id, self._spawned)
        client = self._runtime.client
        spec = client._item({"task": task, "payload": payload, **options})
        child = await client.backend.arun(_workflows.spawn(spec), write=True)
        self._spawned += 1
        return child

    async def gather(self, children: Sequence[Any], *, return_tasks: bool = False) -> list[Any]:
        """The children's results once all ended; until then, park this task.

        When a child is still queued or running, this attempt ends here: the task
        is parked (queued, not due, its attempt not spent, no worker slot held)
        and ``Gathering`` is raised (let it propagate). The last child to end
        releases it; the re-run's ``spawn`` calls return the same children and
        ``gather`` returns.

        Args:
            children: ``Task`` objects (from ``spawn`` or ``submit``) or ids.
            return_tasks: Return the children's ``Task`` rows instead of results.

        Returns:
            The results, in the order given (or the tasks with ``return_tasks``).

        Raises:
            TaskFailed: a child ended failed (unless ``return_tasks``).
            TaskCanceled: a child ended canceled (unless ``return_tasks``).
            Gathering: children are still running; the attempt is parked.
            InvalidGraph: a child does not exist.
            LostLease: this worker no longer owns the task.
            SchemaIncomplete: the database lacks the workflow tables.
        """
        ids = [_workflows.dependency_id(c, "gather entry") for c in children]
        # The children's settlements in this worker decide this task once it is parked.
        self._runtime.client.submitted_dependents = True
        gathered = await self._owned(_workflows.gather(self.lease, self.worker_id, ids))
        if gathered.children is not None:
            if return_tasks:
                return list(gathered.children)
            return [_outcome(child) for child in gathered.children]
        assert gathered.parked is not None
        self.waiting_on = len(ids)
        self._settled_as(gathered.parked, snoozed=True)
        raise Gathering(self.task.id, len(ids))

    async def dependencies(self) -> list[_workflows.Dependency]:
        """The tasks this one ran after, with their status, result and error.

        For ``on_dependency_failure="run"``: how each dependency ended.

        Raises:
            SchemaIncomplete: the database lacks the workflow tables.
        """
        return await self._runtime.client.backend.arun(
            _workflows.dependencies(self.task.id), write=False
        )

    async def wait(self, task_id: str, *, timeout_ms: int = 30_000, poll_ms: int = 100) -> Task:
        """Wait for another task to finish (see ``CairnQ.wait``)."""
        return await self._runtime.client.wait(task_id, timeout_ms=timeout_ms, poll_ms=poll_ms)


class SyncTaskContext:
    """The context a plain ``def`` handler gets: the same API, with blocking methods.

    The handler runs in a thread; each method runs on the worker's event loop and
    blocks the handler's thread until it is done.
    """

    def __init__(self, inner: TaskContext, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    def __repr__(self) -> str:
        return repr(self._inner).replace("TaskContext", "SyncTaskContext", 1)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def lease_lost(self) -> threading.Event:
        """Set when the lease is lost (a ``threading.Event``, usable from the handler thread)."""
        return self._inner._thread_lost_event()

    def progress(self, value: float | None, message: str | None = None) -> Task:
        """Record progress and/or a message; returns the updated task (see ``TaskContext``)."""
        return self._call(self._inner.progress(value, message))

    def heartbeat(self) -> Task:
        return self._call(self._inner.heartbeat())

    def canceled(self) -> bool:
        return self._call(self._inner.canceled())

    def succeed(self, result: Any = None) -> Task | None:
        return self._call(self._inner.succeed(result))

    complete = succeed

    def fail(self, error: Any = "task failed", *, retryable: bool = True) -> Task | None:
        return self._call(self._inner.fail(error, retryable=retryable))

    def snooze(self, delay: Any = None, *, delay_ms: int | None = None) -> Task | None:
        """Snooze the task: queued again after ``delay``, no attempt spent (see ``TaskContext``)."""
        return self._call(self._inner.snooze(delay, delay_ms=delay_ms))

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: Any = 1.0,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn`` once per task, its result recorded (see ``TaskContext.step``).

        ``fn`` runs in the handler's thread, retries wait with ``time.sleep``; a
        transactional step's ``fn`` runs where the backend's transaction is (see
        ``TaskContext.step``).
        """
        options = _steps.step_options(name, fn, retries, backoff)
        inner = self._inner
        recorded, seq = self._call(inner._step_begin(options.name))
        if recorded is not _steps.UNRECORDED:
            return recorded
        if transactional:
            return self._call(inner._transaction_step(options, seq, fn, args, kwargs))
        value = _steps.run_step_sync(options, fn, args, kwargs, guard=inner._guard)
        return self._call(inner._step_record(options.name, seq, value))

    def transaction_step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``step(..., transactional=True)``."""
        return self.step(name, fn, *args, transactional=True, **kwargs)

    def steps(self) -> dict[str, Any]:
        """The results every attempt of this task recorded so far, by step name."""
        return self._call(self._inner.steps())

    def submit(
        self, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
    ) -> Task:
        """Submit a child task (see ``TaskContext.submit``); ``name=`` spells ``task``."""
        return self._call(self._inner.submit(task, payload, name=name, **options))

    def spawn(
        self, task: Any = None, payload: Any = None, *, name: Any = None, **options: Any
    ) -> Task:
        """Submit a child for ``gather`` (see ``TaskContext.spawn``)."""
        return self._call(self._inner.spawn(task, payload, name=name, **options))

    def gather(self, children: Sequence[Any], *, return_tasks: bool = False) -> list[Any]:
        """The children's results, or park this task until they end (see ``TaskContext``)."""
        return self._call(self._inner.gather(children, return_tasks=return_tasks))

    def dependencies(self) -> list[_workflows.Dependency]:
        """The tasks this one ran after (see ``TaskContext.dependencies``)."""
        return self._call(self._inner.dependencies())

    def wait(self, task_id: str, *, timeout_ms: int = 30_000, poll_ms: int = 100) -> Task:
        return self._call(self._inner.wait(task_id, timeout_ms=timeout_ms, poll_ms=poll_ms))
