"""A lease recovery due when news of work arrives runs just after the news claim.

A claim woken by a task queued in the worker's queues, or following a claim that
took all it asked for, is one statement: the tasks it claims start first, and the
recovery due meanwhile runs in the same turn of the claim loop, once they have
started, not on the recoverer's timer.

Every wake-up here is the in-process news of a submit: the SQLite file watcher,
which reports commits of other processes without saying what they were, is left
out, so no poke turns a claim into a polling one (which recovers inline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from cairnq import CairnQ, TaskContext, TaskEvent, Worker, kernel
from cairnq.errors import DatabaseBusy, StoreClosed
from cairnq.testing import FakeClock
from cairnq.worker import _claimer
from cairnq.worker._claimer import Claimer

from ._db import Database
from ._waits import eventually, results_of


@pytest.fixture(autouse=True)
def _recovery_due_and_news_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # Any claim finds a recovery due, however recently the last one ran.
    monkeypatch.setattr(_claimer, "CLAIM_RECOVERY_EVERY_S", 0.0)
    monkeypatch.setattr("cairnq.backends.sqlite.watch_database", lambda *args: None)


async def _lease_held_elsewhere(cq: CairnQ, payload: dict[str, Any]) -> str:
    """A task claimed by a worker that will never settle it, with a 1 s lease."""
    task = await cq.submit("job", payload)
    claim = kernel.claim(["default"], "dead-worker", 1000, [kernel.Draw(None, 1)], 100)
    [row] = await cq.backend.arun(claim, write=True)
    assert str(row["id"]) == task.id
    return task.id


def _claim_probes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``probe`` flag of each claim the claim loop makes (False: woken by news)."""
    probes: list[bool] = []
    original = Claimer._claim

    async def recorded(claimer: Claimer, draws: Any, *, probe: bool) -> Any:
        probes.append(probe)
        return await original(claimer, draws, probe=probe)

    monkeypatch.setattr(Claimer, "_claim", recorded)
    return probes


def _recoveries_in_turn(monkeypatch: pytest.MonkeyPatch, worker: Worker) -> list[int | None]:
    """What each recovery the claim loop runs after a claim returned."""
    returned: list[int | None] = []
    recoverer = worker._recoverer
    original = recoverer.recover_in_turn

    async def recorded() -> int | None:
        returned.append(await original())
        return returned[-1]

    monkeypatch.setattr(recoverer, "recover_in_turn", recorded)
    return returned


