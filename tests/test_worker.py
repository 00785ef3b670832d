"""The worker on every backend: handlers, retries, cancel, leases, batches, limits."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    EventLoopBlocked,
    InvalidArgument,
    LostLease,
    TaskContext,
    TaskDef,
    TaskError,
    TaskFailed,
    Worker,
    kernel,
)
from cairnq.models import Lease, worker_of
from cairnq.testing import FakeClock
from cairnq.worker._worker import CLAIM_ERROR_BACKOFF_S

from ._db import Database, admin_connect
from ._waits import ClaimTurns, eventually, results_of


async def settled(cq: CairnQ, task_id: str, timeout_ms: int = 10_000) -> Any:
    return await cq.wait(task_id, timeout_ms=timeout_ms, poll_ms=20, max_poll_ms=50)


# --- handlers and results ---------------------------------------------------------------


async def test_async_handler_result_and_progress_are_stored(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)

    @worker.task
    async def add(ctx: TaskContext, payload: dict[str, int]) -> int:
        await ctx.progress(0.5, "adding")
        return payload["a"] + payload["b"]

    async with db.client() as cq, worker.background():
        task = await cq.submit("add", {"a": 2, "b": 3})
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.result, done.progress, done.message) == (
        "succeeded",
        5,
        1.0,
        "adding",
    )
    assert done.worker_id == worker.worker_id
    assert done.attempt == 1 and done.lease_until_ms is None


async def test_sync_handler_runs_in_a_thread_with_a_blocking_context(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)
    seen: dict[str, Any] = {}

    @worker.task("reports.build")
    def build(ctx: Any, payload: dict[str, str]) -> str:
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        ctx.progress(0.25, "quarter")
        seen["canceled"] = ctx.canceled()
        return payload["month"]

    async with db.client() as cq, worker.background():
        task = await cq.submit("reports.build", {"month": "2026-11"})
        done = await settled(cq, task.id)
    await worker.close()
    assert seen == {"thread": True, "canceled": False}
    assert (done.status, done.result, done.message) == ("succeeded", "2026-11", "quarter")


async def test_handler_with_one_parameter_gets_only_the_context(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)

    @worker.task
    async def echo(ctx: TaskContext) -> Any:
        return ctx.payload

    async with db.client() as cq, worker.background():
        result = await cq.call("echo", ["x", 1], timeout_ms=10_000)
    await worker.close()
    assert result == ["x", 1]


async def test_a_lone_parameter_not_named_for_the_payload_receives_the_context(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=50)

    async def by_task(task):
        return task.payload

    worker.register("by_task", by_task)
    worker.register("by_job", lambda job: job.task_id)
    async with db.client() as cq, worker.background():
        result = await cq.call("by_task", ["x", 1], timeout_ms=10_000)
        submitted = await cq.submit("by_job", {})
        done = await cq.wait(submitted.id, timeout_ms=10_000)
    await worker.close()
    assert result == ["x", 1]
    assert done.result == submitted.id


async def test_task_def_registration_and_call(db: Database) -> None:
    double = TaskDef[int, int]("math.double", queue="math")
    worker = db.worker(queues=["math"], poll_interval_ms=50)

    @worker.task(double)
    async def run(ctx: TaskContext, n: int) -> int:
        return n * 2

    async with db.client() as cq, worker.background():
        assert await cq.call(double, 21, timeout_ms=10_000) == 42
        task = (await cq.list(name="math.double"))[0]
    await worker.close()
    assert task.queue == "math"


async def test_child_tasks_carry_lineage(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50, concurrency=2)

    @worker.task
    async def parent(ctx: TaskContext, payload: Any) -> str:
        child = await ctx.submit("child", {"from": ctx.task_id})
        done = await ctx.wait(child.id, timeout_ms=10_000)
        return str(done.result)

    @worker.task
    async def child(ctx: TaskContext, payload: Any) -> str:
        return "child-ok"

    async with db.client() as cq, worker.background():
        top = await cq.submit("parent", {}, correlation_id="req-7")
        done = await settled(cq, top.id)
        family = await cq.list(root_id=top.id)
    await worker.close()
    assert done.result == "child-ok"
    kid = next(t for t in family if t.name == "child")
    assert (kid.parent_id, kid.root_id, kid.correlation_id) == (top.id, top.id, "req-7")


async def test_unserializable_result_fails_the_task_for_good(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)

    @worker.task
    async def bad(ctx: TaskContext, payload: Any) -> Any:
        return {1, 2}

    async with db.client() as cq, worker.background():
        task = await cq.submit("bad", {}, max_attempts=3)
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "failed" and done.attempt == 1
    assert done.error["code"] == "unserializable_result"


# --- failures and retries ----------------------------------------------------------------


async def test_exception_is_retried_after_backoff_then_succeeds(db: Database) -> None:
    clock = FakeClock()
    worker = db.worker(clock=clock, poll_interval_ms=20)
    calls: list[int] = []

    @worker.task
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("upstream down")
        return "ok"

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("flaky", {})

        async def requeued() -> bool:
            current = await cq.get(task.id)
            return current is not None and current.status == "queued" and current.attempt == 1

        await eventually(requeued)
        waiting = await cq.get(task.id)
        assert waiting is not None and waiting.error is not None
        assert waiting.error["type"] == "ConnectionError"
        assert waiting.error["code"] == "handler_error" and waiting.error["retryable"] is True
        assert 500 <= waiting.run_at_ms - clock.now_ms() < 1000
        assert calls == [1]
        clock.advance(1000)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.result, done.attempt, calls) == ("succeeded", "ok", 2, [1, 2])


async def test_task_error_fails_at_once_with_its_envelope(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)

    @worker.task
    async def charge(ctx: TaskContext, payload: Any) -> None:
        raise TaskError("card declined", code="card_declined", details={"last4": "4242"})

    async with db.client() as cq, worker.background():
        with pytest.raises(TaskFailed) as failure:
            await cq.call("charge", {}, max_attempts=5, timeout_ms=10_000)
    await worker.close()
    assert failure.value.code == "card_declined"
    assert failure.value.message == "card declined"
    assert failure.value.details == {"last4": "4242"}
    assert failure.value.retryable is False


async def test_retryable_task_error_is_retried(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task
    async def again(ctx: TaskContext, payload: Any) -> int:
        if ctx.attempt < 3:
            raise TaskError("not yet", retryable=True)
        return ctx.attempt

    async with db.client() as cq, worker.background():
        assert await cq.call("again", {}, timeout_ms=10_000) == 3


async def test_attempts_run_out_and_the_task_fails(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    runs: list[int] = []

    @worker.task
    async def never(ctx: TaskContext, payload: Any) -> None:
        runs.append(ctx.attempt)
        raise ValueError("nope")

    async with db.client() as cq, worker.background():
        task = await cq.submit("never", {}, max_attempts=2)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.attempt, runs) == ("failed", 2, [1, 2])
    assert done.error["type"] == "ValueError" and "traceback" in done.error["details"]


async def test_ctx_fail_records_a_task_error(db: Database) -> None:
    worker = db.worker(poll_interval_ms=50)

    @worker.task
    async def refuse(ctx: TaskContext, payload: Any) -> str:
        await ctx.fail("bad input", retryable=False)
        return "ignored"

    async with db.client() as cq, worker.background():
        task = await cq.submit("refuse", {})
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "failed" and done.result is None
    assert (done.error["code"], done.error["message"]) == ("task_error", "bad input")


async def test_max_run_ms_abandons_the_attempt_as_handler_timeout(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, max_run_ms=100)

    @worker.task
    async def hang(ctx: TaskContext, payload: Any) -> None:
        await asyncio.sleep(30)

    async with db.client() as cq, worker.background():
        task = await cq.submit("hang", {}, max_attempts=1)
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "failed"
    assert (done.error["code"], done.error["type"]) == ("handler_timeout", "HandlerTimeout")


# --- cancel --------------------------------------------------------------------------------


async def test_cancel_of_a_running_task_is_seen_and_wins(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, lease_ms=600, heartbeat_interval="50ms")
    started = asyncio.Event()

    @worker.task
    async def long(ctx: TaskContext, payload: Any) -> str:
        started.set()
        for _ in range(500):
            if await ctx.canceled():
                return "stopped early"
            await asyncio.sleep(0.01)
        return "finished"

    async with db.client() as cq, worker.background():
        task = await cq.submit("long", {})
        await asyncio.wait_for(started.wait(), 10)
        requested = await cq.cancel(task.id)
        assert requested is not None and requested.status == "running"
        assert requested.cancel_requested
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.result) == ("canceled", None)


async def test_cancel_wins_over_a_retryable_failure(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    started = asyncio.Event()
    release = asyncio.Event()

    @worker.task
    async def boom(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await release.wait()
        raise RuntimeError("after cancel")

    async with db.client() as cq, worker.background():
        task = await cq.submit("boom", {}, max_attempts=5)
        await asyncio.wait_for(started.wait(), 10)
        await cq.cancel(task.id)
        release.set()
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "canceled" and done.attempt == 1
    assert done.error["type"] == "RuntimeError"


# --- leases ------------------------------------------------------------------------------


async def test_an_old_attempt_cannot_be_settled_after_the_same_worker_reclaims(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        backend = cq.backend
        claim = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
        first = (await backend.arun(claim, write=True))[0]
        clock.advance(1001)
        claim = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
        second = (await backend.arun(claim, write=True))[0]
        assert (first["attempt"], second["attempt"]) == (1, 2)
        with pytest.raises(LostLease):
            await backend.arun(kernel.complete(Lease.of(first), "w", '"stale"'), write=True)
        current = await cq.get(task.id)
        assert current is not None and (current.status, current.attempt) == ("running", 2)
        done = await backend.arun(kernel.complete(Lease.of(second), "w", '"fresh"'), write=True)
    assert (done["status"], done["result"]) == ("succeeded", '"fresh"')


async def test_a_batch_renews_and_settles_leases_of_different_claims_but_no_stale_one(
    db: Database,
) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        for _ in range(3):
            await cq.submit("job", {})
        backend = cq.backend

        async def claim_one() -> Lease:
            op = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
            return Lease.of((await backend.arun(op, write=True))[0])

        first, second, third = await claim_one(), await claim_one(), await claim_one()
        beat = await backend.arun(kernel.heartbeat_batch([first, second], "w", 5000), write=True)
        assert beat.renewed == {first.id, second.id}
        clock.advance(1001)
        again = await claim_one()
        assert (again.id, again.attempt) == (third.id, 2)
        leases = [first, second, third]
        beat = await backend.arun(kernel.heartbeat_batch(leases, "w", 5000), write=True)
        assert beat.renewed == {first.id, second.id}
        settle = kernel.complete_many([*leases, again], ['"a"', '"b"', '"stale"', '"c"'], "w")
        settled = await backend.arun(settle, write=True)
        again_done = await cq.get(third.id)
    assert set(settled) == {first.id, second.id, third.id}
    assert again_done is not None and again_done.result == "c"


async def test_a_worker_id_holding_the_claim_separator_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="must not contain '#'"):
            Worker(cq, worker_id="host#1")
        with pytest.raises(InvalidArgument, match="must not contain '#'"):
            await cq.store.claim(queues=["default"], worker_id="host#1")


async def test_a_claim_from_before_a_reset_retry_cannot_settle_the_same_attempt_claimed_again(
    db: Database,
) -> None:
    """Worker id and attempt repeat (attempt 1 ends failed, ``retry(reset_attempt=True)``,
    the same worker claims attempt 1 again): the first claim's nonce does not."""
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {}, max_attempts=1)
        backend = cq.backend

        async def claim() -> Any:
            op = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
            return (await backend.arun(op, write=True))[0]

        first = await claim()
        clock.advance(1001)
        assert [r["status"] for r in await backend.arun(kernel.recover(100), write=True)] == [
            "failed"
        ]
        await cq.retry(task.id, reset_attempt=True)
        second = await claim()
        assert (first["attempt"], worker_of(first["worker_id"])) == (
            second["attempt"],
            worker_of(second["worker_id"]),
        )
        with pytest.raises(LostLease):
            await backend.arun(kernel.complete(Lease.of(first), "w", '"stale"'), write=True)
        current = await cq.get(task.id)
        assert current is not None and (current.status, current.result) == ("running", None)


