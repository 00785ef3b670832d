"""The dashboard's part of durable waits: the task page's Waits card, and its Send form,
which delivers an event to the task's parked wait."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.waits import _ops as _waits
from cairnq.models import Lease

from ._db import Database
from .test_dashboard import csrf_from, http


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


async def _parked(cq: CairnQ, key: str) -> str:
    task = await cq.submit("approve")
    rows = await cq.backend.arun(
        kernel.claim(["default"], "w1", 60_000, [kernel.Draw(None, 1)], 10), write=True
    )
    outcome = await cq.backend.arun(
        _waits.event_wait(Lease.of(rows[0]), "w1", f"event:{key}", key, None), write=True
    )
    assert outcome.state == "parked"
    return task.id


async def test_the_send_form_delivers_the_event_to_the_task_s_wait(cq: CairnQ) -> None:
    task_id = await _parked(cq, "refund:42")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task_id})).text
        assert "data-waits" in page and 'action="/events/send"' in page
        response = await client.post(
            "/events/send",
            data={
                "csrf": csrf_from(page),
                "key": "refund:42",
                "task_id": task_id,
                "payload": '{"approved": false}',
            },
        )
        assert (response.status_code, response.headers["location"]) == (303, f"/task?id={task_id}")
        after = (await client.get("/task", params={"id": task_id})).text
    [wait] = await cq.events.waits(task_id)
    assert (wait.state, wait.payload) == ("delivered", {"approved": False})
    assert 'action="/events/send"' not in after


async def test_a_send_with_a_payload_that_is_not_json_is_refused(cq: CairnQ) -> None:
    task_id = await _parked(cq, "k")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task_id})).text
        response = await client.post(
            "/events/send",
            data={"csrf": csrf_from(page), "key": "k", "task_id": task_id, "payload": "{no"},
        )
    assert response.status_code == 400
    assert [w.state for w in await cq.events.waits(task_id)] == ["waiting"]


async def test_a_task_that_never_waited_has_no_waits_card(cq: CairnQ) -> None:
    task = await cq.submit("plain")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "data-waits" not in page
