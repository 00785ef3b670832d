"""The dashboard's flow control: pause and resume buttons on the queues, snoozes on a task."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.snooze import _ops as _snooze
from cairnq.models import Lease

from ._db import Database
from .test_dashboard import csrf_from, http


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def _row(page: str, queue: str) -> str:
    match = re.search(rf'<tr><th scope="row"><a[^>]*>{queue}</a></th>(.*?)</tr>', page)
    assert match is not None, f"no row for queue {queue}"
    return match.group(1)


async def test_the_pause_button_pauses_the_queue_and_the_row_then_offers_resume(
    cq: CairnQ,
) -> None:
    await cq.submit("a", queue="emails")
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
        assert 'action="/queue/pause"' in _row(page, "emails")
        response = await client.post(
            "/queue/pause", data={"csrf": csrf_from(page), "queue": "emails"}
        )
        assert (response.status_code, response.headers["location"]) == (303, "/")
        paused = await cq.pauses.list()
        assert [(p.target, p.paused_by) for p in paused] == [("emails", "dashboard")]
        row = _row((await client.get("/")).text, "emails")
        assert "paused</span>" in row and 'action="/queue/resume"' in row
        await client.post("/queue/resume", data={"csrf": csrf_from(page), "queue": "emails"})
    assert await cq.pauses.list() == []


async def test_a_pause_without_a_csrf_token_is_refused_and_pauses_nothing(cq: CairnQ) -> None:
    await cq.submit("a", queue="emails")
    async with http(create_app(cq)) as client:
        response = await client.post("/queue/pause", data={"queue": "emails"})
    assert response.status_code == 403
    assert await cq.pauses.list() == []


async def test_a_read_only_dashboard_shows_a_paused_queue_but_no_buttons_and_refuses_a_pause(
    cq: CairnQ,
) -> None:
    await cq.submit("a", queue="emails")
    await cq.pauses.pause_queue("emails")
    app = create_app(cq, read_only=True)
    async with http(app) as client:
        row = _row((await client.get("/")).text, "emails")
        response = await client.post(
            "/queue/resume", data={"csrf": app.csrf_token(), "queue": "emails"}
        )
    assert "paused</span>" in row and "<form" not in row
    assert response.status_code == 403
    assert [p.target for p in await cq.pauses.list()] == ["emails"]


async def test_a_paused_queue_holding_no_task_is_listed_below_the_queues_with_a_resume_button(
    cq: CairnQ,
) -> None:
    await cq.submit("a", queue="emails")
    await cq.pauses.pause_queue("emials")
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    match = re.search(r'<p class="muted small paused-empty">(.*?)</p>', page, re.S)
    assert match is not None
    assert '<span class="mono">emials</span>' in match.group(1)
    assert 'action="/queue/resume"' in match.group(1) and "emails" not in match.group(1)


async def test_a_timed_pause_shows_when_it_ends_on_the_queue_row(cq: CairnQ) -> None:
    await cq.submit("a", queue="emails")
    pause = await cq.pauses.pause_queue("emails", until="10m")
    assert pause.resume_at_ms is not None
    async with http(create_app(cq)) as client:
        row = _row((await client.get("/")).text, "emails")
    assert "paused</span>" in row
    assert re.search(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.0-9]*Z \(in (9m\d\ds|10m00s)\)", row)


async def test_the_task_page_shows_how_often_a_task_snoozed(cq: CairnQ) -> None:
    task = await cq.submit("a")
    rows = await cq.backend.arun(
        kernel.claim(["default"], "w1", 60_000, [kernel.Draw(["a"], 1)], 10), write=True
    )
    op = _snooze.snooze(
        Lease.of(rows[0]),
        "w1",
        90_000,
        max_snoozes=20,
        limit_error=lambda count: "{}",
    )
    await cq.backend.arun(op, write=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert re.search(r"<dt>snoozed</dt><dd[^>]*>1 time \(no attempt spent\) · last for 1m30s", page)
