"""What a handler sees of its task: ``TaskContext``, and what every context of one worker
shares (``Runtime``).

This is the source of both contexts: a plain ``def`` handler's ``SyncTaskContext`` is
generated from it (``_context_sync.py``, by ``scripts/generate_sync.py``), each public
async method of ``TaskContext`` and of its extensions' mixins a blocking method that runs
it on the worker's loop (``_blocking.BlockingContext``), but ``succeed_encoded`` (the
worker's) and ``succeed_in`` (its write is async).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from .. import kernel
from ..backends import InTransactionCompleter
from ..backoff import Retry, retry_delay_ms
from ..backpressure import QueueGate
from ..client._checks import task_or_name
from ..client._core import _ITEM_FIELDS
from ..durations import Duration
from ..errors import (
    InvalidArgument,
    LostLease,
    TaskError,
    UnsupportedBackend,
    error_envelope,
    safe_str,
)
from ..extensions._builtins_context_async import BuiltinContext
from ..kernel.points import NO_POINTS, Points
from ..lineage import Lineage
from ..models import Lease, Task
from ..protocol.steps import Op
from ..store._leases import complete_attempt
from ._task_events import SETTLED_AS, EventKind, TaskEvent
from ._task_events import Listener as Listener  # re-exported for the worker's on_event

if TYPE_CHECKING:
    from ..extensions.policies._ops import StoredRetry

log = logging.getLogger("cairnq.worker")
# The ``max_attempts`` a submit that gives none writes (the protocol's default): the
# only row value a handler's lower ``max_attempts`` overrides.
UNSAID_ATTEMPTS = 3

if TYPE_CHECKING:
    from ..client import CairnQ

T = TypeVar("T")
S = TypeVar("S")
# Guards the lazily made threading.Event of every context (rarely taken: lease loss,
# or a sync handler asking for the event).
_LOST_EVENT_LOCK = threading.Lock()


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
    # The hooks of the worker's extensions that its settlements run (compiled per run).
    points: Points = NO_POINTS
    # The worker's extension options, checked (``Extension.options``), by name.
    options: Mapping[str, object] = field(default_factory=dict)

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


class TaskContext(BuiltinContext):
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

    def __init__(
        self,
        runtime: Runtime,
        task: Task,
        lease: Lease,
        payload_bytes: int,
        *,
        options: Mapping[str, object] | None = None,
        retry: Retry | None = None,
        handler_attempts: int | None = None,
        batched: bool = False,
    ) -> None:
        self._runtime = runtime
        self.task = task
        # Whether its handler takes a list of contexts (``batch=``): one call, many tasks.
        self.batched = batched
        # The handler's retry policy and max_attempts (``docs/policies.md``), if it has any;
        # a submit's own retry policy replaces the first (``apply_policies``).
        self._retry = retry
        self._stored_retry: StoredRetry | None = None
        self._handler_attempts = handler_attempts
        # How long this run may take, when its submit said (``submit(timeout=...)``).
        self.run_timeout_ms: int | None = None
        # The extension options its handler was registered with (``Extension.task_options``).
        self._task_options = options or {}
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
        # How an extension that settled the attempt queued again describes it in the
        # attempt's log line: (outcome, words).
        self.ending: tuple[str, str] | None = None
        # When this worker first saw a cancel of the task (``time.monotonic()``), or None.
        self.cancel_seen_at: float | None = (
            None if task.cancel_requested_at_ms is None else time.monotonic()
        )
        # Told when the cancel is first seen (the worker's ``Stop`` of the running call).
        self._on_cancel: Callable[[], None] | None = None
        # The extensions' mixins' state in this attempt, by kind (``_state``).
        self._states: dict[object, object] | None = None
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

    def _settled_as(
        self, row: Any, *, event: str | None = None, ending: tuple[str, str] | None = None
    ) -> Task:
        """Record that this attempt is settled; tell listeners how it ended.

        For a task queued again, ``event`` is the listeners' kind (``retried`` by
        default) and ``ending`` the (outcome, words) of the attempt's log line.
        """
        return self._settled_task(Task.from_row(row), event=event, ending=ending)

    def _settled_task(
        self, task: Task, *, event: str | None = None, ending: tuple[str, str] | None = None
    ) -> Task:
        """``_settled_as`` of the task as settled (already read from its row)."""
        self._settled = True
        self.settled_status = task.status
        error = None if task.status == "succeeded" else task.error
        if event is not None and task.status == "queued":
            self.ending = ending
            self._emit(cast(EventKind, event))
        else:
            self._emit(SETTLED_AS.get(task.status, "failed"), error)
        return task

    def _option(self, name: str) -> object:
        """An extension option for this task: its handler's own when registered with one,
        else the worker's."""
        own = self._task_options.get(name)
        return self._runtime.options[name] if own is None else own

    def _state(self, kind: Callable[[], S]) -> S:
        """This attempt's state of an extension's mixin: ``kind()`` made on first use."""
        states = self._states
        if states is None:
            states = self._states = {}
        found = states.get(kind)
        if found is None:
            found = states[kind] = kind()
        return cast(S, found)

    def apply_policies(self, policies: Mapping[str, Any]) -> None:
        """Apply what this task's submit asked (the policies extension's row): its run
        timeout, and its retry policy in place of the handler's."""
        from ..extensions.policies._ops import read_retry

        timeout = policies.get("run_timeout_ms")
        if timeout is not None:
            self.run_timeout_ms = int(timeout)
        stored = read_retry(policies.get("retry"))
        if stored is not None:
            self._stored_retry = stored
            self._retry = stored.retry

    def mark_cancel_requested(self) -> None:
        """Note that a cancel of the task was requested (seen on a heartbeat or a write)."""
        if self.cancel_seen_at is not None:
            return
        self.cancel_seen_at = time.monotonic()
        if self._on_cancel is not None:
            self._on_cancel()

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
            self.mark_cancel_requested()
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
            self.mark_cancel_requested()
        return task

    async def canceled(self) -> bool:
        """Whether a cancel was requested (a vanished task counts as canceled)."""
        if self.cancel_seen_at is not None:
            return True
        seen = await self._runtime.client.backend.arun(
            kernel.cancel_requested(self.task.id), write=False
        )
        if seen:
            self.mark_cancel_requested()
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
        encoded = self._runtime.client.codec.seal_optional(result, what="result")
        return await self.succeed_encoded(encoded)

    complete = succeed

    async def succeed_encoded(self, result: str | None, *, grouped: bool = False) -> Task | None:
        """Settle with a result already encoded as JSON text.

        ``grouped`` (the worker settling a returned handler) joins the worker's
        group write and returns ``None`` instead of the re-read task.
        """
        settler = self._runtime.settler if grouped else None
        if settler is None:
            # A ``complete`` replaced on the client's store settles the handler's success,
            # as it does the worker's (``cairnq.store``).
            store = self._runtime.client._overriding("complete")
            if store is not None:
                return await self._complete_through(store, result)
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

    async def _complete_through(self, store: Any, result: str | None) -> Task:
        """Settle through the store's replaced ``complete``, fenced on this attempt's lease."""
        self._guard()
        try:
            task = await complete_attempt(
                store,
                self.lease,
                self.worker_id,
                self.claimed_at_ms,
                result,
                self._runtime.points,
            )
        except LostLease:
            self.mark_lost()
            raise
        return self._settled_task(task)

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
            encode = functools.partial(self._runtime.client.codec.seal_optional, what="result")
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
        return await self._record_failure(envelope, retryable=retryable, error=error)

    def _next_run(
        self, envelope: dict[str, Any], retryable: bool, error: object
    ) -> tuple[dict[str, Any], bool, int]:
        """The envelope, whether the task is retried and after how long, by the
        handler's policy over the worker's settings.

        The row's ``max_attempts`` still decides in the ``fail`` statement: the
        handler's ``max_attempts`` can only stop retries earlier, never add one, and
        only for a task whose submit gave none: the row holds the protocol's default
        (``UNSAID_ATTEMPTS``) and no stored retry policy of the submit names a number.
        A number the submit gave (``max_attempts=``, ``retry=Retry(max_attempts=...)``,
        a ``TaskDef``'s) stands.
        """
        if not retryable:
            return envelope, False, 0
        retry = self._retry
        stored = self._stored_retry
        if (retry is not None and not retry.retries(error)) or (
            stored is not None and not stored.retries(error)
        ):
            return {**envelope, "retryable": False}, False, 0
        limit = self._handler_attempts
        if (
            limit is not None
            and self.attempt >= limit
            and self.task.max_attempts == UNSAID_ATTEMPTS
            and (stored is None or stored.max_attempts is None)
        ):
            return envelope, False, 0
        runtime = self._runtime
        if retry is None:
            return envelope, True, runtime.delay_after(self.attempt)
        try:
            delay_ms = retry.delay_ms(
                self.attempt,
                error,
                base_ms=runtime.retry_backoff_ms,
                max_ms=runtime.retry_backoff_max_ms,
            )
        except Exception:
            log.exception(
                "task %s %s: its retry policy's backoff raised; the worker's backoff applies",
                self.task.name,
                self.task.id,
                extra={"task_id": self.task.id},
            )
            delay_ms = runtime.delay_after(self.attempt)
        return envelope, True, delay_ms

    async def _record_failure(
        self,
        envelope: dict[str, Any],
        *,
        retryable: bool,
        force: bool = False,
        delay_ms: int | None = None,
        error: object = None,
    ) -> Task:
        """Fail this attempt with ``envelope``; ``error`` is what raised it (the
        exception, or what the handler gave ``ctx.fail``), for its retry policy."""
        if delay_ms is None:
            envelope, retryable, delay_ms = self._next_run(
                envelope, retryable, envelope if error is None else error
            )
        text = self._runtime.client.codec.encode_error(envelope, retryable=retryable)
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
        # Options the client's submit takes beyond a task's own fields are an
        # extension's (``_submit_extra``).
        extra = {k: options.pop(k) for k in list(options) if k not in _ITEM_FIELDS}
        spec = self._child(task, payload, name, options, "submit")
        if extra:
            stored = await self._submit_extra(spec, extra)
            if stored is not None:
                return stored
        return await self._runtime.client._submit_spec(spec, None, self._runtime.gate)

    def _child(
        self, task: Any, payload: Any, name: Any, options: dict[str, Any], where: str
    ) -> kernel.NewTask:
        """A child task's spec: parent this task, root and correlation id inherited."""
        task = task_or_name(task, name, where)
        if self._lost or self._abandoned:
            raise LostLease(self.task.id)
        options["lineage"] = Lineage.pop_from(options).over(Lineage.below(self.task))
        return self._runtime.client._item({"task": task, "payload": payload, **options})

    async def wait(
        self,
        task_id: str,
        *,
        timeout_ms: int | None = None,
        poll_ms: int = 100,
        timeout: Duration | None = None,
    ) -> Task:
        """Wait for another task to finish (see ``CairnQ.wait``): ``timeout_ms`` (the
        reference SDK's) or ``timeout`` (a duration such as ``"5s"``), 30 s by default."""
        return await self._runtime.client.wait(
            task_id, timeout_ms=timeout_ms, poll_ms=poll_ms, timeout=timeout
        )
