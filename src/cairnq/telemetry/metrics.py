"""Prometheus metrics: task counts from the database, counters and timings from this process.

Needs the ``metrics`` extra (prometheus-client).

What a scrape shows (``cairnq`` is the default namespace):

============================================  =========  ==================================
``cairnq_tasks``                              gauge      tasks in the database, by queue
                                                         and status (read at scrape time)
``cairnq_queue_oldest_queued_age_seconds``    gauge      how long the oldest due queued
                                                         task has waited, by queue (0: none)
``cairnq_queue_due_tasks``                     gauge      the due backlog: queued tasks whose
                                                         run time has come, by queue
``cairnq_tasks_submitted_total``              counter    tasks this process inserted
``cairnq_tasks_succeeded_total``              counter    attempts this process settled,
``cairnq_tasks_failed_total``                            by outcome (``retried``: failed
``cairnq_tasks_retried_total``                           and queued again; ``lost``: the
``cairnq_tasks_canceled_total``                          lease was lost mid-run)
``cairnq_tasks_lost_total``
``cairnq_task_run_seconds``                   histogram  handler run time per settled attempt
``cairnq_task_claim_latency_seconds``         histogram  from due (``run_at_ms``) to claimed
``cairnq_lease_recoveries_total``             counter    expired leases this process's
                                                         maintenance recovered, by outcome
``cairnq_metrics_database_errors_total``      counter    scrapes whose database read failed
============================================  =========  ==================================

Counters and histograms carry ``queue`` and ``name`` labels. They count what
happens in this process: scrape every worker and sum. The database gauges are
the same from every process that serves them; serve them from one place (the
dashboard, or one ``asgi_app(cq)``) or aggregate them with ``max``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from .._extras import missing_extra

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.exposition import choose_encoder, generate_latest
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("cairnq metrics", "metrics", "prometheus-client") from exc

from ..errors import InvalidArgument
from ..hooks import PendingSubmit, SubmitDone
from ..models import QueueSummary, Task
from ..worker import TaskEvent
from ._attach import Attachments, Detach

if TYPE_CHECKING:
    from ..client import CairnQ, SyncCairnQ
    from ..worker import Worker

__all__ = [
    "CLAIM_LATENCY_BUCKETS",
    "CONTENT_TYPE",
    "RUN_TIME_BUCKETS",
    "Metrics",
]

log = logging.getLogger("cairnq.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Handlers run from milliseconds to an hour; the default Prometheus buckets stop at 10 s.
RUN_TIME_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
# Claim latency is measured in whole milliseconds of the database clock.
CLAIM_LATENCY_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
_SETTLED = ("succeeded", "failed", "retried", "canceled")

ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], ASGIReceive, ASGISend], Awaitable[None]]


class _QueueGauges(Collector):
    """The database gauges, from the last overview this process read (replaced whole)."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._snapshot: tuple[QueueSummary, ...] | None = None

    def update(self, summaries: Iterable[QueueSummary]) -> None:
        self._snapshot = tuple(summaries)

    def forget(self) -> None:
        self._snapshot = None

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        return self._families(self._snapshot)

    def _families(self, snapshot: Sequence[QueueSummary] | None = None) -> list[Metric]:
        tasks = GaugeMetricFamily(
            f"{self._namespace}_tasks",
            "Tasks in the database by queue and status, read at scrape time.",
            labels=["queue", "status"],
        )
        age = GaugeMetricFamily(
            f"{self._namespace}_queue_oldest_queued_age_seconds",
            "How long the oldest due queued task of the queue has waited (0 when none waits).",
            labels=["queue"],
        )
        due = GaugeMetricFamily(
            f"{self._namespace}_queue_due_tasks",
            "The due backlog: queued tasks of the queue whose run time has come.",
            labels=["queue"],
        )
        for summary in snapshot or ():
            for status, count in summary.counts.items():
                tasks.add_metric([summary.queue, status], count)
            waited = summary.oldest_queued_age_ms
            age.add_metric([summary.queue], 0.0 if waited is None else waited / 1000)
            due.add_metric([summary.queue], summary.due)
        return [tasks, age, due]


