"""OpenTelemetry tracing: a span per submitted task and per attempt, one trace across hosts.

Needs the ``otel`` extra (opentelemetry-api; configure an SDK to export).

- **Submit**: a ``PRODUCER`` span ``cairnq submit <name>`` per task written by
  ``submit``, ``submit_many`` or a handler's ``ctx.submit``, child of the span
  current at the call.
- **Run**: a ``CONSUMER`` span ``cairnq run <name>`` per attempt in a worker,
  child of the submit span, and current while the handler runs (for one-task
  calls; a batch call gets a span per task, none of them current). A failed
  attempt (failed, or retried) has status ``ERROR`` and an ``exception`` event
  built from the stored error envelope; a lost lease is an ``ERROR`` too;
  success and cancel leave the status unset. ``cairnq.task.outcome`` says how
  the attempt ended (``unsettled`` when the worker stopped before settling it).

**Context in metadata.** The submit span's context travels in the task's
``metadata`` under the keys of the global propagator
(``opentelemetry.propagate``; by default W3C ``traceparent`` and
``tracestate``, plus ``baggage`` when set), as top-level string values. They
are added only when the metadata is a JSON object (the default ``{}``
included) and never replace a key the caller set; metadata that is a list,
string, number or ``null`` is stored untouched, and its task's run span starts
a new trace. With no tracing SDK configured nothing is added.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._extras import missing_extra

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("cairnq tracing", "otel", "opentelemetry-api") from exc

from .. import __version__
from ..hooks import PendingSubmit, SubmitDone
from ..models import Task
from ..worker import TaskContext, TaskEvent
from ._attach import Attachments, Detach

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..client import CairnQ, SyncCairnQ
    from ..worker import Worker

__all__ = ["Tracing"]

SYSTEM = "cairnq"
_FAILED = ("failed", "retried")


def _attempt_key(task_id: str, attempt: int) -> tuple[str, int]:
    return (task_id, attempt)


class Tracing:
    """OpenTelemetry spans for submits and attempts, linked through task metadata.

    Args:
        tracer_provider: Where spans go; the global provider by default
            (resolved when a span starts, so it may be set after this is made).

    Example::

        tracing = Tracing()
        tracing.instrument(cq)        # web process: spans for submits, context in metadata
        tracing.instrument(worker)    # worker process: spans for attempts, children of those

        with tracer.start_as_current_span("POST /orders"):
            await cq.submit("orders.confirm", {"order": 42})   # same trace in the worker
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(
            "cairnq.telemetry.tracing", __version__, tracer_provider=tracer_provider
        )
        # The run span of every attempt inside a call scope, for the events of that attempt.
        self._running: dict[tuple[str, int], Span] = {}
        self._outcomes: dict[tuple[str, int], str] = {}
        self._attachments = Attachments(
            submit_hook=self._on_submit, listener=self._on_event, scope=self._scope
        )

    def __repr__(self) -> str:
        return f"<Tracing running={len(self._running)}>"

    def instrument(self, target: CairnQ | SyncCairnQ | Worker) -> Detach:
        """Trace what ``target`` does from now on.

        A client gets a span per submitted task and writes its context into the
        task's metadata. A worker gets a span per attempt, child of the context
        found in the task's metadata, current while the handler runs; its
        handlers' ``ctx.submit`` are traced too. Instrumenting a target twice
        attaches once.

        Args:
            target: A ``CairnQ``, ``SyncCairnQ`` or ``Worker``.

        Returns:
            A function that detaches tracing from ``target``.

        Raises:
            InvalidArgument: ``target`` is none of those.

        Example::

            detach = Tracing(provider).instrument(worker)
        """
        return self._attachments.attach(target)

    # --- submit -----------------------------------------------------------------------------

    def _on_submit(self, pending: PendingSubmit) -> SubmitDone:
        span = self._tracer.start_span(
            f"cairnq submit {pending.name}",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "send",
                "messaging.operation.name": "submit",
                "messaging.destination.name": pending.queue,
                "messaging.message.id": pending.id,
                "cairnq.task.id": pending.id,
                "cairnq.task.name": pending.name,
                "cairnq.task.queue": pending.queue,
            },
        )
        if pending.key is not None:
            span.set_attribute("cairnq.task.key", pending.key)
        # All of the context or none of it: a caller that set any propagation key
        # keeps exactly what it set, never a mix of its trace and this one's baggage.
        metadata = pending.metadata
        fields = propagate.get_global_textmap().fields
        if isinstance(metadata, dict) and not any(f in metadata for f in fields):
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context=trace.set_span_in_context(span))
            for key, value in carrier.items():
                pending.add_metadata(key, value)
        inserted_id = pending.id

        def done(task: Task | None, error: BaseException | None) -> None:
            if task is not None and task.id != inserted_id:
                # A reused key: the task stored is an existing one, without this context.
                span.set_attribute("cairnq.task.id", task.id)
                span.set_attribute("messaging.message.id", task.id)
                span.set_attribute("cairnq.task.reused", True)
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            span.end()

        return done

    # --- run --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _scope(self, contexts: Sequence[TaskContext]) -> Iterator[None]:
        spans: list[tuple[tuple[str, int], Span]] = []
        for ctx in contexts:
            span = self._tracer.start_span(
                f"cairnq run {ctx.name}",
                context=_parent_context(ctx.metadata),
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": SYSTEM,
                    "messaging.operation.type": "process",
                    "messaging.operation.name": "run",
                    "messaging.destination.name": ctx.queue,
                    "messaging.message.id": ctx.task_id,
                    "cairnq.task.id": ctx.task_id,
                    "cairnq.task.name": ctx.name,
                    "cairnq.task.queue": ctx.queue,
                    "cairnq.task.attempt": ctx.attempt,
                    "cairnq.task.max_attempts": ctx.max_attempts,
                    "cairnq.worker.id": ctx.worker_id,
                },
            )
            key = _attempt_key(ctx.task_id, ctx.attempt)
            self._running[key] = span
            spans.append((key, span))
        token = None
        if len(spans) == 1:
            token = otel_context.attach(trace.set_span_in_context(spans[0][1]))
        try:
            yield
        finally:
            if token is not None:
                otel_context.detach(token)
            for key, span in spans:
                self._running.pop(key, None)
                outcome = self._outcomes.pop(key, "unsettled")
                span.set_attribute("cairnq.task.outcome", outcome)
                span.end()

    def _on_event(self, event: TaskEvent) -> None:
        key = _attempt_key(event.task_id, event.attempt)
        span = self._running.get(key)
        if span is None or event.kind in ("started", "recovered"):
            return
        self._outcomes[key] = event.kind
        if event.kind in _FAILED:
            _record_envelope(span, event.error)
        elif event.kind == "lost":
            span.set_status(Status(StatusCode.ERROR, "lease lost: another attempt may run"))


