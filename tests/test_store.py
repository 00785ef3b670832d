"""The store layer driven directly, with the reference SDK's method names and shapes.

Every test runs on SQLite and PostgreSQL; time is a ``FakeClock`` where leases matter.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    LostLease,
    PostgresStore,
    QueueFull,
    SQLiteStore,
    StoreClosed,
    Task,
    TaskRef,
    TaskStore,
    UnsupportedBackend,
    Worker,
    _readiness,
)
from cairnq.backends import Backend
from cairnq.extensions.workflows._ops import WORKFLOWS_MIGRATIONS
from cairnq.protocol.steps import Call, Op
from cairnq.store import ClaimDraw
from cairnq.testing import FakeClock
from cairnq.workflows import PARKED_RUN_AT_MS

from ._db import Database
from .test_without_extensions import migrate_only

START_MS = 1_700_000_000_000
ERROR = {"type": "Boom", "code": "boom", "message": "it broke", "retryable": True, "details": {}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
async def cq(db: Database, clock: FakeClock) -> AsyncIterator[CairnQ]:
    async with db.client(clock=clock) as client:
        yield client


async def _claim_one(store: TaskStore, worker_id: str = "w1", **kw: object) -> Task:
    [task] = await store.claim(queues=["default"], worker_id=worker_id, **kw)  # type: ignore[arg-type]
    return task


# --- claim ---------------------------------------------------------------------------------


async def test_claim_returns_running_tasks_in_priority_order(cq: CairnQ) -> None:
    low = await cq.store.submit(name="job", priority=0)
    high = await cq.store.submit(name="job", priority=5)
    claimed = await cq.store.claim(queues=["default"], worker_id="w1", limit=5)
    assert [t.id for t in claimed] == [high.id, low.id]
    assert {(t.status, t.worker_id, t.attempt) for t in claimed} == {("running", "w1", 1)}


async def test_claim_with_an_empty_names_list_claims_nothing(cq: CairnQ) -> None:
    await cq.store.submit(name="job")
    assert await cq.store.claim(queues=["default"], worker_id="w1", names=[]) == []
    [task] = await cq.store.claim(queues=["default"], worker_id="w1", names=["job"])
    assert task.status == "running"


async def test_claim_session_returns_none_without_calling_plan_when_nothing_is_due(
    cq: CairnQ,
) -> None:
    calls: list[int] = []

    async def plan(draw: ClaimDraw) -> int:
        calls.append(1)
        return 0

    found = await cq.store.claim_session(queues=["default"], worker_id="w1", names=None, plan=plan)
    assert (found, calls) == (None, [])


async def test_claim_session_plan_draws_per_name(cq: CairnQ) -> None:
    for name in ("a", "a", "b"):
        await cq.store.submit(name=name)

    async def plan(draw: ClaimDraw) -> list[list[str]]:
        return [[t.name for t in await draw(["a"], 5)], [t.name for t in await draw(["b"], 5)]]

    drawn = await cq.store.claim_session(
        queues=["default"], worker_id="w1", names=["a", "b"], plan=plan
    )
    assert drawn == [["a", "a"], ["b"]]


# --- heartbeat ------------------------------------------------------------------------------


async def test_heartbeat_extends_the_lease_from_now(cq: CairnQ, clock: FakeClock) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store, lease_ms=1000)
    clock.advance(600)
    beat = await cq.store.heartbeat(task_id=task.id, worker_id="w1", lease_ms=1000)
    assert beat.lease_until_ms == START_MS + 600 + 1000


async def test_heartbeat_after_the_lease_expired_raises_lost_lease(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store, lease_ms=1000)
    clock.advance(1001)
    with pytest.raises(LostLease, match=f"^lease on task {task.id} was lost$"):
        await cq.store.heartbeat(task_id=task.id, worker_id="w1")


async def test_a_store_write_on_a_task_that_is_not_running_says_so(cq: CairnQ) -> None:
    task = await cq.store.submit(name="job")
    with pytest.raises(LostLease, match=f"task {task.id} is queued, not running: worker id 'w1'"):
        await cq.store.progress(task_id=task.id, worker_id="w1", progress=0.5, message=None)


async def test_heartbeat_batch_maps_held_tasks_to_their_cancel_flag(cq: CairnQ) -> None:
    for _ in range(3):
        await cq.store.submit(name="job")
    a, b, c = await cq.store.claim(queues=["default"], worker_id="w1", limit=3)
    await cq.store.cancel(b.id)
    await cq.store.complete(task_id=c.id, worker_id="w1", result=None)
    held = await cq.store.heartbeat_batch(task_ids=[a.id, b.id, c.id], worker_id="w1")
    assert held == {a.id: False, b.id: True}


# --- settle ---------------------------------------------------------------------------------


async def test_progress_then_complete_records_the_result(cq: CairnQ) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    moved = await cq.store.progress(task_id=task.id, worker_id="w1", progress=0.5, message="half")
    done = await cq.store.complete(task_id=task.id, worker_id="w1", result={"ok": True})
    assert (moved.progress, moved.message) == (0.5, "half")
    assert (done.status, done.result, done.progress, done.lease_until_ms) == (
        "succeeded",
        {"ok": True},
        1.0,
        None,
    )


async def test_complete_by_another_worker_raises_lost_lease_and_changes_nothing(
    cq: CairnQ,
) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    with pytest.raises(LostLease) as excinfo:
        await cq.store.complete(task_id=task.id, worker_id="intruder", result=1)
    assert str(excinfo.value) == (
        f"worker id 'intruder' does not own task {task.id}: it runs under worker id 'w1'; "
        "pass the worker_id the task was claimed with"
    )
    after = await cq.store.get(task.id)
    assert after is not None
    assert (after.status, after.worker_id, after.result) == ("running", "w1", None)


async def test_succeed_ignores_a_pending_cancel(cq: CairnQ) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    await cq.store.cancel(task.id)
    done = await cq.store.succeed(task_id=task.id, worker_id="w1", result=7)
    assert (done.status, done.result) == ("succeeded", 7)


async def test_retryable_fail_with_attempts_left_requeues_after_the_delay(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    back = await cq.store.fail(task_id=task.id, worker_id="w1", error=ERROR, delay_ms=5000)
    assert (back.status, back.error, back.worker_id) == ("queued", ERROR, None)
    assert back.run_at_ms == START_MS + 5000


async def test_non_retryable_fail_is_final(cq: CairnQ) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    failed = await cq.store.fail(task_id=task.id, worker_id="w1", error=ERROR, retryable=False)
    assert (failed.status, failed.error) == ("failed", ERROR)


async def test_a_store_settles_a_claim_another_store_made_for_the_same_worker_id(
    db: Database, cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    task = await _claim_one(cq.store)
    async with db.client(clock=clock) as other:
        done = await other.store.complete(task_id=task.id, worker_id="w1", result="from elsewhere")
    assert (done.status, done.result) == ("succeeded", "from elsewhere")


async def test_a_claim_that_lost_its_lease_cannot_settle_the_next_claim_of_the_same_worker_id(
    db: Database, cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    stale = await _claim_one(cq.store, lease_ms=1000)
    clock.advance(1001)
    async with db.client(clock=clock) as other:
        again = await _claim_one(other.store, lease_ms=30_000)
        assert (again.id, again.attempt) == (stale.id, 2)
        with pytest.raises(LostLease):
            await cq.store.complete(task_id=stale.id, worker_id="w1", result="stale")
        done = await other.store.complete(task_id=again.id, worker_id="w1", result=2)
        assert done.status == "succeeded"


async def test_a_claim_that_lost_its_lease_stays_lost_for_every_later_write(
    db: Database, cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    stale = await _claim_one(cq.store, lease_ms=1000)
    clock.advance(1001)
    async with db.client(clock=clock) as other:
        again = await _claim_one(other.store, lease_ms=30_000)
        refused = []
        for write in (
            lambda: cq.store.heartbeat(task_id=stale.id, worker_id="w1"),
            lambda: cq.store.heartbeat(task_id=stale.id, worker_id="w1"),
            lambda: cq.store.progress(task_id=stale.id, worker_id="w1", progress=1, message=None),
            lambda: cq.store.complete(task_id=stale.id, worker_id="w1", result="stale"),
        ):
            with pytest.raises(LostLease):
                await write()
            refused.append(True)
        batch = await cq.store.heartbeat_batch(task_ids=[stale.id], worker_id="w1")
        current = await other.store.get(again.id)
    assert refused == [True] * 4 and batch == {}
    assert current is not None and current.running and current.progress is None


async def test_complete_in_on_sqlite_raises_unsupported_backend_as_it_cannot_share_a_transaction(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.client() as client:
        await client.store.submit(name="job")
        task = await _claim_one(client.store)

        async def write(conn: object) -> None:
            raise AssertionError("not called")

        with pytest.raises(UnsupportedBackend, match="cannot share a transaction"):
            await client.store.complete_in(task_id=task.id, worker_id="w1", write=write)


async def test_complete_in_on_postgres_commits_the_write_with_the_completion(
    pg_db: Database,
) -> None:
    async with pg_db.client() as client:
        await client.store.submit(name="job")
        task = await _claim_one(client.store)

        async def write(conn: object) -> str:
            cur = await conn.execute("select 'written'")  # type: ignore[attr-defined]
            return str((await cur.fetchone())[0])

        done, value = await client.store.complete_in(task_id=task.id, worker_id="w1", write=write)
    assert (done.status, done.result, value) == ("succeeded", "written", "written")


# --- client-side operations -----------------------------------------------------------------


async def test_cancel_and_cancel_by_key(cq: CairnQ) -> None:
    plain = await cq.store.submit(name="job")
    keyed = await cq.store.submit(name="job", key="k1")
    canceled = await cq.store.cancel(plain.id)
    by_key = await cq.store.cancel_by_key("k1")
    assert canceled is not None and canceled.status == "canceled"
    assert by_key is not None and (by_key.id, by_key.status) == (keyed.id, "canceled")
    assert await cq.store.cancel(plain.id) is None
    assert await cq.store.cancel_by_key("unknown") is None


async def test_retry_and_retry_by_key_requeue_failed_tasks(cq: CairnQ) -> None:
    for key in ("k1", "k2"):
        await cq.store.submit(name="job", key=key, max_attempts=1)
        task = await _claim_one(cq.store)
        await cq.store.fail(task_id=task.id, worker_id="w1", error=ERROR)
    first = await cq.store.retry_by_key("k1")
    second = await cq.store.get_by_key("k2")
    assert second is not None
    reset = await cq.store.retry(second.id, reset_attempt=True)
    assert first is not None and (first.status, first.attempt) == ("queued", 1)
    assert reset is not None and (reset.status, reset.attempt) == ("queued", 0)


async def test_purge_deletes_only_finished_tasks_past_the_cutoff(
    cq: CairnQ, clock: FakeClock
) -> None:
    await cq.store.submit(name="job")
    done = await cq.store.submit(name="job")
    await cq.store.cancel(done.id)
    waiting = await cq.store.submit(name="job")
    clock.advance(10)
    assert await cq.store.purge(older_than_ms=60_000) == []
    assert await cq.store.purge(older_than_ms=5) == [done.id]
    assert await cq.store.get(waiting.id) is not None


async def test_reads_return_the_reference_shapes(cq: CairnQ) -> None:
    task = await cq.store.submit(name="job", queue="q", key="k")
    assert await cq.store.get_status(task.id) == TaskRef(task.id, "queued")
    assert await cq.store.get_status_by_key("k") == TaskRef(task.id, "queued")
    assert (await cq.store.stats("q"))["q"]["queued"] == 1
    assert await cq.store.queue_depth("q", 3) == 2
    assert await cq.store.list(queue="q", offset=1) == []
    assert await cq.store.protocol_version() == 1


async def test_claim_wake_returns_when_a_task_is_queued_in_this_process(cq: CairnQ) -> None:
    waiting = asyncio.ensure_future(cq.store.claim_wake(["default"], 60_000))
    # The waiter subscribes once it runs: submit until it wakes, a generous upper
    # bound of 5 s on the whole (the wait itself would last a minute).
    deadline = asyncio.get_running_loop().time() + 5
    while not waiting.done():
        assert asyncio.get_running_loop().time() < deadline, "claim_wake never woke"
        await cq.store.submit(name="job")
        await asyncio.wait({waiting}, timeout=0.1)
    await waiting


# --- the dependents of a task the store ends ------------------------------------------------
#
# No worker runs in these tests, so no workflow sweep does: a dependent is decided
# only by the store's own write that ended its dependency.


async def _due(cq: CairnQ, task_id: str) -> bool:
    """Whether the task is queued and no longer parked (claimable once due)."""
    task = await cq.get(task_id)
    assert task is not None
    return task.status == "queued" and task.run_at_ms < PARKED_RUN_AT_MS


async def _status(cq: CairnQ, task_id: str) -> str:
    task = await cq.get(task_id)
    assert task is not None
    return task.status


@pytest.mark.parametrize("settle", ["complete", "succeed"])
async def test_a_store_completion_releases_a_dependent_in_its_transaction(
    cq: CairnQ, settle: str
) -> None:
    first = await cq.store.submit(name="job")
    dependent = await cq.submit("job", depends_on=[first])
    await _claim_one(cq.store)
    done = await getattr(cq.store, settle)(task_id=first.id, worker_id="w1", result="ok")
    assert done.status == "succeeded"
    assert await _due(cq, dependent.id)


async def test_a_store_success_purged_at_once_still_counts_for_its_dependent(
    cq: CairnQ, clock: FakeClock
) -> None:
    a = await cq.store.submit(name="job")
    b = await cq.store.submit(name="job")
    c = await cq.submit("job", depends_on=[a, b])
    await cq.store.claim(queues=["default"], worker_id="w1", limit=2)
    await cq.store.complete(task_id=a.id, worker_id="w1", result=None)
    clock.advance(1)
    assert await cq.store.purge(older_than_ms=0) == [a.id]
    await cq.store.complete(task_id=b.id, worker_id="w1", result=None)
    assert await _due(cq, c.id)


async def test_a_store_failure_cancels_a_dependent_in_its_transaction(cq: CairnQ) -> None:
    first = await cq.store.submit(name="job")
    dependent = await cq.submit("job", depends_on=[first])
    await _claim_one(cq.store)
    await cq.store.fail(task_id=first.id, worker_id="w1", error=ERROR, retryable=False)
    assert await _status(cq, dependent.id) == "canceled"


@pytest.mark.parametrize("how", ["cancel", "cancel_by_key", "submit_replace"])
async def test_a_store_cancel_cancels_a_dependent_in_its_transaction(cq: CairnQ, how: str) -> None:
    first = await cq.store.submit(name="job", key="k1")
    dependent = await cq.submit("job", depends_on=[first])
    if how == "cancel":
        await cq.store.cancel(first.id)
    elif how == "cancel_by_key":
        await cq.store.cancel_by_key("k1")
    else:
        await cq.store.submit(name="job", key="k1", conflict="replace")
    assert await _status(cq, first.id) == "canceled"
    assert await _status(cq, dependent.id) == "canceled"


async def test_a_store_complete_in_releases_a_dependent_in_its_transaction(
    pg_db: Database,
) -> None:
    async with pg_db.client() as client:
        first = await client.store.submit(name="job")
        dependent = await client.submit("job", depends_on=[first])
        await _claim_one(client.store)
        done, _ = await client.store.complete_in(
            task_id=first.id, worker_id="w1", write=lambda conn: asyncio.sleep(0)
        )
        assert done.status == "succeeded"
        assert await _due(client, dependent.id)


class _Recording:
    """The store's backend, recording the statements each operation runs (a real database)."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner
        self.dialect = inner.dialect
        self.hub = inner.hub
        self.statements: list[str] = []

    def _recorded(self, op: Op[Any]) -> Op[Any]:
        reply: Any = None
        while True:
            try:
                step = op.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Call):
                self.statements.append(step.statement)
            reply = yield step

    def open(self) -> None:
        self._inner.open()

    async def aopen(self) -> None:
        await self._inner.aopen()

    def run(self, op: Op[Any], *, write: bool) -> Any:
        return self._inner.run(self._recorded(op), write=write)

    async def arun(self, op: Op[Any], *, write: bool) -> Any:
        return await self._inner.arun(self._recorded(op), write=write)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_store_without_the_workflow_tables_settles_with_the_protocol_s_statements_alone(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_readiness, "RECHECK_S", 3_600.0)
    migrate_only(db, lambda name: name not in (*WORKFLOWS_MIGRATIONS, "x0013_workflows_forget.sql"))
    async with db.client(migrate=False) as client:
        backend = _Recording(client.backend)
        store = TaskStore(backend)
        settled = [await store.submit(name="job", key=f"k{n}") for n in range(2)]
        await store.claim(queues=["default"], worker_id="w1", limit=2)
        await store.submit(name="job", key="k2")
        backend.statements.clear()
        await store.complete(task_id=settled[0].id, worker_id="w1", result=1)
        await store.fail(task_id=settled[1].id, worker_id="w1", error=ERROR, retryable=False)
        await store.cancel_by_key("k2")
        replaced = await store.submit(name="job", key="k2", conflict="replace")
        assert [await _status(client, t.id) for t in settled] == ["succeeded", "failed"]
        assert replaced.status == "queued"
    # The ledger is read at most once for all four writes, and no workflow statement runs.
    assert backend.statements.count("ledger_applied") <= 1
    assert [s for s in backend.statements if s.startswith("workflows_")] == []