class Metrics:
    """Prometheus metrics for cairnq: attach to clients and workers, serve or render them.

    Args:
        registry: Where the metrics live. By default a registry of their own,
            served by ``asgi_app`` and ``exposition``; pass
            ``prometheus_client.REGISTRY`` to join the application's metrics.
        namespace: Prefix of every metric name.
        run_time_buckets: Histogram buckets of ``task_run_seconds``.
        claim_latency_buckets: Histogram buckets of ``task_claim_latency_seconds``.

    Raises:
        InvalidArgument: a bad namespace.
        ValueError: (from prometheus-client) the registry already holds these metrics.

    Example::

        metrics = Metrics()
        metrics.instrument(cq)        # counts submits
        metrics.instrument(worker)    # counts outcomes, run time, claim latency, recoveries
        app.mount("/metrics", metrics.asgi_app(cq))   # database gauges refreshed per scrape
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "cairnq",
        run_time_buckets: Sequence[float] = RUN_TIME_BUCKETS,
        claim_latency_buckets: Sequence[float] = CLAIM_LATENCY_BUCKETS,
    ) -> None:
        if not isinstance(namespace, str) or not namespace.isidentifier():
            raise InvalidArgument(f"namespace must be a metric-name prefix, got {namespace!r}")
        self.registry = CollectorRegistry() if registry is None else registry
        self.namespace = namespace
        task_labels = ("queue", "name")

        def counter(name: str, doc: str, labels: Sequence[str] = task_labels) -> Counter:
            return Counter(f"{namespace}_{name}", doc, labels, registry=self.registry)

        self.submitted = counter("tasks_submitted", "Tasks this process inserted.")
        self.succeeded = counter("tasks_succeeded", "Attempts settled succeeded here.")
        self.failed = counter("tasks_failed", "Attempts settled failed here, for good.")
        self.retried = counter("tasks_retried", "Attempts that failed here and were queued again.")
        self.canceled = counter("tasks_canceled", "Attempts settled canceled here.")
        self.lost = counter("tasks_lost", "Attempts whose lease this process lost mid-run.")
        self.lease_recoveries = counter(
            "lease_recoveries",
            "Expired leases this process's maintenance recovered (outcome: the new status).",
            ("queue", "name", "outcome"),
        )
        self.database_errors = counter(
            "metrics_database_errors", "Scrapes whose database read failed.", ()
        )
        self.run_time = Histogram(
            f"{namespace}_task_run_seconds",
            "Handler run time of each attempt settled here.",
            task_labels,
            registry=self.registry,
            buckets=tuple(run_time_buckets),
        )
        self.claim_latency = Histogram(
            f"{namespace}_task_claim_latency_seconds",
            "From a task being due (run_at_ms) to its claim by a worker here (database clock).",
            task_labels,
            registry=self.registry,
            buckets=tuple(claim_latency_buckets),
        )
        self._by_kind: dict[str, Counter] = {
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retried": self.retried,
            "canceled": self.canceled,
            "lost": self.lost,
        }
        self._queues = _QueueGauges(namespace)
        self.registry.register(self._queues)
        self._attachments = Attachments(submit_hook=self._on_submit, listener=self._on_event)

    def __repr__(self) -> str:
        return f"<Metrics namespace={self.namespace!r}>"

    # --- attaching --------------------------------------------------------------------------

    def instrument(self, target: CairnQ | SyncCairnQ | Worker) -> Detach:
        """Count what ``target`` does from now on.

        A client counts the tasks it inserts (a keyed submit that returns an
        existing task counts nothing). A worker counts settled attempts by
        outcome, their run time, claim latency and the leases its maintenance
        recovers, plus its handlers' ``ctx.submit``. Instrumenting a target
        twice attaches once.

        Args:
            target: A ``CairnQ``, ``SyncCairnQ`` or ``Worker``.

        Returns:
            A function that detaches these metrics from ``target``.

        Raises:
            InvalidArgument: ``target`` is none of those.

        Example::

            detach = metrics.instrument(worker)
        """
        return self._attachments.attach(target)

    def _on_submit(self, pending: PendingSubmit) -> SubmitDone:
        queue, name, task_id = pending.queue, pending.name, pending.id

        def done(task: Task | None, error: BaseException | None) -> None:
            if task is not None and task.id == task_id:
                self.submitted.labels(queue, name).inc()

        return done

    def _on_event(self, event: TaskEvent) -> None:
        kind = event.kind
        if kind == "started":
            task = event.task
            if task is not None:
                waited_ms = max(0, task.updated_at_ms - task.run_at_ms)
                self.claim_latency.labels(event.queue, event.name).observe(waited_ms / 1000)
            return
        if kind == "recovered":
            outcome = "unknown" if event.task is None else event.task.status
            self.lease_recoveries.labels(event.queue, event.name, outcome).inc()
            return
        counter = self._by_kind.get(kind)
        if counter is None:
            return
        counter.labels(event.queue, event.name).inc()
        if kind in _SETTLED and event.duration_ms is not None:
            self.run_time.labels(event.queue, event.name).observe(event.duration_ms / 1000)

    # --- database gauges --------------------------------------------------------------------

    def update_queues(self, summaries: Iterable[QueueSummary]) -> None:
        """Set the database gauges from an overview (``cq.overview()``), replacing the last.

        Queues missing from ``summaries`` disappear from the gauges.

        Args:
            summaries: ``QueueSummary`` items, as ``overview()`` returns them.

        Raises:
            InvalidArgument: an item is not a ``QueueSummary``.
        """
        items = tuple(summaries)
        for item in items:
            if not isinstance(item, QueueSummary):
                raise InvalidArgument(f"expected QueueSummary items, got {type(item).__name__}")
        self._queues.update(items)

    async def refresh(self, client: CairnQ) -> bool:
        """Read the overview through ``client`` and set the database gauges from it.

        A failed read is logged and counted in ``metrics_database_errors_total``;
        the database gauges are then left out until a read succeeds, rather than
        showing stale figures.

        Args:
            client: An async ``CairnQ`` on the database to report.

        Returns:
            Whether the read succeeded.
        """
        try:
            summaries = await client.overview()
        except Exception as exc:
            self.database_errors.inc()
            self._queues.forget()
            log.warning("metrics: reading the queue overview failed: %s", exc)
            return False
        self._queues.update(summaries)
        return True

    # --- exposition -------------------------------------------------------------------------

    def exposition(self, queues: Iterable[QueueSummary] | None = None) -> bytes:
        """The registry in the Prometheus text format, for any web framework to serve.

        Args:
            queues: A fresh overview to set the database gauges from first
                (``cq.overview()`` from a ``SyncCairnQ`` in sync code); ``None``
                keeps the last one (none: the gauges are empty).

        Returns:
            The exposition; serve it with ``Content-Type: CONTENT_TYPE``.

        Example::

            @flask_app.get("/metrics")
            def scrape():
                body = metrics.exposition(sync_cq.overview())
                return body, 200, {"Content-Type": CONTENT_TYPE}
        """
        if queues is not None:
            self.update_queues(queues)
        return generate_latest(self.registry)

    def asgi_app(self, client: CairnQ | None = None) -> ASGIApp:
        """An ASGI app serving the exposition on GET (and HEAD), at whatever path it is mounted.

        Args:
            client: When given, each scrape first reads the queue overview
                through it, so the database gauges are current. Leave it out in
                worker processes whose database figures another scrape target
                already serves.

        Returns:
            An ASGI 3 application (it also answers the lifespan protocol, so it
            can run on its own under uvicorn). It negotiates the OpenMetrics
            format when the scraper asks for it.

        Example::

            app.mount("/metrics", metrics.asgi_app(cq))      # Starlette, FastAPI
            uvicorn.run(metrics.asgi_app(), port=9100)        # a worker's own endpoint
        """

        async def app(
            scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend
        ) -> None:
            if scope["type"] == "lifespan":
                await _lifespan(receive, send)
                return
            if scope["type"] != "http":
                return
            method = scope.get("method")
            if method not in ("GET", "HEAD"):
                allow = [(b"allow", b"GET, HEAD")]
                await _respond(send, 405, b"method not allowed\n", "text/plain", extra=allow)
                return
            if client is not None:
                await self.refresh(client)
            accept = ""
            for header, value in scope.get("headers") or ():
                if header.lower() == b"accept":
                    accept = value.decode("latin-1")
            encoder, content_type = choose_encoder(accept)
            body = encoder(self.registry)
            await _respond(send, 200, body, content_type, head=method == "HEAD")

        return app


async def _respond(
    send: ASGISend,
    status: int,
    body: bytes,
    content_type: str,
    *,
    head: bool = False,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    headers = [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"cache-control", b"no-store"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _lifespan(receive: ASGIReceive, send: ASGISend) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