async def test_expired_lease_is_recovered_and_run_again(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("job", {})
        claim = kernel.claim(["default"], "dead-worker", 1000, [kernel.Draw(None, 1)], 100)
        await cq.backend.arun(claim, write=True)
        clock.advance(1001)
        worker = db.worker(clock=clock, poll_interval_ms=20)

        @worker.task
        async def job(ctx: TaskContext, payload: Any) -> int:
            return ctx.attempt

        async with worker.background():
            done = await settled(cq, task.id)
        await worker.close()
    assert (done.status, done.result, done.worker_id) == ("succeeded", 2, worker.worker_id)


async def test_handler_writes_after_a_lost_lease_raise_without_touching_the_row(
    db: Database,
) -> None:
    clock = FakeClock()
    worker = db.worker(clock=clock, poll_interval_ms=20, lease_ms=1000, heartbeat_interval="50ms")
    started = asyncio.Event()
    proceed = asyncio.Event()
    outcome: dict[str, Any] = {}

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> str:
        started.set()
        await proceed.wait()
        try:
            await ctx.progress(0.9, "late")
        except LostLease:
            outcome["progress"] = "lost"
        outcome["flag"] = ctx.lost_lease
        return "too late"

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("slow", {}, max_attempts=3)
        await asyncio.wait_for(started.wait(), 10)
        clock.advance(60_000)
        other = kernel.claim(["default"], "thief", 30_000, [kernel.Draw(None, 1)], 100)
        stolen = await cq.backend.arun(other, write=True)
        assert [r["id"] for r in stolen] == [task.id]
        proceed.set()

        async def flagged() -> bool:
            return "flag" in outcome

        await eventually(flagged)
        current = await cq.get(task.id)
    await worker.close()
    assert outcome == {"progress": "lost", "flag": True}
    assert current is not None
    assert (current.status, current.worker_id, current.attempt) == ("running", "thief", 2)
    assert current.result is None and current.message is None


async def test_one_heartbeat_statement_per_interval_covers_every_running_task(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = db.worker(
        poll_interval_ms=20, concurrency=5, lease_ms=3000, heartbeat_interval="100ms"
    )
    calls: list[int] = []
    original = kernel.heartbeat_batch

    def counted(leases: Any, worker_id: str, lease_ms: int) -> Any:
        calls.append(len(leases))
        return original(leases, worker_id, lease_ms)

    monkeypatch.setattr(kernel, "heartbeat_batch", counted)
    release = asyncio.Event()
    running = 0

    @worker.task
    async def hold(ctx: TaskContext, payload: Any) -> None:
        nonlocal running
        running += 1
        await release.wait()

    async with db.client() as cq, worker.background():
        tasks = [await cq.submit("hold", {"i": i}) for i in range(5)]

        async def all_running() -> bool:
            return running == 5

        await eventually(all_running)
        first = (await cq.get(tasks[0].id)).lease_until_ms  # type: ignore[union-attr]
        started = time.monotonic()
        await eventually(lambda: sum(c == 5 for c in calls) >= 3, "three heartbeats of all five")
        elapsed = time.monotonic() - started
        later = (await cq.get(tasks[0].id)).lease_until_ms  # type: ignore[union-attr]
        release.set()
        for task in tasks:
            await settled(cq, task.id)
    await worker.close()
    full = [c for c in calls if c == 5]
    assert len(full) >= 3
    assert len(calls) <= elapsed / 0.1 + 3
    assert later > first


async def test_a_worker_woken_by_a_task_queued_in_its_queues_claims_without_probing_first(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL: the queued event is the only wake-up here. On SQLite the file
    # watcher's poke may come first, and a poke says nothing, so a probe follows.
    worker = pg_db.worker(poll_interval_ms=60_000)
    probes = results_of(monkeypatch, "probe")
    probes_when_started: list[list[bool]] = []

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        probes_when_started.append(list(probes))

    async with pg_db.client() as cq, worker.background():

        async def idle() -> bool:
            return probes == [False]

        await eventually(idle)
        task = await cq.submit("job")
        await settled(cq, task.id)
    await worker.close()
    assert probes_when_started == [[False]]


def _refuse_claims(db: Database, refuse: bool) -> None:
    """Add (or drop) a trigger that fails every claim (probes and reads still work)."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(str(db.path), isolation_level=None)) as conn:
            if refuse:
                conn.execute(
                    "create trigger refuse_claims before update of status on cairnq_tasks "
                    "when new.status = 'running' begin select raise(abort, 'claims refused'); end"
                )
            else:
                conn.execute("drop trigger refuse_claims")
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        if refuse:
            conn.execute(
                "create function refuse_claims() returns trigger language plpgsql as "
                "$$ begin raise exception 'claims refused'; end $$"
            )
            conn.execute(
                "create trigger refuse_claims before update of status on cairnq_tasks "
                "for each row when (new.status = 'running') execute function refuse_claims()"
            )
        else:
            conn.execute("drop trigger refuse_claims on cairnq_tasks")
            conn.execute("drop function refuse_claims()")


@contextlib.asynccontextmanager
async def claims_refused(db: Database) -> AsyncIterator[None]:
    """A trigger fails every claim for a while (probes and reads still work).

    The trigger is added and dropped from a thread: its DDL waits for the worker's open
    transactions, which need the event loop to end.
    """
    await asyncio.to_thread(_refuse_claims, db, True)
    try:
        yield
    finally:
        await asyncio.to_thread(_refuse_claims, db, False)


async def test_failed_claims_wait_out_the_backoff_however_often_the_worker_is_woken(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[float] = []
    claims: list[float] = []  # when each claim statement was made
    claim = kernel.claim

    def recorded(*args: Any, **options: Any) -> Any:
        claims.append(time.monotonic())
        return claim(*args, **options)

    monkeypatch.setattr(kernel, "claim", recorded)

    def on_error(exc: BaseException, context: dict[str, Any]) -> None:
        if context.get("phase") == "claim":
            failed.append(time.monotonic())

    worker = db.worker(poll_interval_ms=20, on_error=on_error)
    ran = asyncio.Event()

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        ran.set()

    async def poke_until(done: Any) -> None:
        until = time.monotonic() + 10
        while not done() and time.monotonic() < until:
            worker.client.backend.hub.poke()
            await asyncio.sleep(0.002)

    async with db.client() as cq, worker.background():
        async with claims_refused(db):
            task = await cq.submit("job")
            await poke_until(lambda: failed)
        # Claims are refused no more; the worker is still woken again and again.
        await poke_until(ran.is_set)
        assert (await settled(cq, task.id)).status == "succeeded"
    await worker.close()
    floor = CLAIM_ERROR_BACKOFF_S[0]
    next_claim = min(c for c in claims if c > failed[0])
    gap = next_claim - failed[0]
    assert gap >= floor * 0.99, f"claimed again {gap:.4f} s after a failed claim"


async def test_a_handler_blocking_the_loop_is_reported_as_event_loop_blocked(
    db: Database,
) -> None:
    reported: list[BaseException] = []
    worker = db.worker(
        poll_interval_ms=20,
        heartbeat_interval="50ms",
        on_error=lambda exc, context: reported.append(exc),
    )

    @worker.task
    async def blocker(ctx: TaskContext, payload: Any) -> str:
        time.sleep(0.25)  # blocks the event loop: what this test is about
        return "done"

    def blocked() -> list[EventLoopBlocked]:
        return [e for e in reported if isinstance(e, EventLoopBlocked)]

    async with db.client() as cq, worker.background():
        assert await cq.call("blocker", {}, timeout_ms=10_000) == "done"
        await eventually(blocked, "an EventLoopBlocked report")
    await worker.close()
    assert blocked()[0].gap_ms >= 100


# --- delivery shapes and limits ----------------------------------------------------------


async def test_batch_handler_gets_lists_and_returns_results_by_id(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    sizes: list[int] = []

    @worker.task("embed", batch=4)
    async def embed(contexts: list[TaskContext]) -> dict[str, Any]:
        sizes.append(len(contexts))
        return {c.task_id: c.payload["text"].upper() for c in contexts[:-1]}

    async with db.client() as cq:
        tasks = [await cq.submit("embed", {"text": t}) for t in "abcdefgh"]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert sum(sizes) == 8 and max(sizes) <= 4
    assert sum(t.result is None for t in done) == len(sizes)


async def test_per_name_concurrency_caps_calls_of_that_name(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4)
    active = peak = 0

    @worker.task("gpu.job", concurrency=1)
    async def gpu(ctx: TaskContext, payload: Any) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.03)
        active -= 1

    @worker.task
    async def cheap(ctx: TaskContext, payload: Any) -> None:
        await asyncio.sleep(0.03)

    async with db.client() as cq:
        tasks = [await cq.submit("gpu.job", {}) for _ in range(6)]
        tasks += [await cq.submit("cheap", {}) for _ in range(6)]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert peak == 1


async def test_max_in_flight_bytes_holds_back_claims(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=4, max_in_flight_bytes=10)
    active = peak = 0

    @worker.task
    async def big(ctx: TaskContext, payload: Any) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1

    async with db.client() as cq:
        tasks = [await cq.submit("big", {"blob": "x" * 50}) for _ in range(5)]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert peak == 1


async def test_worker_serves_only_its_queues(db: Database) -> None:
    worker = db.worker(queues=["emails"], poll_interval_ms=20)

    @worker.task
    async def send(ctx: TaskContext, payload: Any) -> str:
        return ctx.queue

    async with db.client() as cq, worker.background():
        mine = await cq.submit("send", {}, queue="emails")
        other = await cq.submit("send", {}, queue="sms")
        done = await settled(cq, mine.id)
        untouched = await cq.get(other.id)
    await worker.close()
    assert done.result == "emails"
    assert untouched is not None and untouched.status == "queued"


async def test_wait_in_the_same_process_is_woken_by_the_settle(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def quick(ctx: TaskContext, payload: Any) -> str:
        return "ok"

    async with db.client() as cq, worker.background():
        task = await cq.submit("quick", {})
        first = await cq.wait(task.id, timeout_ms=3000)
        later = await cq.submit("quick", {})
        done = await cq.wait(later.id, timeout_ms=3000, poll_ms=60_000, max_poll_ms=60_000)
    await worker.close()
    assert done.status == first.status == "succeeded"


# --- registration and lifecycle ---------------------------------------------------------


def test_registration_forms_name_their_tasks(db: Database) -> None:
    worker = db.worker()

    @worker.task
    async def plain(ctx: TaskContext) -> None: ...

    @worker.task("dotted.name")
    async def dotted(ctx: TaskContext) -> None: ...

    @worker.task(TaskDef("from.def"))
    def from_def(ctx: Any) -> None: ...

    worker.register("imperative", lambda ctx: None, batch=2)
    assert worker.registry.names() == ["dotted.name", "from.def", "imperative", "plain"]
    assert worker.registry.get("imperative").batch == 2  # type: ignore[union-attr]
    assert worker.registry.get("from.def").is_async is False  # type: ignore[union-attr]


def test_registering_a_name_twice_is_refused(db: Database) -> None:
    worker = db.worker()
    worker.register("x", lambda ctx: None)
    with pytest.raises(InvalidArgument, match="already registered"):
        worker.register("x", lambda ctx: None)


def test_a_handler_taking_only_the_payload_is_refused_showing_both_forms(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "t.db")

    async def send(payload): ...

    with pytest.raises(InvalidArgument) as refused:
        worker.task("email.send")(send)
    message = str(refused.value)
    assert "'payload'" in message
    assert "async def send(ctx, payload)" in message
    assert "async def send(ctx)" in message
    assert worker.registry.names() == []


@pytest.mark.parametrize("annotation", [dict, "dict[str, Any]", dict[str, Any], int])
def test_a_lone_parameter_annotated_as_no_context_is_refused(
    tmp_path: Path, annotation: Any
) -> None:
    worker = Worker(tmp_path / "t.db")

    async def job(task: Any) -> None: ...

    job.__annotations__["task"] = annotation
    with pytest.raises(InvalidArgument, match="'task', which would receive the task context"):
        worker.register("job", job)


def test_register_refuses_a_lambda_taking_only_the_payload(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "t.db")
    with pytest.raises(InvalidArgument, match=r"\(ctx, payload\)"):
        worker.register("job", lambda payload: payload)


def test_a_handler_with_a_required_keyword_only_ctx_is_refused(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "t.db")

    async def job(payload: Any, *, ctx: TaskContext) -> None: ...

    with pytest.raises(InvalidArgument, match="keyword-only parameters without defaults"):
        worker.register("job", job)


def test_a_handler_without_positional_parameters_is_refused(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "t.db")

    async def job() -> None: ...

    with pytest.raises(InvalidArgument, match="takes no positional parameter"):
        worker.register("job", job)


def test_a_handler_requiring_three_positional_parameters_is_refused(tmp_path: Path) -> None:
    worker = Worker(tmp_path / "t.db")

    async def job(ctx: TaskContext, payload: Any, extra: Any) -> None: ...

    with pytest.raises(InvalidArgument, match="requires 3 positional parameters"):
        worker.register("job", job)


def test_partials_methods_and_callable_objects_are_judged_by_the_parameters_left(
    tmp_path: Path,
) -> None:
    worker = Worker(tmp_path / "t.db")

    async def prefixed(prefix: str, payload: Any) -> None: ...

    class Jobs:
        async def method(self, payload: Any) -> None: ...

        async def __call__(self, payload: Any) -> None: ...

    refused = []
    for name, fn in [
        ("partial", functools.partial(prefixed, "x")),
        ("method", Jobs().method),
        ("object", Jobs()),
    ]:
        with pytest.raises(InvalidArgument, match="'payload', which would receive the task"):
            worker.register(name, fn)
        refused.append(name)
    assert refused == ["partial", "method", "object"]
    assert worker.registry.names() == []


def test_a_lambda_needs_an_explicit_name(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument, match="pass a name"):
        worker.task(lambda ctx: None)


@pytest.mark.parametrize(
    "options",
    [
        {"concurrency": 0},
        {"lease_ms": 5},
        {"heartbeat_interval": "40s"},
        {"queues": []},
        {"queues": "default"},
        {"max_run_ms": 0},
        {"poll_interval_ms": 0},
    ],
)
def test_bad_worker_options_are_rejected(db: Database, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Worker(db.backend(), **options)


async def test_a_worker_without_handlers_claims_nothing_and_says_so(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20)
    async with db.client() as cq:
        task = await cq.submit("job")
        with caplog.at_level("INFO", logger="cairnq"):
            await worker.run(until_idle=True)
        after = await cq.get(task.id)
    await worker.close()
    assert after is not None and after.status == "queued" and after.attempt == 0
    assert any("has no task handlers registered" in m for m in caplog.messages)


async def test_a_worker_without_handlers_idles_in_the_background_until_stopped(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    async with db.client() as cq:
        task = await cq.submit("job")
        async with worker.background():
            await worker.recover_expired()
        after = await cq.get(task.id)
    await worker.close()
    assert after is not None and after.status == "queued" and after.attempt == 0


async def test_stop_drains_in_flight_work_before_returning(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = db.worker(poll_interval_ms=20)
    started = asyncio.Event()
    draining = asyncio.Event()
    drain = Worker._drain

    async def noted(self: Worker, *args: Any) -> None:
        draining.set()
        await drain(self, *args)

    monkeypatch.setattr(Worker, "_drain", noted)

    @worker.task
    async def slow(ctx: TaskContext, payload: Any) -> str:
        started.set()
        await draining.wait()  # still running when the worker, stopped, begins its drain
        return "finished"

    async with db.client() as cq:
        task = await cq.submit("slow", {})
        runner = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        worker.stop()
        await asyncio.wait_for(runner, 10)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and (done.status, done.result) == ("succeeded", "finished")


async def test_until_idle_runs_every_due_task_then_returns_leaving_delayed_ones(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=60_000, concurrency=2)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        await asyncio.sleep(0.01)
        return int(payload["n"])

    async with db.client() as cq:
        due = [await cq.submit("job", {"n": n}) for n in range(5)]
        later = await cq.submit("job", {"n": 9}, delay_ms=3_600_000)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        finished = [await cq.get(task.id) for task in due]
        delayed = await cq.get(later.id)
    await worker.close()
    assert [(t.status, t.result) for t in finished if t is not None] == [
        ("succeeded", n) for n in range(5)
    ]
    assert delayed is not None and delayed.status == "queued"


async def test_until_idle_with_nothing_due_returns_at_once(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=60_000)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        return None

    with caplog.at_level("INFO", logger="cairnq"):
        await asyncio.wait_for(worker.run(until_idle=True), 30)
    await worker.close()
    assert "nothing is due; stopping (until_idle)" in caplog.messages


async def test_drain_timeout_hands_unfinished_tasks_back_with_the_attempt_uncounted(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, drain_timeout="100ms")
    started = asyncio.Event()

    @worker.task
    async def stuck(ctx: TaskContext, payload: Any) -> None:
        started.set()
        await asyncio.sleep(30)

    async with db.client() as cq:
        task = await cq.submit("stuck", {}, max_attempts=3)
        runner = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        worker.stop()
        await asyncio.wait_for(runner, 10)
        released = await cq.get(task.id)
    await worker.close()
    assert released is not None
    assert (released.status, released.attempt, released.worker_id) == ("queued", 0, None)
    assert released.error is None


async def test_claim_batch_caps_the_tasks_taken_per_draw(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits: list[int] = []
    original = kernel.claim

    def recorded(
        queues: Any, worker_id: str, lease_ms: int, draws: Any, *rest: Any, **options: Any
    ) -> Any:
        limits.extend(d.limit for d in draws)
        return original(queues, worker_id, lease_ms, draws, *rest, **options)

    monkeypatch.setattr(kernel, "claim", recorded)
    worker = db.worker(poll_interval_ms=20, concurrency=8, claim_batch=3)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        await asyncio.sleep(0.01)

    async with db.client() as cq:
        tasks = [await cq.submit("job", {}) for _ in range(12)]
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    assert {t.status for t in done} == {"succeeded"}
    assert limits
    assert max(limits) == 3


async def test_a_worker_made_from_a_url_owns_and_closes_its_backend(sqlite_db: Database) -> None:
    worker = Worker(sqlite_db.url, poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "ok"

    async with sqlite_db.client() as cq, worker.background():
        assert await cq.call("job", {}, timeout_ms=10_000) == "ok"
    await worker.close()
    from cairnq import StoreClosed

    with pytest.raises(StoreClosed):
        await worker.client.get_status("task_x")


async def test_a_sync_handler_past_max_run_ms_keeps_its_slot_and_lease_until_it_returns(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    turns = ClaimTurns(monkeypatch)
    worker = db.worker(poll_interval_ms=20, concurrency=1, max_run_ms=100, lease_ms=600)
    release = threading.Event()
    invoked: list[int] = []

    @worker.task
    def work(ctx: Any, payload: Any) -> int:
        invoked.append(payload["n"])
        if payload["n"] == 0:
            release.wait(10)
        return int(payload["n"])

    def past_max_run() -> bool:
        return any("ran past max_run_ms" in m for m in caplog.messages)

    async def lease_until() -> int:
        return (await cq.get(hung.id)).lease_until_ms or 0  # type: ignore[union-attr]

    caplog.set_level("WARNING", logger="cairnq")
    async with db.client() as cq, worker.background():
        hung = await cq.submit("work", {"n": 0}, max_attempts=1)
        second = await cq.submit("work", {"n": 1}, max_attempts=1)
        await eventually(past_max_run, "the max_run_ms warning")
        # Past max_run_ms: the lease is renewed again, and the claim loop turns on
        # without a free slot for the second task.
        abandoned_lease = await lease_until()

        async def renewed() -> bool:
            return await lease_until() > abandoned_lease

        await eventually(renewed, "a lease renewal past max_run_ms")
        await turns.passed(3)
        held = await cq.get(hung.id)
        waiting = await cq.get_status(second.id)
        release.set()
        first = await settled(cq, hung.id)
        done = await settled(cq, second.id)
    await worker.close()
    assert held is not None and (held.status, held.attempt) == ("running", 1)
    assert waiting is not None and waiting.status == "queued"
    assert (first.status, first.error["code"]) == ("failed", "handler_timeout")
    assert (done.status, done.result) == ("succeeded", 1)
    assert invoked == [0, 1]


async def test_a_sync_handler_past_max_run_ms_is_never_run_again_while_its_thread_runs(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    turns = ClaimTurns(monkeypatch)
    caplog.set_level("WARNING", logger="cairnq")
    worker = db.worker(
        poll_interval_ms=20, concurrency=3, lease_ms=30_000, max_run_ms=100, retry_backoff_ms=0
    )
    spans: list[tuple[int, float, float]] = []
    refused: list[bool] = []
    release = threading.Event()

    @worker.task
    def slow(ctx: Any, payload: Any) -> int:
        started = time.monotonic()
        if ctx.attempt == 1:
            release.wait(10)
            try:
                ctx.progress(0.5, "too late")
                refused.append(False)
            except LostLease:
                refused.append(True)
        spans.append((ctx.attempt, started, time.monotonic()))
        return int(ctx.attempt)

    def past_max_run() -> bool:
        return any("ran past max_run_ms" in m for m in caplog.messages)

    async with db.client() as cq, worker.background():
        task = await cq.submit("slow", {}, max_attempts=3)
        await eventually(past_max_run, "the max_run_ms warning")
        # Slots are free: a second run, were the task handed back, would start in these turns.
        await turns.passed(3)
        release.set()
        done = await settled(cq, task.id)
        # both runs' spans, whichever order they ended in
        await eventually(lambda: len(spans) == 2, "both runs' spans")
    await worker.close()
    assert (done.status, done.result, done.attempt) == ("succeeded", 2, 2)
    (_, _, first_end), (_, second_start, _) = sorted(spans)
    assert second_start >= first_end
    assert refused == [True]


async def test_a_raising_on_error_hook_does_not_stop_heartbeats(db: Database) -> None:
    called: list[tuple[str, str]] = []

    def broken(exc: BaseException, context: dict[str, Any]) -> None:
        called.append((context["phase"], type(exc).__name__))
        raise RuntimeError("the hook itself is broken")

    worker = db.worker(
        poll_interval_ms=20,
        lease_ms=600,
        heartbeat_interval="100ms",
        on_error=broken,
        concurrency=2,
    )

    started, release = asyncio.Event(), asyncio.Event()

    @worker.task
    async def blocker(ctx: TaskContext, payload: Any) -> str:
        time.sleep(0.35)  # blocks the event loop: what the hook is told of
        return "blocked"

    @worker.task
    async def steady(ctx: TaskContext, payload: Any) -> str:
        started.set()
        await release.wait()
        return "steady"

    async with db.client() as cq, worker.background():
        long = await cq.submit("steady", {})

        async def lease_until() -> int:
            return (await cq.get(long.id)).lease_until_ms or 0  # type: ignore[union-attr]

        await asyncio.wait_for(started.wait(), 10)
        await cq.call("blocker", {}, timeout_ms=10_000)
        await eventually(lambda: ("heartbeat", "EventLoopBlocked") in called, "the report")
        after_the_hook = await lease_until()

        async def renewed() -> bool:
            return await lease_until() > after_the_hook

        await eventually(renewed, "a lease renewal after the hook raised")
        release.set()
        done = await settled(cq, long.id)
    await worker.close()
    # The blocked loop was reported to the hook, which raised; the heartbeats went on.
    assert ("heartbeat", "EventLoopBlocked") in called
    assert (done.status, done.attempt) == ("succeeded", 1)


async def test_a_lost_lease_in_a_batch_fails_the_rest_of_the_batch_at_once(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, lease_ms=30_000)

    @worker.task("pair", batch=2)
    async def pair(contexts: list[TaskContext]) -> None:
        await contexts[0].fail("first is bad", retryable=False)
        for ctx in contexts:
            await ctx.progress(0.5)

    async with db.client() as cq:
        one_run = {"task": "pair", "max_attempts": 1}
        tasks = await cq.submit_many([one_run, one_run])
        async with worker.background():
            done = [await settled(cq, t.id) for t in tasks]
    await worker.close()
    by_code = sorted((t.error["code"], t.attempt) for t in done)
    assert by_code[0] == ("handler_error", 1)
    assert by_code[1] == ("task_error", 1)


async def test_an_expired_but_unrecovered_lease_is_not_reported_as_held(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await cq.submit("job", {})
        claim = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
        row = (await cq.backend.arun(claim, write=True))[0]
        clock.advance(1001)
        beat = kernel.heartbeat_batch([Lease.of(row)], "w", 1000)
        assert await cq.backend.arun(beat, write=True) == {}


async def test_a_worker_claim_writes_its_id_and_a_nonce_the_task_shows_its_id(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", {})
        claim = kernel.claim(["default"], "w", 1000, [kernel.Draw(None, 1)], 100)
        [row] = await cq.backend.arun(claim, write=True)
        shown = await cq.get(task.id)
    assert row["worker_id"] == f"w#{Lease.of(row).token % 2**64:016x}"
    assert shown is not None and shown.worker_id == "w"


async def test_a_call_just_claimed_starts_before_the_claim_loop_reads_again(db: Database) -> None:
    # With slots still free, the claim loop goes straight on to its next turn; the
    # call it just made must not wait while that turn's statement is prepared.
    async with db.client() as cq:
        await cq.submit("job")
    worker = db.worker(concurrency=4, poll_interval_ms=20)
    backend = worker.client.backend
    order: list[str] = []
    read_again = asyncio.Event()
    arun = backend.arun

    async def recording(op: Any, *, write: bool) -> Any:
        name = str(getattr(op, "__name__", ""))
        order.append(name)
        if name == "probe" and "claim" in order:
            read_again.set()
        return await arun(op, write=write)

    backend.arun = recording  # type: ignore[method-assign]

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        order.append("handler")

    async with worker.background():
        await asyncio.wait_for(read_again.wait(), 10)
    await worker.close()
    claimed = order.index("claim")
    assert order.index("handler") < order.index("probe", claimed), order