def _parent_context(metadata: Any) -> Context:
    """The context carried in a task's metadata; an empty one (a new trace) when none is.

    Never the worker's own ambient context: an attempt belongs to the trace that
    submitted it, not to whatever was current when the worker started.
    """
    if not isinstance(metadata, Mapping):
        return Context()
    fields = propagate.get_global_textmap().fields
    carrier = {k: v for k in fields if isinstance(v := metadata.get(k), str)}
    if not carrier:
        return Context()
    return propagate.extract(carrier, context=Context())


def _record_envelope(span: Span, error: Mapping[str, Any] | None) -> None:
    """Error status and an ``exception`` event from the stored error envelope."""
    envelope = error or {}
    kind = str(envelope.get("type") or "TaskError")
    message = str(envelope.get("message") or "")
    attributes: dict[str, str] = {"exception.type": kind, "exception.message": message}
    details = envelope.get("details")
    if isinstance(details, Mapping) and isinstance(details.get("traceback"), str):
        attributes["exception.stacktrace"] = details["traceback"]
    code = envelope.get("code")
    if isinstance(code, str):
        span.set_attribute("cairnq.error.code", code)
    span.add_event("exception", attributes)
    span.set_status(Status(StatusCode.ERROR, f"{kind}: {message}" if message else kind))
