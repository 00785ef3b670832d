"""Prometheus metrics and OpenTelemetry tracing for cairnq clients and workers.

Each half needs its extra and is imported on first use:

- ``cairnq.telemetry.metrics.Metrics`` (``pip install ".[metrics]"``: prometheus-client)
- ``cairnq.telemetry.tracing.Tracing`` (``pip install ".[otel]"``: opentelemetry-api)

Both attach to a client or a worker with ``instrument(target)``, which returns a
function that detaches them again. Nothing is paid for either until it is attached.

Example::

    from cairnq.telemetry import Metrics, Tracing

    metrics, tracing = Metrics(), Tracing()
    for target in (cq, worker):
        metrics.instrument(target)
        tracing.instrument(target)
    app.mount("/metrics", metrics.asgi_app(cq))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .metrics import Metrics
    from .tracing import Tracing

__all__ = ["Metrics", "Tracing"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that each half needs only its own extra.
    if name == "Metrics":
        from .metrics import Metrics

        return Metrics
    if name == "Tracing":
        from .tracing import Tracing

        return Tracing
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
