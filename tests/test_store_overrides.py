"""The store layer as the reference SDK's users and tests rely on it: its modules, the submit
hooks its ``submit`` runs, the retention sweeper over a store, and a store method replaced
on an instance (or overridden by a subclass) called by the client, the worker, ``wait`` and
the sweeper where the reference calls it. One test per method per caller.
"""

from __future__ import annotations

import asyncio
import importlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from cairnq import CairnQ, Limit, LostLease, Retention, Task, TaskStore, kernel
from cairnq.extensions import History, Limits
from cairnq.hooks import PendingSubmit
from cairnq.kernel.retention import RetentionSweeper, SyncRetentionSweeper
from cairnq.models import Lease
from cairnq.store import ClaimDraw, replaced
from cairnq.testing import FakeClock
from cairnq.worker import Worker
from cairnq.worker._settling import Settler

from ._db import Database
from .test_tracing import Traces

START_MS = 1_800_000_000_000
DAY_MS = 86_400_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
async def cq(db: Database, clock: FakeClock) -> AsyncIterator[CairnQ]:
    async with db.client(clock=clock) as client:
        yield client


@pytest.fixture
def traces() -> Iterator[Traces]:
    traces = Traces()
    yield traces
    traces.provider.shutdown()


class Calls:
    """Records each call of a replaced store method, then runs the store's own."""

    def __init__(self, store: TaskStore, name: str) -> None:
        self.name = name
        self.args: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        own = getattr(store, name)

        async def replacement(*args: Any, **kwargs: Any) -> Any:
            self.args.append((args, kwargs))
            return await own(*args, **kwargs)

        setattr(store, name, replacement)

    @property
    def count(self) -> int:
        return len(self.args)


async def _finished_long_ago(cq: CairnQ, clock: FakeClock, count: int = 3) -> list[str]:
    ids = []
    for _ in range(count):
        task = await cq.submit("job")
        await cq.cancel(task.id)
        ids.append(task.id)
    clock.advance(2 * DAY_MS)
    return ids


def _worker(cq: CairnQ, **options: Any) -> Worker:
    worker = Worker(cq, poll_interval_ms=10, **options)

    @worker.task
    async def job(ctx: Any, payload: Any) -> str:
        return "done"

    return worker


