"""Prometheus metrics: what a scrape shows after real work on a real database."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairnq import InvalidArgument, TaskContext, TaskError, kernel
from cairnq.telemetry.metrics import CONTENT_TYPE, Metrics
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import eventually

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, keyed by (sample name, labels)."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found: Samples, sample: str, **labels: str) -> float | None:
    return found.get((sample, frozenset(labels.items())))


async def scrape(app: Any, accept: str | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    headers = {"accept": accept} if accept else {}
    async with httpx.AsyncClient(transport=transport, base_url="http://cairnq") as http:
        return await http.get("/metrics", headers=headers)


async def run_workload(db: Database, metrics: Metrics) -> Samples:
    """Three successes, one failure, one retry then success, one cancel while running."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, retry_backoff_max_ms=0)
    metrics.instrument(worker)
    running = asyncio.Event()

    @worker.task
    async def ok(ctx: TaskContext, payload: Any) -> str:
        return "done"

    @worker.task
    async def bad(ctx: TaskContext, payload: Any) -> None:
        raise TaskError("refused", code="refused")

    @worker.task
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        if ctx.attempt == 1:
            raise ConnectionError("try again")
        return "second time"

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> None:
        running.set()
        while not await ctx.canceled():
            await asyncio.sleep(0.01)

    async with db.client() as cq, worker.background():
        metrics.instrument(cq)
        tasks = [await cq.submit(name, {}) for name in ("ok", "ok", "ok", "bad", "flaky")]
        canceled = await cq.submit("slow", {})
        await asyncio.wait_for(running.wait(), 10)
        await cq.cancel(canceled.id)
        for task in [*tasks, canceled]:
            await cq.wait(task.id, timeout_ms=10_000)
        app = metrics.asgi_app(cq)

        async def all_six_ends_counted() -> httpx.Response | None:
            # A wait returns at the settlement's commit; the worker counts the end just after.
            response = await scrape(app)
            found = samples(response.text)
            ends = sum(
                count
                for (sample, _), count in found.items()
                if sample
                in (
                    "cairnq_tasks_succeeded_total",
                    "cairnq_tasks_failed_total",
                    "cairnq_tasks_canceled_total",
                )
            )
            return response if ends >= 6 else None

        response = await eventually(all_six_ends_counted, "the worker counting all six ends")
    await worker.close()
    assert response.status_code == 200
    return samples(response.text)


async def test_scrape_counts_submits_and_outcomes_by_queue_and_name(db: Database) -> None:
    found = await run_workload(db, Metrics())
    counted = {
        (metric, name): value(found, f"cairnq_tasks_{metric}_total", queue="default", name=name)
        for metric, name in [
            ("submitted", "ok"),
            ("submitted", "slow"),
            ("succeeded", "ok"),
            ("succeeded", "flaky"),
            ("failed", "bad"),
            ("retried", "flaky"),
            ("canceled", "slow"),
        ]
    }
    assert counted == {
        ("submitted", "ok"): 3.0,
        ("submitted", "slow"): 1.0,
        ("succeeded", "ok"): 3.0,
        ("succeeded", "flaky"): 1.0,
        ("failed", "bad"): 1.0,
        ("retried", "flaky"): 1.0,
        ("canceled", "slow"): 1.0,
    }
    assert value(found, "cairnq_tasks_failed_total", queue="default", name="flaky") is None


async def test_scrape_reads_tasks_per_status_from_the_database(db: Database) -> None:
    found = await run_workload(db, Metrics())
    by_status = {
        status: value(found, "cairnq_tasks", queue="default", status=status)
        for status in ("queued", "running", "succeeded", "failed", "canceled")
    }
    assert by_status == {
        "queued": 0.0,
        "running": 0.0,
        "succeeded": 4.0,
        "failed": 1.0,
        "canceled": 1.0,
    }
    assert value(found, "cairnq_queue_oldest_queued_age_seconds", queue="default") == 0.0


async def test_scrape_histograms_count_every_attempt(db: Database) -> None:
    found = await run_workload(db, Metrics())
    run_counts = {
        name: value(found, "cairnq_task_run_seconds_count", queue="default", name=name)
        for name in ("ok", "bad", "flaky", "slow")
    }
    claim_counts = {
        name: value(found, "cairnq_task_claim_latency_seconds_count", queue="default", name=name)
        for name in ("ok", "bad", "flaky", "slow")
    }
    assert run_counts == {"ok": 3.0, "bad": 1.0, "flaky": 2.0, "slow": 1.0}
    assert claim_counts == {"ok": 3.0, "bad": 1.0, "flaky": 2.0, "slow": 1.0}
    inf = value(found, "cairnq_task_run_seconds_bucket", queue="default", name="ok", le="+Inf")
    assert inf == 3.0


