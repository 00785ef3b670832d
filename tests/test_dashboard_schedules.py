"""The dashboard's schedule pages over HTTP: listing, one schedule's slots, pause and resume.

Slots come due on a ``FakeClock`` the backend reads; ``cq.schedules.run_due`` decides them
as a worker would. Pause and resume go through the same origin, CSRF and
read-only checks as every other action.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ
from cairnq.dashboard import create_app
from cairnq.extensions.presence._component import Presence
from cairnq.testing import FakeClock

from ._db import Database
from .test_dashboard import csrf_from, http
from .test_presence import refused, settle
from .test_without_extensions import protocol_only

START = 1_800_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + 1)


@pytest.fixture
async def cq(db: Database, clock: FakeClock) -> AsyncIterator[CairnQ]:
    async with db.client(clock=clock) as client:
        yield client


def row(page: str, name: str) -> str:
    found = re.search(rf'<tr data-schedule="{re.escape(name)}">(.*?)</tr>', page)
    assert found, f"no row for schedule {name!r}"
    return found.group(1)


async def paused(cq: CairnQ, name: str) -> bool:
    stored = await cq.schedules.get(name)
    assert stored is not None
    return stored.paused


# --- pages -----------------------------------------------------------------------------------


async def test_every_page_links_to_the_schedules_page(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    assert '<a href="/schedules">Schedules</a>' in page


async def test_the_schedules_page_lists_each_schedule_with_its_timing_and_state(
    cq: CairnQ,
) -> None:
    await cq.schedules.add("tick", "job", every="10s", queue="mail")
    await cq.schedules.add("nightly", "report", cron="0 2 * * *", tz="Europe/Paris", paused=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedules")).text
    tick, nightly = row(page, "tick"), row(page, "nightly")
    assert "every 10s" in tick and ">mail</a>" in tick and "active" in tick
    assert "0 2 * * * (Europe/Paris)" in nightly and "paused" in nightly


async def test_the_schedules_page_shows_the_last_slots_decision_and_its_tasks_status(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    clock.advance(10_000)
    assert await cq.schedules.run_due() == 1
    [task] = await cq.list(name="job")
    async with http(create_app(cq)) as client:
        tick = row((await client.get("/schedules")).text, "tick")
    assert 'data-outcome="enqueued"' in tick
    assert f'href="/task?id={task.id}"' in tick
    assert "s-queued" in tick


async def test_a_schedules_page_lists_its_slots_each_linking_to_its_task(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.schedules.add("tick", "job", every="10s", catch_up="30s")
    clock.advance(100_000)
    assert await cq.schedules.run_due() == 3
    tasks = await cq.list(name="job")
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedule", params={"name": "tick"})).text
    slots = re.findall(r'<tr data-slot="(\d+)">(.*?)</tr>', page)
    assert [int(s) for s, _ in slots] == [
        START + 100_000,
        START + 90_000,
        START + 80_000,
        START + 10_000,
    ]
    for task in tasks:
        assert f'href="/task?id={task.id}"' in page
    missed = slots[-1][1]
    assert 'data-outcome="missed"' in missed and "7 slots" in missed


async def test_an_unknown_schedule_is_not_found(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        response = await client.get("/schedule", params={"name": "nope"})
    assert response.status_code == 404
    assert "No schedule is named &#x27;nope&#x27;" in response.text


async def test_without_the_schedules_tables_the_page_says_so_in_one_line(db: Database) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        await cq.submit("a")
        async with http(create_app(cq)) as client:
            page = await client.get("/schedules")
            overview = await client.get("/")
    assert page.status_code == 200
    [line] = re.findall(r"<p class=\"empty\" data-schedules-missing>(.*?)</p>", page.text)
    assert "x0005_schedules.sql" in line and "cairnq migrate" in line
    assert overview.status_code == 200


# --- pause and resume ------------------------------------------------------------------------


async def test_pause_then_resume_from_the_schedules_page(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedule", params={"name": "tick"})).text
        pause = await client.post("/schedule/pause", data={"csrf": csrf_from(page), "name": "tick"})
        assert pause.status_code == 303
        assert pause.headers["location"] == "/schedule?name=tick&done=paused"
        assert await paused(cq, "tick")
        after = (await client.get(pause.headers["location"])).text
        assert "Schedule paused" in after and 'action="/schedule/resume"' in after
        resume = await client.post(
            "/schedule/resume", data={"csrf": csrf_from(after), "name": "tick"}
        )
    assert resume.headers["location"] == "/schedule?name=tick&done=resumed"
    assert not await paused(cq, "tick")


async def test_pausing_an_unknown_schedule_is_not_found(cq: CairnQ) -> None:
    app = create_app(cq)
    async with http(app) as client:
        response = await client.post(
            "/schedule/pause", data={"csrf": app.csrf_token(), "name": "nope"}
        )
    assert response.status_code == 404


async def test_a_pause_without_a_csrf_token_is_refused(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    async with http(create_app(cq)) as client:
        response = await client.post("/schedule/pause", data={"name": "tick"})
    assert response.status_code == 403
    assert not await paused(cq, "tick")


async def test_a_cross_site_pause_is_refused(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    app = create_app(cq)
    async with http(app) as client:
        response = await client.post(
            "/schedule/pause",
            data={"csrf": app.csrf_token(), "name": "tick"},
            headers={"Origin": "https://evil.example"},
        )
    assert response.status_code == 403
    assert not await paused(cq, "tick")


async def test_a_get_of_a_pause_address_changes_nothing(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    app = create_app(cq)
    async with http(app) as client:
        await client.get("/schedule/pause", params={"name": "tick", "csrf": app.csrf_token()})
    assert not await paused(cq, "tick")


async def test_read_only_hides_and_refuses_pause_and_resume(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10s")
    await cq.schedules.add("halted", "job", every="10s", paused=True)
    app = create_app(cq, read_only=True)
    async with http(app) as client:
        pages = [
            (await client.get("/schedules")).text,
            (await client.get("/schedule", params={"name": "tick"})).text,
            (await client.get("/schedule", params={"name": "halted"})).text,
        ]
        pause = await client.post(
            "/schedule/pause", data={"csrf": app.csrf_token(), "name": "tick"}
        )
        resume = await client.post(
            "/schedule/resume", data={"csrf": app.csrf_token(), "name": "halted"}
        )
    for page in pages:
        assert "/schedule/pause" not in page and "/schedule/resume" not in page
    assert (pause.status_code, resume.status_code) == (403, 403)
    assert (await paused(cq, "tick"), await paused(cq, "halted")) == (False, True)


async def test_a_cron_schedules_next_run_shows_in_its_own_zone(cq: CairnQ) -> None:
    await cq.schedules.add("nightly", "report", cron="0 2 * * *", tz="Europe/Paris")
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedules")).text
    assert re.search(r"\d{4}-\d\d-\d\d 02:00:00\+0[12]:00 Europe/Paris", row(page, "nightly"))


async def test_the_schedules_page_says_no_worker_is_running_when_none_is(cq: CairnQ) -> None:
    await cq.schedules.add("tick", "job", every="10m")
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedules")).text
    assert "No cairnq worker is running" in page
    assert "no worker running" in row(page, "tick")


async def test_the_schedules_page_says_nothing_of_workers_while_one_is_alive(
    db: Database, cq: CairnQ, clock: FakeClock
) -> None:
    await cq.schedules.add("tick", "job", every="10m")
    presence = Presence(db.backend(clock=clock), "w-alive", ["default"], 1, refused)
    presence.start()
    await settle(presence)
    async with http(create_app(cq)) as client:
        page = (await client.get("/schedules")).text
    await presence.stop()
    assert "No cairnq worker is running" not in page
    assert "no worker running" not in row(page, "tick")