# --- the modules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("cairnq.store.base", "TaskStore"),
        ("cairnq.store.sqlite", "SQLiteStore"),
        ("cairnq.store.postgres", "PostgresStore"),
    ],
)
def test_each_store_module_gives_its_class_as_cairnq_store_does(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert cls is getattr(importlib.import_module("cairnq.store"), name)
    assert cls is getattr(importlib.import_module("cairnq"), name)


async def test_replaced_tells_an_instance_replacement_and_a_subclass_override_from_the_own_method(
    cq: CairnQ,
) -> None:
    class Reading(TaskStore):
        async def get(self, task_id: str) -> Task | None:
            return await super().get(task_id)

    store = cq.store
    assert not replaced(store, "get")
    Calls(store, "get")
    assert replaced(store, "get") and not replaced(store, "purge")
    assert replaced(Reading(cq.backend), "get")


# --- submit hooks --------------------------------------------------------------------------


async def test_a_submit_through_the_store_runs_the_clients_submit_hooks(cq: CairnQ) -> None:
    seen: list[str] = []
    stored: list[str] = []

    def hook(pending: PendingSubmit) -> Callable[[Task | None, BaseException | None], None]:
        seen.append(pending.name)
        return lambda task, error: stored.append(task.id if task else "")

    cq.add_submit_hook(hook)
    task = await cq.store.submit(name="through.store")
    assert seen == ["through.store"] and stored == [task.id]


async def test_a_task_submitted_through_the_store_is_traced(cq: CairnQ, traces: Traces) -> None:
    traces.tracing.instrument(cq)
    task = await cq.store.submit(name="traced")
    assert traces.one("cairnq submit traced") is not None
    assert "traceparent" in task.metadata


# --- the retention sweeper over a store ----------------------------------------------------


async def test_a_retention_sweeper_over_a_store_deletes_finished_tasks_past_the_cutoff(
    cq: CairnQ, clock: FakeClock
) -> None:
    old = await _finished_long_ago(cq, clock)
    waiting = await cq.submit("job")
    sweeper = RetentionSweeper(cq.store, Retention(older_than_ms=DAY_MS))
    assert await sweeper.sweep() == len(old)
    assert [await cq.get(i) for i in old] == [None] * len(old)
    assert await cq.get(waiting.id) is not None


def test_the_blocking_retention_sweeper_over_a_store_deletes_finished_tasks_past_the_cutoff(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    with db.sync_client(clock=clock) as cq:
        old = []
        for _ in range(3):
            task = cq.submit("job")
            cq.cancel(task.id)
            old.append(task.id)
        clock.advance(2 * DAY_MS)
        waiting = cq.submit("job")
        sweeper = SyncRetentionSweeper(cq.store, Retention(older_than_ms=DAY_MS))
        assert sweeper.sweep() == len(old)
        assert [cq.get(i) for i in old] == [None] * len(old)
        assert cq.get(waiting.id) is not None


# --- purge ---------------------------------------------------------------------------------


async def test_a_replaced_purge_is_called_by_the_clients_purge(cq: CairnQ) -> None:
    purge = Calls(cq.store, "purge")
    await cq.purge(older_than_ms=5, status="canceled", limit=7)
    assert purge.args == [
        ((), {"older_than_ms": 5, "queue": None, "status": "canceled", "name": None, "limit": 7})
    ]


async def test_a_replaced_purge_is_called_by_a_retention_sweeper_over_the_store(
    cq: CairnQ, clock: FakeClock
) -> None:
    old = await _finished_long_ago(cq, clock)
    purge = Calls(cq.store, "purge")
    sweeper = RetentionSweeper(cq.store, Retention(older_than_ms=DAY_MS, limit=2))
    assert await sweeper.sweep() == len(old)
    assert purge.count == 2


async def test_a_replaced_purge_is_called_by_the_sweep_of_a_client_over_the_store(
    db: Database, clock: FakeClock
) -> None:
    async with db.client(clock=clock) as owner:
        old = await _finished_long_ago(owner, clock)
        purge = Calls(owner.store, "purge")
        async with CairnQ(owner.store, retention=Retention(older_than_ms=DAY_MS)) as cq:
            assert await cq.sweep() == len(old)
        assert purge.count == 1


async def test_a_replaced_purge_is_called_by_the_sweep_of_a_worker_over_the_store(
    cq: CairnQ, clock: FakeClock
) -> None:
    old = await _finished_long_ago(cq, clock)
    purge = Calls(cq.store, "purge")
    worker = Worker(cq.store, retention=Retention(older_than_ms=DAY_MS, limit=2))
    assert worker.sweeper is not None
    assert await worker.sweeper.sweep() == len(old)
    assert purge.count == 2


# --- get, queue_depth, task_done_wake ------------------------------------------------------


async def test_a_replaced_get_is_called_by_the_clients_get(cq: CairnQ) -> None:
    task = await cq.submit("job")
    get = Calls(cq.store, "get")
    assert (await cq.get(task.id)) == task
    assert get.args == [((task.id,), {})]


async def test_a_get_overridden_by_a_store_subclass_is_called_by_a_client_over_it(
    cq: CairnQ,
) -> None:
    read: list[str] = []

    class Reading(TaskStore):
        async def get(self, task_id: str) -> Task | None:
            read.append(task_id)
            return await super().get(task_id)

    task = await cq.submit("job")
    client = CairnQ(Reading(cq.backend))
    assert (await client.get(task.id)) == task and read == [task.id]


async def test_a_replaced_get_is_called_by_wait_for_the_finished_task(cq: CairnQ) -> None:
    task = await cq.submit("job")
    await cq.cancel(task.id)
    get = Calls(cq.store, "get")
    assert (await cq.wait(task.id, timeout_ms=5_000)).status == "canceled"
    assert get.args == [((task.id,), {})]


async def test_a_replaced_task_done_wake_is_wait_s_sleep(cq: CairnQ) -> None:
    task = await cq.submit("job")
    wake = Calls(cq.store, "task_done_wake")
    waiting = asyncio.ensure_future(cq.wait(task.id, timeout_ms=10_000, poll_ms=50))
    while not wake.count:
        await asyncio.sleep(0.01)
    await cq.cancel(task.id)
    assert (await waiting).status == "canceled"
    assert all(args[0] == task.id and args[1] > 0 for args, _ in wake.args)


async def _woken_on(wake: Calls, task_id: str) -> None:
    while not any(args[0] == task_id for args, _ in wake.args):
        await asyncio.sleep(0.01)


async def test_a_replaced_task_done_wake_is_wait_by_key_s_sleep_on_the_keys_task(
    cq: CairnQ,
) -> None:
    wake = Calls(cq.store, "task_done_wake")
    waiting = asyncio.ensure_future(cq.wait_by_key("k", timeout_ms=10_000, poll_ms=20))
    task = await cq.submit("job", key="k")
    await _woken_on(wake, task.id)
    await cq.cancel(task.id)
    assert (await waiting).id == task.id
    assert all(args[0] == task.id and args[1] > 0 for args, _ in wake.args)


async def test_wait_by_key_s_replaced_task_done_wake_follows_the_key_to_its_new_task(
    cq: CairnQ,
) -> None:
    first = await cq.submit("job", key="k")
    wake = Calls(cq.store, "task_done_wake")
    waiting = asyncio.ensure_future(cq.wait_by_key("k", timeout_ms=10_000, poll_ms=20))
    await _woken_on(wake, first.id)
    second = await cq.submit("job", key="k", conflict="replace")
    await _woken_on(wake, second.id)
    await cq.cancel(second.id)
    done = await waiting
    assert (done.id, done.status) == (second.id, "canceled")


async def test_a_replaced_queue_depth_is_called_by_the_clients_queue_depth(cq: CairnQ) -> None:
    depth = Calls(cq.store, "queue_depth")
    assert await cq.queue_depth("default", 10) == 10
    assert depth.args == [(("default", 10), {})]


async def test_a_replaced_queue_depth_is_the_backpressure_gate_s_probe(db: Database) -> None:
    async with db.client(max_queue_depth=5) as cq:
        depth = Calls(cq.store, "queue_depth")
        await cq.submit("job")
        assert depth.args == [(("default", 5), {})]


async def test_a_replaced_queue_depth_is_the_probe_of_the_stores_own_submit(
    db: Database,
) -> None:
    async with db.client(max_queue_depth=5) as cq:
        depth = Calls(cq.store, "queue_depth")
        await cq.store.submit(name="job")
        assert depth.args == [(("default", 5), {})]


# --- the worker: complete and claim_session ------------------------------------------------


async def test_a_replaced_complete_settles_the_workers_successes(cq: CairnQ) -> None:
    tasks = [await cq.submit("job") for _ in range(3)]
    complete = Calls(cq.store, "complete")
    await _worker(cq).run(until_idle=True)
    assert sorted(kw["task_id"] for _, kw in complete.args) == sorted(t.id for t in tasks)
    assert {kw["result"] for _, kw in complete.args} == {"done"}
    assert [(await cq.get(t.id)).status for t in tasks] == ["succeeded"] * 3  # type: ignore[union-attr]


async def test_a_replaced_complete_settles_a_handlers_own_succeed(cq: CairnQ) -> None:
    task = await cq.submit("own")
    complete = Calls(cq.store, "complete")
    worker = Worker(cq, poll_interval_ms=10)

    @worker.task
    async def own(ctx: Any, payload: Any) -> None:
        await ctx.succeed({"by": "handler"})

    await worker.run(until_idle=True)
    assert complete.args == [
        ((), {"task_id": task.id, "worker_id": worker.worker_id, "result": {"by": "handler"}})
    ]
    done = await cq.get(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", {"by": "handler"})


async def test_a_replaced_complete_settles_a_blocking_handlers_own_complete(cq: CairnQ) -> None:
    task = await cq.submit("own")
    complete = Calls(cq.store, "complete")
    worker = Worker(cq, poll_interval_ms=10)
    settled: list[str] = []

    @worker.task
    def own(ctx: Any, payload: Any) -> None:
        settled.append(ctx.complete("blocking").status)

    await worker.run(until_idle=True)
    assert [kw["task_id"] for _, kw in complete.args] == [task.id]
    assert settled == ["succeeded"]


async def test_a_handlers_succeed_through_a_replaced_complete_is_fenced_on_its_attempts_lease(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.submit("own")
    complete = Calls(cq.store, "complete")
    worker = Worker(cq, poll_interval_ms=10, lease_ms=1_000)
    lost: list[bool] = []

    @worker.task
    async def own(ctx: Any, payload: Any) -> None:
        clock.advance(5_000)
        later = kernel.claim(["default"], ctx.worker_id, 60_000, [kernel.Draw(None, 1)], 10)
        await cq.backend.arun(later, write=True)
        with pytest.raises(LostLease):
            await ctx.succeed("stale")
        lost.append(ctx.lost_lease)

    await worker.run(until_idle=True)
    assert complete.count == 1 and lost == [True]
    [task] = await cq.list()
    assert (task.status, task.attempt) == ("running", 2)


async def test_a_replaced_claim_session_makes_the_workers_claims(cq: CairnQ) -> None:
    tasks = [await cq.submit("job") for _ in range(3)]
    session = Calls(cq.store, "claim_session")
    await _worker(cq).run(until_idle=True)
    assert session.count >= 1
    assert all(kw["worker_id"] and kw["queues"] == ["default"] for _, kw in session.args)
    assert [(await cq.get(t.id)).status for t in tasks] == ["succeeded"] * 3  # type: ignore[union-attr]


async def test_a_limit_holds_when_the_workers_claim_session_is_wrapped(cq: CairnQ) -> None:
    worker = Worker(
        cq,
        poll_interval_ms=10,
        concurrency=12,
        extensions=[Limits([Limit.concurrency(2, queue="default", key="payload.customer")])],
    )
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        key = payload["customer"]
        running[key] += 1
        peak[key] = max(peak[key], running[key])
        await asyncio.sleep(0.01)
        running[key] -= 1

    store = cq.store
    own = store.claim_session
    drawn: list[int] = []

    async def wrapped(*, plan: Callable[[ClaimDraw], Awaitable[Any]], **kwargs: Any) -> Any:
        async def counting(draw: ClaimDraw) -> Any:
            async def each(names: Any, limit: int) -> list[Task]:
                tasks = await draw(names, limit)
                drawn.append(len(tasks))
                return tasks

            return await plan(each)

        return await own(plan=counting, **kwargs)

    store.claim_session = wrapped  # type: ignore[method-assign]
    await cq.submit_many([("job", {"customer": c}) for c in "abc" for _ in range(6)])
    await worker.run(until_idle=True)
    assert sum(drawn) == 18
    assert max(peak.values()) == 2
    stats = await cq.stats()
    assert stats["default"]["succeeded"] == 18


async def test_a_worker_settling_through_a_replaced_complete_is_fenced_on_its_attempts_lease(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.submit("job")
    claim = kernel.claim(["default"], "w1", 1_000, [kernel.Draw(None, 1)], 10)
    [first] = await cq.backend.arun(claim, write=True)
    clock.advance(5_000)
    claim = kernel.claim(["default"], "w1", 60_000, [kernel.Draw(None, 1)], 10)
    [second] = await cq.backend.arun(claim, write=True)
    complete = Calls(cq.store, "complete")
    settler = Settler(cq.backend, "w1")
    settler.overriding = cq._overriding
    with pytest.raises(LostLease):
        await settler.complete(Lease.of(first), None, int(first["updated_at_ms"]))
    assert complete.count == 1
    task = await cq.get(second["id"])
    assert task is not None and (task.status, task.attempt) == ("running", second["attempt"])


def test_a_replaced_purge_is_called_by_the_blocking_sweeper_over_the_store(db: Database) -> None:
    clock = FakeClock(START_MS)
    with db.sync_client(clock=clock) as cq:
        for _ in range(5):
            cq.cancel(cq.submit("job").id)
        clock.advance(2 * DAY_MS)
        asked: list[dict[str, Any]] = []
        own = cq.store.purge

        async def purge(**kwargs: Any) -> list[str]:
            asked.append(kwargs)
            return await own(**kwargs)

        cq.store.purge = purge  # type: ignore[method-assign]
        sweeper = SyncRetentionSweeper(cq.store, Retention(older_than_ms=DAY_MS, limit=2))
        try:
            assert sweeper.sweep() == 5
            assert sweeper.sweep() == 0
        finally:
            sweeper.stop()
        rule = {"older_than_ms": DAY_MS, "queue": None, "status": None, "name": None}
        assert asked == [{**rule, "limit": 2}] * 4


async def test_a_replaced_complete_runs_the_workers_ending_hooks_not_the_stores(
    cq: CairnQ,
) -> None:
    task = await cq.submit("job")
    Calls(cq.store, "complete")
    await _worker(cq, extensions=[History(record=False)]).run(until_idle=True)
    assert (await cq.get(task.id)).status == "succeeded"  # type: ignore[union-attr]
    assert await cq.attempts.list(task.id) == []


async def test_a_replaced_complete_records_the_workers_attempt_once(cq: CairnQ) -> None:
    task = await cq.submit("job")
    Calls(cq.store, "complete")
    await _worker(cq).run(until_idle=True)
    [attempt] = await cq.attempts.list(task.id)
    assert attempt.outcome == "succeeded"


async def test_tasks_claimed_before_a_replaced_claim_session_raises_are_run(
    cq: CairnQ,
) -> None:
    task = await cq.submit("job")
    own = cq.store.claim_session
    errors: list[BaseException] = []

    async def claim_session(**kwargs: Any) -> Any:
        result = await own(**kwargs)
        if not errors:
            raise RuntimeError("audit log down")
        return result

    cq.store.claim_session = claim_session  # type: ignore[method-assign]
    worker = _worker(cq, on_error=lambda exc, *args, **kwargs: errors.append(exc))
    await worker.run(until_idle=True)
    assert (await cq.get(task.id)).status == "succeeded"  # type: ignore[union-attr]
    assert [str(e) for e in errors][:1] == ["audit log down"]


async def test_a_claim_for_another_worker_id_inside_a_replaced_claim_session_is_not_the_workers(
    cq: CairnQ,
) -> None:
    theirs = await cq.submit("job", queue="other")
    own = cq.store.claim_session
    taken: list[Task] = []

    async def claim_session(**kwargs: Any) -> Any:
        if not taken:
            taken.extend(await cq.store.claim(queues=["other"], worker_id="someone-else"))
        return await own(**kwargs)

    cq.store.claim_session = claim_session  # type: ignore[method-assign]
    ran: list[str] = []
    worker = Worker(cq, ["default", "other"], poll_interval_ms=10)

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        ran.append(ctx.task.id)

    mine = await cq.submit("job")
    await worker.run(until_idle=True)
    assert [t.id for t in taken] == [theirs.id]
    assert ran == [mine.id]
    held = await cq.get(theirs.id)
    assert held is not None and (held.status, held.worker_id) == ("running", "someone-else")