async def test_a_reused_key_is_not_counted_as_submitted(db: Database) -> None:
    metrics = Metrics()
    async with db.client() as cq:
        metrics.instrument(cq)
        first = await cq.submit("job", {}, key="once")
        again = await cq.submit("job", {}, key="once")
        await cq.submit_many([("job", {}), {"task": "job", "key": "once"}])
    found = samples(metrics.exposition().decode())
    assert again.id == first.id
    assert value(found, "cairnq_tasks_submitted_total", queue="default", name="job") == 2.0


async def test_oldest_queued_age_is_the_wait_of_the_oldest_due_task(db: Database) -> None:
    clock = FakeClock()
    metrics = Metrics()
    async with db.client(clock=clock) as cq:
        await cq.submit("job", {}, queue="backlog")
        clock.advance(2_000)
        await cq.submit("job", {}, queue="backlog")
        await cq.submit("job", {}, queue="backlog", delay_ms=60_000)
        clock.advance(3_000)
        found = samples((await scrape(metrics.asgi_app(cq))).text)
    assert value(found, "cairnq_queue_oldest_queued_age_seconds", queue="backlog") == 5.0
    assert value(found, "cairnq_tasks", queue="backlog", status="queued") == 3.0


async def test_the_due_backlog_gauge_counts_the_queued_tasks_whose_time_has_come(
    db: Database,
) -> None:
    metrics = Metrics()
    async with db.client() as cq:
        await cq.submit("job", {}, queue="backlog")
        await cq.submit("job", {}, queue="backlog")
        await cq.submit("job", {}, queue="backlog", delay_ms=60_000)
        await cq.submit("job", {}, queue="later", delay_ms=60_000)
        found = samples((await scrape(metrics.asgi_app(cq))).text)
    assert value(found, "cairnq_queue_due_tasks", queue="backlog") == 2.0
    assert value(found, "cairnq_queue_due_tasks", queue="later") == 0.0


async def test_lease_recoveries_are_counted_by_outcome(db: Database) -> None:
    clock = FakeClock()
    metrics = Metrics()
    async with db.client(clock=clock) as cq:
        await cq.submit("job", {}, max_attempts=2)
        await cq.submit("job", {}, max_attempts=1)
        claim = kernel.claim(["default"], "crashed", 1000, [kernel.Draw(None, 2)], 100)
        await cq.backend.arun(claim, write=True)
        clock.advance(1001)
        worker = db.worker(clock=clock, queues=["elsewhere"])

        @worker.task
        async def noop(ctx: TaskContext) -> None: ...

        metrics.instrument(worker)
        assert await worker.recover_expired() == 2
        await worker.close()
    found = samples(metrics.exposition().decode())
    recoveries = {
        outcome: value(
            found, "cairnq_lease_recoveries_total", queue="default", name="job", outcome=outcome
        )
        for outcome in ("queued", "failed")
    }
    assert recoveries == {"queued": 1.0, "failed": 1.0}


async def test_claim_latency_measures_from_due_to_claim(db: Database) -> None:
    clock = FakeClock()
    metrics = Metrics()
    worker = db.worker(clock=clock, poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext) -> None: ...

    metrics.instrument(worker)
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        clock.advance(1_500)
        async with worker.background():
            await cq.wait(task.id, timeout_ms=10_000)
    await worker.close()
    found = samples(metrics.exposition().decode())
    labels = {"queue": "default", "name": "job"}
    assert value(found, "cairnq_task_claim_latency_seconds_sum", **labels) == 1.5
    assert value(found, "cairnq_task_claim_latency_seconds_bucket", le="1.0", **labels) == 0.0
    assert value(found, "cairnq_task_claim_latency_seconds_bucket", le="2.5", **labels) == 1.0


async def test_detached_metrics_stop_counting(db: Database) -> None:
    metrics = Metrics()
    async with db.client() as cq:
        detach = metrics.instrument(cq)
        await cq.submit("job", {})
        detach()
        await cq.submit("job", {})
    found = samples(metrics.exposition().decode())
    assert value(found, "cairnq_tasks_submitted_total", queue="default", name="job") == 1.0


