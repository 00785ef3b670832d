"""Policies one submit gives its task (``retry``, ``timeout``, ``expires_in``,
``deadline``), on every backend: stored with the task, expiry ending a task that did
not start in time as ``canceled`` with the reason ``expired``, and every bad value
refused with nothing written."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, Retry, TaskContext, kernel
from cairnq.dashboard import create_app
from cairnq.errors import DatabaseError
from cairnq.extensions.policies import _ops
from cairnq.kernel.points import NO_POINTS, ThenWrite
from cairnq.models import Lease
from cairnq.protocol.steps import NOW, Call, Op
from cairnq.testing import FakeClock

from ._db import Database
from ._waits import eventually
from .test_cli import run_on
from .test_dashboard import http


async def settled(cq: CairnQ, task_id: str) -> Any:
    return await cq.wait(task_id, timeout_ms=20_000, poll_ms=20, max_poll_ms=50)


def _marked_long_ago() -> Op[None]:
    yield Call("policies_mark", {"now_ms": NOW, "activation_ms": 0})
    return None


async def in_use(cq: CairnQ) -> None:
    """Mark the policies in use, as a submit long ago would have (no activation wait)."""
    await cq.backend.arun(_marked_long_ago(), write=True)


# --- stored with the task ---------------------------------------------------------------------


async def test_a_submits_policies_are_stored_with_its_task(db: Database) -> None:
    async with db.client() as cq:
        await in_use(cq)
        task = await cq.submit(
            "job",
            retry=Retry(max_attempts=4, backoff="linear", base="2s", no_retry=(KeyError,)),
            timeout="30s",
            expires_in="1h",
        )
        policy = await cq.policies.of(task.id)
    assert task.max_attempts == 4
    assert policy is not None and policy.reason is None
    assert (policy.run_timeout_ms, policy.retry["backoff"], policy.retry["base_ms"]) == (
        30_000,
        "linear",
        2000,
    )
    assert policy.retry["no_retry"] == ["builtins.KeyError"]
    assert policy.expires_at_ms is not None
    assert policy.expires_at_ms - task.created_at_ms == pytest.approx(3_600_000, abs=50)


async def test_a_task_submitted_without_policies_has_none(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        assert await cq.policies.of(task.id) is None


async def test_the_first_submit_with_a_policy_waits_for_every_worker_to_look(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", timeout="1m")
    assert task.run_at_ms - task.created_at_ms >= _ops.ACTIVATION_MS - 5


async def test_enabling_the_policies_ahead_lets_a_later_submits_tasks_start_at_once(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        since = await cq.policies.enable()
        clock.advance(since - clock.now_ms())
        task = await cq.submit("job", timeout="1m")
    assert since - task.created_at_ms <= 0
    assert task.run_at_ms == task.created_at_ms


# --- expiry -----------------------------------------------------------------------------------


async def test_a_task_claimed_after_its_expiry_is_handed_back_and_canceled_as_expired(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        task = await cq.submit("job", expires_in="1s")
        clock.advance(1000)
        claim = kernel.claim(["default"], "w", 30_000, [kernel.Draw(None, 1)], 0)
        rows = await cq.backend.arun(claim, write=True)
        kept = await cq.backend.arun(_ops.claimed(rows, "w", NO_POINTS), write=True)
        after = await cq.get(task.id)
        policy = await cq.policies.of(task.id)
    assert [r["id"] for r in rows] == [task.id] and kept == []
    assert after is not None and (after.status, after.attempt) == ("canceled", 0)
    assert policy is not None and policy.reason == "expired"


async def test_a_task_claimed_before_its_expiry_runs_with_its_policies(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        task = await cq.submit("job", expires_in="1s", timeout="5s")
        clock.advance(999)
        claim = kernel.claim(["default"], "w", 30_000, [kernel.Draw(None, 1)], 0)
        rows = await cq.backend.arun(claim, write=True)
        kept = await cq.backend.arun(_ops.claimed(rows, "w", NO_POINTS), write=True)
    assert [r["id"] for r in kept] == [task.id]
    assert kept[0]["policies"]["run_timeout_ms"] == 5000


async def test_a_queued_task_past_its_expiry_ends_canceled_as_expired_on_a_running_worker(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    ran: list[str] = []

    @worker.task
    async def job(ctx: TaskContext) -> None:
        ran.append(ctx.task_id)

    async with db.client() as cq, worker.background():
        # Due after the activation wait, expired long before: no cairnq worker starts it.
        task = await cq.submit("job", expires_in="100ms")
        done = await settled(cq, task.id)
        policy = await cq.policies.of(task.id)
    await worker.close()
    assert (done.status, done.attempt, ran) == ("canceled", 0, [])
    assert policy is not None and policy.reason == "expired"


async def test_a_deadline_is_an_expiry_at_a_point_in_time(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        at = datetime.datetime.fromtimestamp(clock.now_ms() / 1000 + 60, datetime.timezone.utc)
        task = await cq.submit("job", deadline=at)
        policy = await cq.policies.of(task.id)
    assert policy is not None and policy.expires_at_ms == clock.now_ms() + 60_000


# --- on a running worker ----------------------------------------------------------------------


async def test_a_submits_timeout_fails_a_run_that_takes_longer(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def stuck(ctx: TaskContext) -> None:
        await asyncio.Event().wait()

    async with db.client() as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("stuck", timeout="50ms", max_attempts=1)
            done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.error["code"]) == ("failed", "handler_timeout")
    assert "timeout=50ms" in done.error["message"]


async def test_a_submits_retry_policy_replaces_its_handlers(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task(retry=Retry(base=0))
    async def lookup(ctx: TaskContext) -> None:
        raise KeyError("missing")

    async with db.client() as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("lookup", retry=Retry(max_attempts=5, no_retry=(LookupError,)))
            done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.attempt, done.max_attempts) == ("failed", 1, 5)
    assert done.error["retryable"] is False


# --- bad values refused, nothing written ------------------------------------------------------


def _past() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"retry": {"max_attempts": 2}}, "retry must be a cairnq.Retry"),
        ({"retry": Retry(backoff=lambda a, e: 1)}, "a backoff function cannot be stored"),
        ({"retry": Retry(max_attempts=4), "max_attempts": 2}, "give it once"),
        ({"timeout": "10"}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout must be a duration"),
        ({"expires_in": -1}, "expires_in"),
        ({"expires_in": [1]}, "expires_in must be a duration"),
        ({"deadline": "2030-01-01"}, "deadline must be an aware datetime"),
        ({"deadline": datetime.datetime(2030, 1, 1)}, "naive"),
        ({"deadline": _past()}, "has passed"),
        (
            {"expires_in": "1h", "deadline": datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)},
            "give expires_in or deadline, not both",
        ),
        ({"timeout": "1m", "depends_on": ["task_x"]}, "not taken with depends_on"),
    ],
    ids=lambda v: ",".join(v) if isinstance(v, dict) else "",
)
async def test_a_bad_policy_is_refused_and_nothing_is_written(
    db: Database, options: dict[str, Any], says: str
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=re.escape(says)):
            await cq.submit("job", **options)
        assert await cq.list() == []
        assert await cq.backend.arun(_ops.marked(), write=False) is False


# --- what cairnq's reads show -----------------------------------------------------------------


async def test_the_dashboard_task_page_shows_an_expired_tasks_reason(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        task = await cq.submit("job", expires_in="1s", timeout="30s")
        clock.advance(1000)
        await cq.backend.arun(_ops.sweep(NO_POINTS), write=True)
        async with http(create_app(cq)) as client:
            page = (await client.get("/task", params={"id": task.id})).text
        after = await cq.get(task.id)
    assert after is not None and after.status == "canceled"
    assert re.search(r"<dt>ended by policy</dt><dd[^>]*>expired</dd>", page)
    assert re.search(r"<dt>run timeout</dt><dd[^>]*>30s</dd>", page)


async def test_cairnq_get_shows_a_tasks_policies_and_why_one_ended_it(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        task = await cq.submit("job", expires_in="1s")
        clock.advance(1000)
        await cq.backend.arun(_ops.sweep(NO_POINTS), write=True)
    result = run_on(db, capsys, "get", task.id)
    shown = json.loads(result.out)
    assert (shown["status"], shown["policies"]["reason"]) == ("canceled", "expired")


# --- expiry applies to a task that never started ----------------------------------------------

START = 1_800_000_000_000


async def test_a_task_that_started_before_its_expiry_runs_on_after_sleeping_past_it(
    db: Database,
) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20)
    runs: list[str] = []

    @worker.task
    async def remind(ctx: TaskContext) -> str:
        runs.append("run")
        await ctx.sleep("1h")
        return "woke"

    async def parked() -> Any:
        waits = await cq.events.waits(task.id)
        return bool(waits) and waits[0].state == "waiting"

    async with db.client(clock=clock) as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("remind", expires_in="1s")
            await eventually(parked, "the task parked by its sleep")
            clock.advance(3_600_000)
            done = await settled(cq, task.id)
        policy = await cq.policies.of(task.id)
    await worker.close()
    assert (done.status, done.result, runs) == ("succeeded", "woke", ["run", "run"])
    assert policy is not None and policy.reason is None
    assert policy.started_at_ms == START


async def test_a_retry_after_the_expiry_of_a_task_that_started_still_runs(db: Database) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20, retry_backoff_ms=60_000)
    runs: list[int] = []

    @worker.task
    async def flaky(ctx: TaskContext) -> int:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("again")
        return ctx.attempt

    async def requeued() -> Any:
        found = await cq.get(task.id)
        return found is not None and found.attempt == 1 and found.is_queued

    async with db.client(clock=clock) as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("flaky", expires_in="1s")
            await eventually(requeued, "the first attempt failed and queued again")
            clock.advance(120_000)
            done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.result, runs) == ("succeeded", 2, [1, 2])


async def test_the_sweep_leaves_a_started_task_queued_past_its_expiry(db: Database) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        task = await cq.submit("job", expires_in="1s")
        claim = kernel.claim(["default"], "w", 30_000, [kernel.Draw(None, 1)], 0)
        rows = await cq.backend.arun(claim, write=True)
        kept = await cq.backend.arun(_ops.claimed(rows, "w", NO_POINTS), write=True)
        await cq.backend.arun(kernel.hand_back(Lease.of(kept[0]), "w"), write=True)
        clock.advance(5_000)
        ended = await cq.backend.arun(_ops.sweep(NO_POINTS), write=True)
        after = await cq.get(task.id)
    assert ended == 0
    assert after is not None and after.status == "queued"


# --- the claim hook -----------------------------------------------------------------------------


async def test_a_claim_hook_reads_only_when_no_claimed_task_has_an_unstarted_expiry(
    db: Database,
) -> None:
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await in_use(cq)
        timed = await cq.submit("job", timeout="5s")
        expiring = await cq.submit("job", expires_in="1h")
        claim = kernel.claim(["default"], "w", 30_000, [kernel.Draw(None, 2)], 0)
        rows = await cq.backend.arun(claim, write=True)
        by_id = {str(r["id"]): r for r in rows}
        alone = await cq.backend.arun(
            _ops.claimed_hook([by_id[timed.id]], "w", NO_POINTS), write=False
        )
        both = await cq.backend.arun(_ops.claimed_hook(rows, "w", NO_POINTS), write=False)
        assert isinstance(both, ThenWrite)
        await cq.backend.arun(both.op, write=True)
        again = await cq.backend.arun(_ops.claimed_hook(rows, "w", NO_POINTS), write=False)
    assert isinstance(alone, list) and alone[0]["policies"]["run_timeout_ms"] == 5000
    assert isinstance(again, list) and {str(r["id"]) for r in again} == {timed.id, expiring.id}


async def test_a_claim_whose_policy_lookup_fails_hands_its_tasks_back_unspent(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = db.worker(poll_interval_ms=20, lease_ms=600_000)
    runs: list[int] = []
    real = _ops.claimed_hook
    failed: list[bool] = []

    def flaky(rows: Any, worker_id: str, points: Any) -> Any:
        if not failed:
            failed.append(True)
            raise DatabaseError("the connection was reset")
        return (yield from real(rows, worker_id, points))

    monkeypatch.setattr(_ops, "claimed_hook", flaky)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        runs.append(ctx.attempt)

    async with db.client() as cq:
        await in_use(cq)
        async with worker.background():
            task = await cq.submit("job", timeout="10s")
            done = await settled(cq, task.id)
    await worker.close()
    assert failed == [True]
    assert (done.status, done.attempt, runs) == ("succeeded", 1, [1])


# --- the marker, on PostgreSQL --------------------------------------------------------------------


@pytest.fixture
async def app_conn(pg_db: Database) -> Any:
    """The application's own psycopg connection, pointed at the test schema."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(pg_db.url)
    await conn.execute(f'set search_path to "{pg_db.schema}"')
    await conn.commit()
    yield conn
    await conn.close()


async def test_a_first_policy_submit_in_an_application_transaction_commits_the_marker_first(
    pg_db: Database, app_conn: Any
) -> None:
    clock = FakeClock(START)
    async with pg_db.client(clock=clock) as cq, pg_db.client() as other:
        await other.stats()
        async with app_conn.transaction():
            task = await cq.submit("job", expires_in="1h", conn=app_conn)
            # Visible before the application commits: every worker's look counts from here.
            seen = await other.backend.arun(_ops.marked(), write=False)
            since = await other.backend.arun(_ops.since(), write=False)
    assert seen is True and since == START + _ops.ACTIVATION_MS
    assert task.run_at_ms == since


async def test_a_policy_submit_does_not_wait_for_another_open_transaction_that_made_one(
    pg_db: Database, app_conn: Any
) -> None:
    async with pg_db.client() as cq, pg_db.client() as other:
        await in_use(cq)
        async with app_conn.transaction():
            await cq.submit("job", timeout="5s", conn=app_conn)
            # The application's transaction is still open; a lock on the marker would hold this.
            task = await asyncio.wait_for(other.submit("other", timeout="5s"), 30)
    assert task.status == "queued"
