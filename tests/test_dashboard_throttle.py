"""Rate limiting of the dashboard's task listings: one query at a time, a short shared cache.

Time comes from a ``FakeClock`` given to the app's ``ListThrottle``, so "within a
refresh interval" is exact. Through the app, a task submitted after a listing
shows whether the next listing ran again or was answered from the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ
from cairnq.dashboard import create_app
from cairnq.dashboard._app import DashboardApp
from cairnq.dashboard._throttle import ListThrottle
from cairnq.testing import FakeClock

from ._db import Database
from .test_dashboard import csrf_from, http, task_ids


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def with_fake_clock(app: DashboardApp) -> FakeClock:
    clock = FakeClock(0)
    app.lists.clock = app.reads.clock = lambda: clock.now_ms() / 1000
    return clock


# --- through the app -------------------------------------------------------------------------


async def test_the_same_listing_within_the_refresh_interval_is_answered_once(
    cq: CairnQ,
) -> None:
    first = await cq.submit("a")
    app = create_app(cq, refresh_ms=2000)
    clock = with_fake_clock(app)
    async with http(app) as client:
        await client.get("/tasks")
        await cq.submit("a")
        clock.advance(1999)
        page = (await client.get("/tasks")).text
    assert task_ids(page) == [first.id]


async def test_the_same_listing_after_the_refresh_interval_runs_again(
    cq: CairnQ,
) -> None:
    await cq.submit("a")
    app = create_app(cq, refresh_ms=2000)
    clock = with_fake_clock(app)
    async with http(app) as client:
        await client.get("/tasks")
        second = await cq.submit("a")
        clock.advance(2000)
        page = (await client.get("/tasks")).text
    assert second.id in task_ids(page)


async def test_a_listing_with_other_filters_is_not_answered_from_another(
    cq: CairnQ,
) -> None:
    await cq.submit("a")
    app = create_app(cq)
    with_fake_clock(app)
    async with http(app) as client:
        await client.get("/tasks")
        other = await cq.submit("b")
        page = (await client.get("/tasks", params={"name": "b"})).text
    assert task_ids(page) == [other.id]


async def test_an_action_makes_the_next_listing_run_again(cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    with_fake_clock(app)
    async with http(app) as client:
        assert task_ids((await client.get("/tasks", params={"status": "queued"})).text)
        confirm = await client.get("/task/cancel", params={"id": task.id})
        await client.post(f"/task/cancel?id={task.id}", data={"csrf": csrf_from(confirm.text)})
        page = (await client.get("/tasks", params={"status": "queued"})).text
    assert task_ids(page) == []


async def test_the_overview_within_the_refresh_interval_is_read_once(cq: CairnQ) -> None:
    await cq.submit("a", queue="first")
    app = create_app(cq, refresh_ms=2000)
    clock = with_fake_clock(app)
    async with http(app) as client:
        await client.get("/")
        await cq.submit("a", queue="second")
        clock.advance(1999)
        cached = (await client.get("/")).text
        clock.advance(1)
        fresh = (await client.get("/")).text
    assert ("second" in cached, "second" in fresh) == (False, True)


# --- the throttle itself ---------------------------------------------------------------------


async def test_only_one_list_query_runs_at_a_time() -> None:
    throttle: ListThrottle[str] = ListThrottle(2000)
    running = 0
    most = 0
    release = asyncio.Event()

    async def load(value: str) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        return value

    queries = [asyncio.create_task(throttle.get(k, lambda k=k: load(k))) for k in "abc"]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*queries) == ["a", "b", "c"]
    assert most == 1


async def test_equal_queries_waiting_together_share_one_load() -> None:
    throttle: ListThrottle[int] = ListThrottle(2000, clock=lambda: 0.0)
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        await asyncio.sleep(0)
        return loads

    answers = await asyncio.gather(*(throttle.get("same", load) for _ in range(5)))
    assert (answers, loads) == ([1] * 5, 1)


async def test_a_query_that_failed_is_not_remembered() -> None:
    throttle: ListThrottle[str] = ListThrottle(2000, clock=lambda: 0.0)

    async def broken() -> str:
        raise RuntimeError("database down")

    async def working() -> str:
        return "page"

    with pytest.raises(RuntimeError):
        await throttle.get("k", broken)
    assert await throttle.get("k", working) == "page"


async def test_the_oldest_answers_are_dropped_beyond_the_entry_limit() -> None:
    throttle: ListThrottle[str] = ListThrottle(2000, clock=lambda: 0.0, max_entries=2)

    async def fresh() -> str:
        return "fresh"

    for key in ("a", "b", "c"):
        await throttle.get(key, lambda key=key: _value(key))
    assert [await throttle.get(k, fresh) for k in ("c", "b", "a")] == ["c", "b", "fresh"]


async def _value(value: str) -> str:
    return value