# --- stores made from a database, CairnQ(store), Worker(store, queues) ------------------------


def _store_for(db: Database, tmp_path: Path) -> TaskStore:
    if db.kind == "sqlite":
        assert db.path is not None
        return SQLiteStore(db.path, busy_timeout_ms=2000)
    return PostgresStore(db.url, schema=db.schema, max_size=2, listen=False)


async def test_a_store_made_from_a_database_claims_and_completes(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    try:
        await store.submit(name="job", payload={"n": 1})
        task = await _claim_one(store)
        done = await store.complete(task_id=task.id, worker_id="w1", result={"n": 2})
    finally:
        await store.close()
    assert (task.payload, done.result) == ({"n": 1}, {"n": 2})


async def test_cairnq_over_a_store_runs_on_the_stores_database(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    try:
        cq = CairnQ(store)
        submitted = await cq.submit("job", {"via": "client"})
        seen = await store.get(submitted.id)
        assert cq.store is store
    finally:
        await store.close()
    assert seen is not None and seen.payload == {"via": "client"}


async def test_closing_a_client_over_a_store_leaves_the_store_open(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    try:
        async with CairnQ(store) as cq:
            task = await cq.submit("job")
        assert await store.get_status(task.id) == TaskRef(task.id, "queued")
    finally:
        await store.close()


async def test_a_closed_store_made_from_a_database_raises_store_closed_instead_of_reopening(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    await store.close()
    with pytest.raises(StoreClosed):
        await store.submit(name="job")
    with pytest.raises(StoreClosed):
        await store.connect()


async def test_cairnq_max_queue_depth_gates_the_stores_own_submits(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    try:
        CairnQ(store, max_queue_depth=1, max_queue_wait_ms=0)
        await store.submit(name="job")
        with pytest.raises(QueueFull):
            await store.submit(name="job")
    finally:
        await store.close()


async def test_worker_over_a_store_with_positional_queues_runs_tasks(
    db: Database, tmp_path: Path
) -> None:
    store = _store_for(db, tmp_path)
    await store.connect()
    try:
        worker = Worker(store, ["jobs"], poll_interval_ms=20)

        @worker.task
        async def double(ctx: object, payload: dict[str, int]) -> int:
            return payload["n"] * 2

        cq = CairnQ(store)
        async with worker.background():
            task = await cq.submit("double", {"n": 21}, queue="jobs")
            done = await cq.wait(task.id, timeout_ms=5000)
        assert await store.get_status(task.id) == TaskRef(task.id, "succeeded")
    finally:
        await store.close()
    assert (worker.queues, done.result) == (["jobs"], 42)


def test_worker_still_takes_queues_as_a_keyword(sqlite_db: Database) -> None:
    assert sqlite_db.path is not None
    worker = Worker(SQLiteStore(sqlite_db.path), queues=("a", "b"))
    assert worker.queues == ["a", "b"]
