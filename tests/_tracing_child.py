"""A traced worker in its own process, for the cross-process tracing test.

Usage: ``python -m tests._tracing_child SPEC OUT`` where SPEC is the JSON of
``Database.spec()``. It runs a worker with its own TracerProvider and in-memory
exporter until no task is due, then writes every finished span (names and ids
as hex) to OUT as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cairnq import CairnQ, Worker
from cairnq.telemetry.tracing import Tracing

from ._child import open_backend


def main(spec: dict[str, Any], out: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    worker = Worker(CairnQ(open_backend(spec)), poll_interval_ms=20)
    worker._owns_client = True
    worker.client._owns_backend = True
    Tracing(provider).instrument(worker)

    @worker.task
    async def traced(ctx: Any, payload: Any) -> str:
        return "traced"

    worker.serve(until_idle=True)
    spans = [
        {
            "name": span.name,
            "kind": span.kind.name,
            "trace_id": format(span.context.trace_id, "032x"),
            "span_id": format(span.context.span_id, "016x"),
            "parent_span_id": None if span.parent is None else format(span.parent.span_id, "016x"),
            "attributes": dict(span.attributes or {}),
        }
        for span in exporter.get_finished_spans()
    ]
    with open(out, "w") as f:
        json.dump(spans, f)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2])