async def test_instrumenting_twice_counts_once(db: Database) -> None:
    metrics = Metrics()
    async with db.client() as cq:
        metrics.instrument(cq)
        metrics.instrument(cq)
        await cq.submit("job", {})
    found = samples(metrics.exposition().decode())
    assert value(found, "cairnq_tasks_submitted_total", queue="default", name="job") == 1.0


async def test_a_failed_database_read_is_counted_and_drops_the_database_gauges(
    db: Database,
) -> None:
    metrics = Metrics()
    async with db.client() as cq:
        await cq.submit("job", {})
        metrics.update_queues(await cq.overview())
    closed = db.client()
    await closed.open()
    await closed.close()
    response = await scrape(metrics.asgi_app(closed))
    found = samples(response.text)
    assert response.status_code == 200
    assert value(found, "cairnq_metrics_database_errors_total") == 1.0
    assert not any(name == "cairnq_tasks" for name, _ in found)


async def test_the_endpoint_serves_openmetrics_when_asked() -> None:
    response = await scrape(Metrics().asgi_app(), accept="application/openmetrics-text")
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")


async def test_the_endpoint_serves_text_format_by_default() -> None:
    response = await scrape(Metrics().asgi_app())
    assert response.headers["content-type"] == CONTENT_TYPE


async def test_the_endpoint_refuses_other_methods() -> None:
    transport = httpx.ASGITransport(app=Metrics().asgi_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://cairnq") as http:
        response = await http.post("/metrics")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


def test_instrument_refuses_what_is_not_a_client_or_worker() -> None:
    with pytest.raises(InvalidArgument, match="CairnQ, SyncCairnQ or Worker"):
        Metrics().instrument(object())  # type: ignore[arg-type]


def test_a_sync_client_counts_its_submits(db: Database) -> None:
    metrics = Metrics()
    with db.sync_client() as cq:
        metrics.instrument(cq)
        cq.submit("job", {}, queue="sync")
        metrics.update_queues(cq.overview())
    found = samples(metrics.exposition().decode())
    assert value(found, "cairnq_tasks_submitted_total", queue="sync", name="job") == 1.0
    assert value(found, "cairnq_tasks", queue="sync", status="queued") == 1.0


# --- on the dashboard ------------------------------------------------------------------------


async def dashboard_scrape(app: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get("/metrics", headers=headers or {})


async def test_the_dashboard_serves_the_database_gauges_at_metrics(db: Database) -> None:
    from cairnq.dashboard import create_app

    async with db.client() as cq:
        await cq.submit("ok", {}, queue="mail")
        await cq.submit("ok", {}, queue="mail")
        response = await dashboard_scrape(create_app(cq))
    assert response.status_code == 200
    assert value(samples(response.text), "cairnq_tasks", queue="mail", status="queued") == 2.0


async def test_the_dashboard_serves_the_counters_of_a_metrics_it_is_given(db: Database) -> None:
    from cairnq.dashboard import create_app

    metrics = Metrics()
    async with db.client() as cq:
        metrics.instrument(cq)
        await cq.submit("ok", {})
        response = await dashboard_scrape(create_app(cq, metrics=metrics))
    found = samples(response.text)
    assert value(found, "cairnq_tasks_submitted_total", queue="default", name="ok") == 1.0


async def test_the_dashboard_metrics_need_the_token_when_one_is_set(db: Database) -> None:
    from cairnq.dashboard import create_app

    async with db.client() as cq:
        app = create_app(cq, token="scrape-token-1")
        refused = await dashboard_scrape(app)
        allowed = await dashboard_scrape(app, {"authorization": "Bearer scrape-token-1"})
    assert (refused.status_code, allowed.status_code) == (401, 200)


async def test_the_dashboard_serves_no_metrics_when_told_not_to(db: Database) -> None:
    from cairnq.dashboard import create_app

    async with db.client() as cq:
        response = await dashboard_scrape(create_app(cq, metrics=False))
    assert response.status_code == 404


def test_the_dashboard_refuses_a_metrics_option_of_the_wrong_kind(db: Database) -> None:
    from cairnq.dashboard import create_app

    with pytest.raises(InvalidArgument, match="metrics must be"):
        create_app(db.url, metrics="yes")  # type: ignore[arg-type]
