"""OpenTelemetry tracing: submit and run spans, one trace from the submitter to the worker."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cairnq import AlreadyExists, TaskContext, TaskError, kernel
from cairnq._json import DEFAULT_CODEC
from cairnq.telemetry.tracing import Tracing

from ._db import Database

ROOT = Path(__file__).resolve().parent.parent


class Traces:
    """A TracerProvider of its own, exporting to memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")
        self.tracing = Tracing(self.provider)

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = self.exporter.get_finished_spans()
        return [s for s in found if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.spans(name)
        return span


@pytest.fixture
def traces() -> Iterator[Traces]:
    traces = Traces()
    yield traces
    traces.provider.shutdown()


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


async def test_the_worker_span_in_another_process_is_a_child_of_the_submit_span(
    db: Database, traces: Traces, tmp_path: Path
) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        with traces.tracer.start_as_current_span("POST /orders"):
            task = await cq.submit("traced", {"order": 42})
    out = tmp_path / "spans.json"
    child = subprocess.run(
        [sys.executable, "-m", "tests._tracing_child", db.spec(), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    (run,) = [s for s in json.loads(out.read_text()) if s["name"] == "cairnq run traced"]
    submit = traces.one("cairnq submit traced")
    request = traces.one("POST /orders")
    assert submit.parent is not None and submit.parent.span_id == request.context.span_id
    assert run["trace_id"] == hex_id(submit.context.trace_id, 32)
    assert run["parent_span_id"] == hex_id(submit.context.span_id, 16)
    assert run["kind"] == "CONSUMER"
    assert run["attributes"]["cairnq.task.id"] == task.id
    assert run["attributes"]["cairnq.task.attempt"] == 1


async def test_the_submit_span_names_the_task(db: Database, traces: Traces) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        task = await cq.submit("email.send", {}, queue="emails")
    span = traces.one("cairnq submit email.send")
    assert span.kind == SpanKind.PRODUCER
    assert (
        dict(span.attributes or {}).items()
        >= {
            "messaging.system": "cairnq",
            "messaging.destination.name": "emails",
            "cairnq.task.id": task.id,
            "cairnq.task.name": "email.send",
            "cairnq.task.queue": "emails",
        }.items()
    )


async def test_trace_context_is_added_to_metadata_beside_the_users_keys(
    db: Database, traces: Traces
) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        task = await cq.submit("job", {}, metadata={"tenant": 7})
        stored = await cq.get(task.id)
    span = traces.one("cairnq submit job")
    assert stored is not None
    ids = (hex_id(span.context.trace_id, 32), hex_id(span.context.span_id, 16))
    expected = f"00-{ids[0]}-{ids[1]}-{hex_id(span.context.trace_flags, 2)}"
    assert stored.metadata == {"tenant": 7, "traceparent": expected}


async def test_a_traceparent_the_user_set_is_never_overwritten(
    db: Database, traces: Traces
) -> None:
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        task = await cq.submit("job", {}, metadata={"traceparent": mine})
        stored = await cq.get(task.id)
    assert stored is not None and stored.metadata == {"traceparent": mine}


async def test_a_caller_set_traceparent_gets_no_baggage_from_this_process(
    db: Database, traces: Traces
) -> None:
    from opentelemetry import baggage, context

    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        async with db.client() as cq:
            traces.tracing.instrument(cq)
            task = await cq.submit("job", {}, metadata={"traceparent": mine})
            stored = await cq.get(task.id)
    finally:
        context.detach(token)
    assert stored is not None and stored.metadata == {"traceparent": mine}


@pytest.mark.parametrize("metadata", [[1, 2], "plain text", 42])
async def test_metadata_that_is_not_an_object_is_stored_as_given_on_an_instrumented_client(
    db: Database, traces: Traces, metadata: Any
) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        task = await cq.submit("job", {}, metadata=metadata)
        stored = await cq.get(task.id)
    assert stored is not None and stored.metadata == metadata


async def test_without_instrumentation_no_metadata_is_added(db: Database, traces: Traces) -> None:
    async with db.client() as cq:
        with traces.tracer.start_as_current_span("request"):
            task = await cq.submit("job", {})
        stored = await cq.get(task.id)
    assert stored is not None and stored.metadata == {}


async def test_submit_many_traces_each_task_into_its_own_metadata(
    db: Database, traces: Traces
) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        tasks = await cq.submit_many([("a", {}), ("b", {})])
        stored = [await cq.get(t.id) for t in tasks]
    spans = {s.name: s for s in traces.spans()}
    for task in stored:
        assert task is not None
        span_id = hex_id(spans[f"cairnq submit {task.name}"].context.span_id, 16)
        assert task.metadata["traceparent"].split("-")[2] == span_id


async def test_a_refused_submit_ends_its_span_with_error_status(
    db: Database, traces: Traces
) -> None:
    async with db.client() as cq:
        traces.tracing.instrument(cq)
        await cq.submit("job", {}, key="k")
        with pytest.raises(AlreadyExists):
            await cq.submit("job", {}, key="k", conflict="reject")
    first, refused = traces.spans("cairnq submit job")
    assert first.status.status_code == StatusCode.UNSET
    assert refused.status.status_code == StatusCode.ERROR
    assert [e.name for e in refused.events] == ["exception"]


async def test_a_failed_attempt_span_has_error_status_and_the_exception(
    db: Database, traces: Traces
) -> None:
    worker = db.worker(poll_interval_ms=20)
    traces.tracing.instrument(worker)

    @worker.task
    async def bad(ctx: TaskContext, payload: Any) -> None:
        raise TaskError("card declined", code="declined")

    async with db.client() as cq, worker.background():
        task = await cq.submit("bad", {})
        await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    span = traces.one("cairnq run bad")
    assert span.kind == SpanKind.CONSUMER
    assert span.status.status_code == StatusCode.ERROR
    (event,) = span.events
    assert event.name == "exception"
    assert (
        dict(event.attributes or {}).items()
        >= {
            "exception.type": "TaskError",
            "exception.message": "card declined",
        }.items()
    )
    assert (span.attributes or {})["cairnq.task.outcome"] == "failed"


async def test_a_retried_attempt_is_an_error_and_the_next_attempt_succeeds(
    db: Database, traces: Traces
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, retry_backoff_max_ms=0)
    traces.tracing.instrument(worker)

    @worker.task
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        if ctx.attempt == 1:
            raise ConnectionError("reset")
        return "ok"

    async with db.client() as cq, worker.background():
        task = await cq.submit("flaky", {})
        await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    attempts = sorted(
        traces.spans("cairnq run flaky"), key=lambda s: (s.attributes or {})["cairnq.task.attempt"]
    )
    outcome = [
        ((s.attributes or {})["cairnq.task.outcome"], s.status.status_code) for s in attempts
    ]
    assert outcome == [("retried", StatusCode.ERROR), ("succeeded", StatusCode.UNSET)]
    stack = dict(attempts[0].events[0].attributes or {})
    assert "ConnectionError: reset" in str(stack["exception.stacktrace"])


async def test_the_run_span_is_current_inside_async_and_sync_handlers(
    db: Database, traces: Traces
) -> None:
    worker = db.worker(poll_interval_ms=20)
    traces.tracing.instrument(worker)

    @worker.task
    async def outer(ctx: TaskContext, payload: Any) -> None:
        with traces.tracer.start_as_current_span("inside async"):
            await asyncio.sleep(0)

    @worker.task
    def blocking(ctx: Any, payload: Any) -> None:
        assert threading.current_thread() is not threading.main_thread()
        with traces.tracer.start_as_current_span("inside sync"):
            pass

    async with db.client() as cq, worker.background():
        for name in ("outer", "blocking"):
            task = await cq.submit(name, {})
            await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    for handler, inner in (("outer", "inside async"), ("blocking", "inside sync")):
        run = traces.one(f"cairnq run {handler}")
        child = traces.one(inner)
        assert child.parent is not None and child.parent.span_id == run.context.span_id


async def test_a_child_task_submitted_by_a_handler_continues_the_trace(
    db: Database, traces: Traces
) -> None:
    worker = db.worker(poll_interval_ms=20)
    traces.tracing.instrument(worker)

    @worker.task
    async def parent(ctx: TaskContext, payload: Any) -> str:
        child = await ctx.submit("child", {})
        return child.id

    @worker.task
    async def child(ctx: TaskContext, payload: Any) -> None: ...

    async with db.client() as cq, worker.background():
        traces.tracing.instrument(cq)
        task = await cq.submit("parent", {})
        done = await cq.wait(task.id, timeout_ms=10_000)
        await cq.wait(done.result, timeout_ms=10_000)
    await worker.close()
    chain = [
        traces.one(name)
        for name in ("cairnq submit parent", "cairnq run parent", "cairnq submit child")
    ]
    chain.append(traces.one("cairnq run child"))
    assert len({s.context.trace_id for s in chain}) == 1
    for parent_span, child_span in itertools.pairwise(chain):
        assert child_span.parent is not None
        assert child_span.parent.span_id == parent_span.context.span_id


async def test_a_task_without_trace_context_runs_in_a_new_trace(
    db: Database, traces: Traces
) -> None:
    worker = db.worker(poll_interval_ms=20)
    traces.tracing.instrument(worker)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None: ...

    with traces.tracer.start_as_current_span("around the worker"):
        async with db.client() as cq, worker.background():
            # Metadata that is no object, as another SDK may write (cairnq's clients refuse it).
            spec = kernel.new_task(DEFAULT_CODEC, "job", {}, metadata=["not", "an", "object"])
            task = await cq.backend.arun(kernel.submit(spec), write=True)
            await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    assert traces.one("cairnq run job").parent is None


def test_a_sync_client_traces_its_submits(db: Database, traces: Traces) -> None:
    with db.sync_client() as cq:
        traces.tracing.instrument(cq)
        task = cq.submit("job", {})
        stored = cq.get(task.id)
    span = traces.one("cairnq submit job")
    assert stored is not None
    assert stored.metadata["traceparent"].split("-")[1] == hex_id(span.context.trace_id, 32)


def test_without_a_tracing_sdk_nothing_is_added(db: Database) -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    with db.sync_client() as cq:
        Tracing().instrument(cq)
        task = cq.submit("job", {}, metadata={"a": 1})
        stored = cq.get(task.id)
    assert stored is not None and stored.metadata == {"a": 1}
