"""Idempotent sends: ``cq.events.send(key, payload, id=...)``. A second send with the
same id (a sender retrying after a crash or a timeout) writes nothing and returns what
the first did, from the async and the blocking client, ``cairnq send --id`` and the
dashboard's form; bad ids are refused with nothing written."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, SchemaIncomplete, SyncCairnQ, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.waits import _ops
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database
from .test_cli import run_on
from .test_dashboard import csrf_from, http
from .test_without_extensions import migrate_only

START = 1_800_000_000_000
DAY_MS = 24 * 3600 * 1000


async def _park(cq: CairnQ, key: str, worker_id: str = "w1") -> str:
    """Submit a task and park it in a wait on ``key``, as a worker's run would."""
    task = await cq.submit("approve")
    rows = await cq.backend.arun(
        kernel.claim(["default"], worker_id, 60_000, [kernel.Draw(None, 1)], 10), write=True
    )
    lease = Lease.of(rows[0])
    outcome = await cq.backend.arun(
        _ops.event_wait(lease, worker_id, f"event:{key}", key, None), write=True
    )
    assert outcome.state == "parked"
    return task.id


async def test_a_second_send_with_the_same_id_returns_the_first_result_and_keeps_nothing(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await cq.events.send("k", "one", id="send-1")
        again = await cq.events.send("k", "one", id="send-1")
        kept = await cq.events.kept("k")
    assert again == first
    assert [row["seq"] for row in kept] == [first.seq]


async def test_a_retried_send_that_woke_a_waiter_wakes_no_second_waiter(db: Database) -> None:
    async with db.client() as cq:
        oldest = await _park(cq, "approval", "w1")
        other = await _park(cq, "approval", "w2")
        first = await cq.events.send("approval", "yes", id="decision-7")
        again = await cq.events.send("approval", "yes", id="decision-7")
        waits = {t: [w.state for w in await cq.events.waits(t)] for t in (oldest, other)}
        kept = await cq.events.kept("approval")
    assert first.delivered_to == (oldest,) and again == first
    assert waits == {oldest: ["delivered"], other: ["waiting"]}
    assert kept == []


async def test_sends_without_an_id_or_with_different_ids_each_deliver(db: Database) -> None:
    async with db.client() as cq:
        seqs = [
            (await cq.events.send("k", "a")).seq,
            (await cq.events.send("k", "a")).seq,
            (await cq.events.send("k", "a", id="x")).seq,
            (await cq.events.send("k", "a", id="y")).seq,
        ]
        kept = await cq.events.kept("k")
    assert len(set(seqs)) == 4 and len(kept) == 4


async def test_an_id_used_for_another_key_is_refused_with_nothing_written(db: Database) -> None:
    async with db.client() as cq:
        await cq.events.send("k", "a", id="shared")
        with pytest.raises(InvalidArgument, match="used for a send on key 'k'"):
            await cq.events.send("other", "b", id="shared")
        kept = await cq.events.kept("other")
    assert kept == []


async def test_an_id_used_for_another_task_or_fanout_is_refused_with_nothing_written(
    db: Database,
) -> None:
    async with db.client() as cq:
        first = await _park(cq, "k", "w1")
        second = await _park(cq, "k", "w2")
        await cq.events.send("k", "a", task_id=first, id="shared")
        with pytest.raises(InvalidArgument, match="used for a send on key 'k' to task"):
            await cq.events.send("k", "b", task_id=second, id="shared")
        with pytest.raises(InvalidArgument, match="used for a send on key 'k' to task"):
            await cq.events.send("k", "b", to="all", id="shared")
        [wait] = await cq.events.waits(second)
    assert wait.state == "waiting"


@pytest.mark.parametrize(
    "bad",
    ["", 7, "a\x00b", "x" * 1001],
    ids=["empty", "not-text", "nul", "over-1000-bytes"],
)
async def test_a_bad_send_id_is_refused_before_anything_is_written(db: Database, bad: Any) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="send id"):
            await cq.events.send("k", "a", id=bad)
        kept = await cq.events.kept("k")
    assert kept == []


