"""cairnq.testing: drain, inline, the assertions, and the pytest plugin's fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from cairnq import CairnQ, Worker
from cairnq.testing import FakeClock, assert_enqueued, assert_not_enqueued, drain, inline


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest) -> str:
    """A fresh database from the plugin's fixtures, on each backend."""
    name = "cairnq_sqlite" if request.param == "sqlite" else "cairnq_postgres"
    return str(request.getfixturevalue(name))


def client_on(url: str, clock: FakeClock | None = None) -> CairnQ:
    if url.startswith("postgresql:") or "dbname=" in url:
        return CairnQ.postgres(url, clock=clock)
    return CairnQ.sqlite(url, clock=clock)


def worker_for(cq: CairnQ) -> Worker:
    worker = Worker(cq, poll_interval_ms=10, retry_backoff_ms=60_000, retry_backoff_max_ms=60_000)

    @worker.task
    def double(ctx: Any, payload: Any) -> Any:
        return {"value": payload["n"] * 2}

    state = {"calls": 0}

    @worker.task
    def flaky(ctx: Any, payload: Any) -> Any:
        state["calls"] += 1
        if state["calls"] == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    return worker


async def test_each_fixture_database_starts_empty_with_the_schema(url: str) -> None:
    async with client_on(url) as cq:
        assert await cq.list() == []
        await cq.submit("left.behind", {})


async def test_drain_runs_every_due_task_until_idle(url: str) -> None:
    async with client_on(url) as cq:
        worker = worker_for(cq)
        tasks = [await cq.submit("double", {"n": n}) for n in range(3)]
        await drain(worker)
        done = [await cq.get(t.id) for t in tasks]
        assert [(t.status, t.result) for t in done if t] == [
            ("succeeded", {"value": 0}),
            ("succeeded", {"value": 2}),
            ("succeeded", {"value": 4}),
        ]


async def test_drain_leaves_a_delayed_task_queued_without_a_clock(url: str) -> None:
    async with client_on(url) as cq:
        task = await cq.submit("double", {"n": 1}, delay_ms=3_600_000)
        await drain(worker_for(cq))
        assert (await cq.get(task.id)).status == "queued"  # type: ignore[union-attr]


async def test_drain_with_a_fake_clock_runs_a_delayed_task_and_a_retry_in_backoff(
    url: str,
) -> None:
    clock = FakeClock()
    async with client_on(url, clock) as cq:
        late = await cq.submit("double", {"n": 5}, delay_ms=3_600_000)
        flaky = await cq.submit("flaky", {})
        await drain(worker_for(cq), clock=clock)
        late_done, flaky_done = await cq.get(late.id), await cq.get(flaky.id)
    assert late_done is not None and late_done.result == {"value": 10}
    assert flaky_done is not None and (flaky_done.status, flaky_done.attempt) == ("succeeded", 2)
    assert clock.now_ms() >= late.run_at_ms


async def test_an_inline_client_returns_the_task_already_run(url: str) -> None:
    async with client_on(url) as cq:
        task = await inline(worker_for(cq)).submit("double", {"n": 21})
    assert (task.status, task.result) == ("succeeded", {"value": 42})


async def test_assert_enqueued_finds_the_task_by_name_payload_and_queue(url: str) -> None:
    async with client_on(url) as cq:
        stored = await cq.submit("email.send", {"to": "ada"}, queue="mail")
        found = await assert_enqueued(cq, "email.send", payload={"to": "ada"}, queue="mail")
    assert found.id == stored.id


async def test_assert_enqueued_fails_naming_what_is_queued_instead(url: str) -> None:
    async with client_on(url) as cq:
        await cq.submit("email.send", {"to": "bob"})
        with pytest.raises(AssertionError, match=r"queued: 'email.send' on 'default' payload"):
            await assert_enqueued(cq, "email.send", payload={"to": "ada"})


async def test_assert_not_enqueued_fails_when_a_matching_task_is_queued(url: str) -> None:
    async with client_on(url) as cq:
        await assert_not_enqueued(cq, "email.send")
        await cq.submit("email.send", {"to": "ada"})
        with pytest.raises(AssertionError, match=r"expected no queued task 'email\.send'"):
            await assert_not_enqueued(cq, "email.send")