def _recovering_in_claims_only(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> tuple[Worker, FakeClock]:
    """A worker of 2 slots on a fake clock that recovers only as claims make it: the
    recoverer's timer is an hour away, and so is a recovery due after a claim."""
    monkeypatch.setattr(_claimer, "CLAIM_RECOVERY_EVERY_S", 3600.0)
    clock = FakeClock()
    worker = db.worker(clock=clock, poll_interval_ms=60_000, recovery_interval="1h", concurrency=2)
    return worker, clock


def _before_each_claim(worker: Worker, each: Callable[[int], None]) -> None:
    """Call ``each(n)`` before the worker's ``n``-th claim reaches its backend."""
    backend = worker.client.backend
    arun = backend.arun
    claims = 0

    async def counted(op: Any, *, write: bool) -> Any:
        nonlocal claims
        if getattr(op, "__name__", "") == "claim":
            claims += 1
            each(claims)
        return await arun(op, write=write)

    backend.arun = counted  # type: ignore[method-assign]


def _expiring_job(worker: Worker, clock: FakeClock) -> None:
    """Registers ``job``, whose run with ``n`` 0 lets the lease held elsewhere expire."""

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        if payload["n"] == 0:
            clock.advance(1001)
        return ctx.attempt


def _recover_limits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``recover_limit`` of each ``kernel.claim`` built from here on."""
    limits: list[int] = []
    original_claim = kernel.claim

    def recorded(*args: Any, **kwargs: Any) -> Any:
        limits.append(args[4])
        return original_claim(*args, **kwargs)

    monkeypatch.setattr(kernel, "claim", recorded)
    return limits


async def test_a_claim_woken_by_a_submit_starts_the_task_before_recovering_a_lease_due_then(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    order: list[str] = []

    def on_event(event: TaskEvent) -> None:
        order.append(f"{event.kind} {event.task_id}")

    # The recoverer's timer never fires in this test: its first run is an hour away.
    worker = db.worker(
        clock=clock,
        poll_interval_ms=60_000,
        recovery_interval="1h",
        concurrency=2,
        on_event=on_event,
    )
    backend = worker.client.backend
    arun = backend.arun

    async def recording(op: Any, *, write: bool) -> Any:
        order.append(f"op {getattr(op, '__name__', '')}")
        return await arun(op, write=write)

    backend.arun = recording  # type: ignore[method-assign]
    found = results_of(monkeypatch, "probe")
    claims = _claim_probes(monkeypatch)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        order.append(f"handler {ctx.task_id}")
        return ctx.attempt

    async with db.client(clock=clock) as cq:
        held = await _lease_held_elsewhere(cq, {"n": 0})
        async with worker.background():
            # The polling claim at start found nothing: the lease has not expired yet.
            await eventually(lambda: found == [False], "the first polling claim")
            clock.advance(1001)
            news = await cq.submit("job", {"n": 1})
            done = await cq.wait(news.id, timeout_ms=10_000, poll_ms=20)
            recovered = await cq.wait(held, timeout_ms=10_000, poll_ms=20)
        await worker.close()
    assert claims[:2] == [True, False], claims
    assert (done.status, done.result) == ("succeeded", 1)
    assert (recovered.status, recovered.result, recovered.worker_id) == (
        "succeeded",
        2,
        worker.worker_id,
    )
    news_claim = order.index("op claim")
    started = order.index(f"handler {news.id}")
    recovery = order.index(f"recovered {held}")
    # The news claim is one statement; its task starts, and then the lease is recovered
    # in the same turn, before the loop's next claim.
    assert news_claim < started < recovery, order
    assert "op recover" in order[started:recovery], order
    assert recovery < order.index("op claim", news_claim + 1) < order.index(f"handler {held}")


async def test_until_idle_runs_a_task_the_recovery_after_a_news_claim_put_back(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    events: list[tuple[str, str]] = []
    worker = db.worker(
        clock=clock,
        poll_interval_ms=60_000,
        recovery_interval="1h",
        on_event=lambda event: events.append((event.kind, event.task_id)),
    )
    claims = _claim_probes(monkeypatch)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return ctx.attempt

    async with db.client(clock=clock) as cq:
        held = await _lease_held_elsewhere(cq, {"n": 0})
        clock.advance(1001)
        other: list[str] = []
        original_run = Claimer.run

        async def run_after_news(claimer: Claimer) -> None:
            # News as the claim loop begins: a task of a name this worker does not
            # serve, queued in its queue. The news claim finds nothing to claim.
            other.append((await cq.submit("not_served")).id)
            await original_run(claimer)

        monkeypatch.setattr(Claimer, "run", run_after_news)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        await worker.close()
        recovered = await cq.get(held)
        unserved = await cq.get(other[0])
    assert claims[0] is False, claims
    assert ("recovered", held) in events
    assert recovered is not None
    assert (recovered.status, recovered.result) == ("succeeded", 2)
    assert unserved is not None and unserved.status == "queued"


async def test_a_failed_recovery_after_a_news_claim_is_reported_and_waits_its_turn(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[tuple[BaseException, dict[str, Any]]] = []
    worker = db.worker(recovery_interval="1h", on_error=lambda e, c: reported.append((e, c)))
    recoverer = worker._recoverer

    async def failing(batches: int = 1) -> int:
        raise DatabaseBusy("the write lock stayed taken")

    monkeypatch.setattr(recoverer, "recover", failing)
    before = recoverer.recovered_at
    assert await recoverer.recover_in_turn() is None
    # Reported once, and stamped as the last recovery: the next news claims do not
    # retry it at once (the timer and the polling claims do, when it is due).
    assert [(type(e), c["phase"]) for e, c in reported] == [(DatabaseBusy, "recovery")]
    assert recoverer.recovered_at > before


async def test_a_recovery_after_a_news_claim_on_a_closed_backend_is_left_to_the_claim_loop(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[BaseException] = []
    worker = db.worker(recovery_interval="1h", on_error=lambda e, c: reported.append(e))
    recoverer = worker._recoverer

    async def closed(batches: int = 1) -> int:
        raise StoreClosed("the backend is closed")

    monkeypatch.setattr(recoverer, "recover", closed)
    assert await recoverer.recover_in_turn() is None
    assert reported == []


async def test_a_claim_after_a_claim_that_took_all_it_asked_for_leaves_the_recovery_until_after_it(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    # Only claims recover here: the recoverer's timer is an hour away.
    worker = db.worker(clock=clock, poll_interval_ms=60_000, recovery_interval="1h", concurrency=2)
    after_claims = _recoveries_in_turn(monkeypatch, worker)
    _expiring_job(worker, clock)

    async with db.client(clock=clock) as cq:
        held = await _lease_held_elsewhere(cq, {"n": -1})
        ids = [(await cq.submit("job", {"n": n})).id for n in range(6)]
        recover_limits = _recover_limits(monkeypatch)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        await worker.close()
        recovered = await cq.get(held)
        done = [await cq.get(task_id) for task_id in ids]
    # The first claim polls and recovers in its transaction (nothing had expired yet);
    # each claim after one that took its 2 tasks is a lone statement, the recovery
    # running after it: the expired lease still comes back and runs here.
    assert recover_limits[0] > 0, recover_limits
    assert recover_limits[1:3] == [0, 0], recover_limits
    assert 1 in after_claims, (after_claims, recover_limits)
    assert recovered is not None
    assert (recovered.status, recovered.result) == ("succeeded", 2)
    assert [task.status for task in done if task is not None] == ["succeeded"] * 6


async def test_a_claim_after_a_failed_claim_in_a_backlog_recovers_in_its_transaction(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, clock = _recovering_in_claims_only(db, monkeypatch)

    def fail_the_second(n: int) -> None:
        if n == 2:
            raise DatabaseBusy("the write lock stayed taken")

    _before_each_claim(worker, fail_the_second)
    _expiring_job(worker, clock)

    async with db.client(clock=clock) as cq:
        held = await _lease_held_elsewhere(cq, {"n": -1})
        for n in range(2):
            await cq.submit("job", {"n": n})
        recover_limits = _recover_limits(monkeypatch)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        await worker.close()
        recovered = await cq.get(held)
    # The first claim took both tasks; the second failed; the third took nothing new
    # from the failed one and polls, recovering the expired lease in its transaction.
    assert recover_limits[2] > 0, recover_limits
    assert recovered is not None
    assert (recovered.status, recovered.result) == ("succeeded", 2)


async def test_until_idle_recovers_after_a_claim_in_a_backlog_that_found_nothing(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairnq.encryption import Encrypting

    worker, clock = _recovering_in_claims_only(db, monkeypatch)

    def expire_before_the_second(n: int) -> None:
        if n == 2:
            clock.advance(1001)  # the lease held elsewhere expires now

    _before_each_claim(worker, expire_before_the_second)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> int:
        return ctx.attempt

    async with db.client(clock=clock) as cq:
        held = await _lease_held_elsewhere(cq, {"n": -1})
        # Two tasks the worker cannot read: its first claim takes both (all it asked
        # for) and fails them unrun, so its next claim, a lone statement that recovers
        # nothing, finds the queue empty with no call running.
        key = Encrypting.generate_key()
        async with db.client(clock=clock, codec=Encrypting({"k1": key})) as sealed:
            for n in range(2):
                await sealed.submit("job", {"n": n})
        recover_limits = _recover_limits(monkeypatch)
        await asyncio.wait_for(worker.run(until_idle=True), 30)
        await worker.close()
        recovered = await cq.get(held)
    assert recover_limits[1:2] == [0], recover_limits
    assert recovered is not None
    assert (recovered.status, recovered.result) == ("succeeded", 2)