async def test_an_id_is_remembered_for_a_day_when_the_retention_is_shorter(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        first = await cq.events.send("k", "a", id="daily", retention=0)
        clock.advance(DAY_MS - 1)
        within = await cq.events.send("k", "a", id="daily", retention=0)
        clock.advance(1)
        after = await cq.events.send("k", "a", id="daily", retention=0)
    assert within == first
    assert after.seq != first.seq


async def test_an_id_is_remembered_for_the_event_s_retention_when_longer(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        first = await cq.events.send("k", "a", id="weekly", retention="7d")
        clock.advance(7 * DAY_MS - 1)
        within = await cq.events.send("k", "a", id="weekly", retention="7d")
    assert within == first


def test_the_blocking_client_s_send_with_an_id_is_idempotent(db: Database) -> None:
    with db.sync_client() as cq:
        first = cq.events.send("k", {"n": 1}, id="sync-1")
        again = cq.events.send("k", {"n": 1}, id="sync-1")
        kept = cq.events.kept("k")
    assert again == first and len(kept) == 1


def test_cairnq_send_with_an_id_twice_sends_once(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run_on(db, capsys, "send", "k", '"hi"', "--id", "cli-1")
    again = run_on(db, capsys, "send", "k", '"hi"', "--id", "cli-1")
    with SyncCairnQ(db.backend()) as cq:
        kept = cq.events.kept("k")
    assert (first.code, again.code) == (0, 0)
    assert (
        first.out
        == again.out
        == "sent event 1 on k: no task waits; kept for waits that begin later\n"
    )
    assert len(kept) == 1


async def _send_form(client: Any, task_id: str, payload: str) -> dict[str, str]:
    """The task page's Send form for a wait on ``refund:42``, filled, with the id it drew."""
    page = (await client.get("/task", params={"id": task_id})).text
    found = re.search(r'name="send_id" value="([^"]+)"', page)
    assert found is not None
    return {
        "csrf": csrf_from(page),
        "key": "refund:42",
        "task_id": task_id,
        "payload": payload,
        "send_id": found.group(1),
    }


async def test_the_dashboard_form_posted_twice_sends_its_event_once(db: Database) -> None:
    async with db.client() as cq:
        task_id = await _park(cq, "refund:42")
        async with http(create_app(cq)) as client:
            form = await _send_form(client, task_id, '{"approved": true}')
            for _ in range(2):
                response = await client.post("/events/send", data=form)
                assert response.status_code == 303
        [wait] = await cq.events.waits(task_id)
        kept = await cq.events.kept("refund:42")
    assert (wait.state, wait.payload) == ("delivered", {"approved": True})
    assert kept == []


async def test_the_dashboard_form_sends_on_a_database_without_the_send_ids(
    db: Database,
) -> None:
    migrate_only(db, lambda name: name != _ops.SEND_IDS_MIGRATION)
    async with db.client(migrate=False) as cq:
        task_id = await _park(cq, "refund:42")
        async with http(create_app(cq)) as client:
            form = await _send_form(client, task_id, "1")
            response = await client.post("/events/send", data=form)
        [wait] = await cq.events.waits(task_id)
    assert (response.status_code, wait.state, wait.payload) == (303, "delivered", 1)


async def test_a_send_with_an_id_names_the_migration_a_database_lacks(db: Database) -> None:
    migrate_only(db, lambda name: name != _ops.SEND_IDS_MIGRATION)
    async with db.client(migrate=False) as cq:
        with pytest.raises(SchemaIncomplete, match=r"x0025_waits_send_ids\.sql") as caught:
            await cq.events.send("k", "a", id="needs-the-table")
        sent = await cq.events.send("k", "a")
        kept = await cq.events.kept("k")
    assert caught.value.missing == (_ops.SEND_IDS_MIGRATION,)
    assert [row["seq"] for row in kept] == [sent.seq]
