"""Idempotency keys: the conflict table (PROTOCOL.md, "Keys"), on every backend."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cairnq import AlreadyExists, CairnQ, SyncCairnQ, TaskRef, TaskTimeout, error_envelope, kernel
from cairnq.models import Lease, Task
from cairnq.testing import FakeClock

from ._db import Database, PluginDatabase

WORKER = "w1"
START_MS = 1_700_000_000_000
STATUSES = ["queued", "running", "succeeded", "failed", "canceled"]
CONFLICTS = ["reuse", "reuse-succeeded", "reject", "replace"]

# What a keyed submit does, by strategy and the status of the task the key points at.
RETURNS = [
    ("reuse", "queued"),
    ("reuse", "running"),
    ("reuse-succeeded", "queued"),
    ("reuse-succeeded", "running"),
    ("reuse-succeeded", "succeeded"),
]
INSERTS = [
    ("reuse", "succeeded"),
    ("reuse", "failed"),
    ("reuse", "canceled"),
    ("reuse-succeeded", "failed"),
    ("reuse-succeeded", "canceled"),
    ("replace", "succeeded"),
    ("replace", "failed"),
    ("replace", "canceled"),
]


def test_the_tables_here_cover_every_strategy_and_status() -> None:
    covered = {*RETURNS, *INSERTS, *(("reject", s) for s in STATUSES)}
    covered |= {("replace", "queued"), ("replace", "running")}
    assert covered == {(c, s) for c in CONFLICTS for s in STATUSES}


TASKS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"
OUTCOMES = {
    "returns it": "returns",
    "returns it, with its result": "returns",
    "inserts a new task": "inserts",
    "inserts a new task: the work runs again": "inserts",
    "raises `AlreadyExists`": "rejects",
    "cancels it (a running one cooperatively) and inserts a new task": "replaces",
}


def docs_conflict_table() -> dict[tuple[str, str], str]:
    """(strategy, status) -> outcome, as the docs' conflict table (docs/tasks.md) states it."""
    text = TASKS_PAGE.read_text()
    block = re.search(r"<!-- conflict-table:.*?-->\n(.*?)<!-- /conflict-table -->", text, re.S)
    assert block is not None, "docs/tasks.md has no conflict table"
    rows = [line.strip("|").split("|") for line in block.group(1).strip().splitlines()]
    header, table = [c.strip() for c in rows[0]], rows[2:]
    assert header == [
        "`conflict=`",
        "key's task queued or running",
        "succeeded",
        "failed",
        "canceled",
    ]
    columns = [("queued", "running"), ("succeeded",), ("failed",), ("canceled",)]
    stated: dict[tuple[str, str], str] = {}
    for first, *cells in table:
        conflict = first.strip().split("`")[1]
        for statuses, cell in zip(columns, cells, strict=True):
            for status in statuses:
                stated[conflict, status] = OUTCOMES[cell.strip()]
    return stated


def test_the_docs_conflict_table_states_what_these_tests_check() -> None:
    checked = dict.fromkeys(RETURNS, "returns")
    checked |= dict.fromkeys(INSERTS, "inserts")
    checked |= {("reject", status): "rejects" for status in STATUSES}
    checked |= {("replace", "queued"): "replaces", ("replace", "running"): "replaces"}
    assert docs_conflict_table() == checked


def test_the_cli_help_for_conflict_says_what_each_strategy_does() -> None:
    script = Path(sys.executable).parent / "cairnq"
    done = subprocess.run(
        [str(script), "submit", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    text = " ".join(done.stdout.split())
    assert "reuse (default): return it if queued or running, else submit anew" in text
    assert "reuse-succeeded: return it if queued, running or succeeded" in text
    assert "reject: fail with AlreadyExists whatever its status" in text
    assert "replace: cancel it if queued or running, then submit anew" in text


# --- helpers -------------------------------------------------------------------------------


async def claim(cq: CairnQ, task: Task) -> Lease:
    op = kernel.claim([task.queue], WORKER, 30_000, [kernel.Draw([task.name], 1)], 100)
    rows = await cq.backend.arun(op, write=True)
    assert [r["id"] for r in rows] == [task.id]
    return Lease.of(rows[0])


async def reread(cq: CairnQ, task_id: str) -> Task:
    task = await cq.get(task_id)
    assert task is not None
    return task


async def make_existing(cq: CairnQ, status: str, key: str = "k", name: str = "old") -> Task:
    """A task the key points at, in ``status``."""
    task = await cq.submit(name, {"v": "old"}, key=key)
    if status == "canceled":
        await cq.cancel(task.id)
    elif status != "queued":
        lease = await claim(cq, task)
        if status == "succeeded":
            op: Any = kernel.complete(lease, WORKER, json.dumps({"answer": 42}))
            await cq.backend.arun(op, write=True)
        elif status == "failed":
            error = json.dumps(error_envelope("ValueError", "bad", "it broke"))
            op = kernel.fail(lease, WORKER, error, retryable=False, delay_ms=0)
            await cq.backend.arun(op, write=True)
    existing = await reread(cq, task.id)
    assert existing.status == status
    return existing


async def total(cq: CairnQ) -> int:
    return sum(sum(by_status.values()) for by_status in (await cq.stats()).values())


# --- the conflict table --------------------------------------------------------------------


@pytest.mark.parametrize(("conflict", "status"), RETURNS)
async def test_keyed_submit_returns_the_existing_task_without_inserting(
    db: Database, conflict: str, status: str
) -> None:
    async with db.client() as cq:
        existing = await make_existing(cq, status)
        returned = await cq.submit("new", {"v": "new"}, key="k", conflict=conflict)
        stored = await reread(cq, existing.id)
        pointee = await cq.get_by_key("k")
        count = await total(cq)
    assert returned.to_dict() == existing.to_dict()
    assert stored.to_dict() == existing.to_dict()
    assert pointee is not None
    assert pointee.id == existing.id
    assert count == 1


@pytest.mark.parametrize(("conflict", "status"), INSERTS)
async def test_keyed_submit_inserts_a_new_task_and_repoints_the_key(
    db: Database, conflict: str, status: str
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        existing = await make_existing(cq, status)
        clock.advance(1_000)
        new = await cq.submit("new", {"v": "new"}, key="k", conflict=conflict)
        pointee = await cq.get_by_key("k")
        count = await total(cq)
    assert new.id != existing.id
    assert (new.name, new.status, new.payload) == ("new", "queued", {"v": "new"})
    assert pointee is not None
    assert pointee.id == new.id
    assert count == 2


@pytest.mark.parametrize(("conflict", "status"), INSERTS)
async def test_keyed_submit_leaves_a_declined_finished_task_untouched(
    db: Database, conflict: str, status: str
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        existing = await make_existing(cq, status)
        clock.advance(1_000)
        await cq.submit("new", key="k", conflict=conflict)
        stored = await reread(cq, existing.id)
    assert stored.to_dict() == existing.to_dict()


@pytest.mark.parametrize("status", STATUSES)
async def test_reject_raises_already_exists_carrying_the_key(db: Database, status: str) -> None:
    async with db.client() as cq:
        await make_existing(cq, status, key="order:7")
        with pytest.raises(AlreadyExists) as excinfo:
            await cq.submit("new", key="order:7", conflict="reject")
    assert excinfo.value.key == "order:7"
    assert str(excinfo.value) == "task with key 'order:7' already exists"


@pytest.mark.parametrize("status", STATUSES)
async def test_reject_writes_nothing(db: Database, status: str) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        existing = await make_existing(cq, status)
        stats_before = await cq.stats()
        clock.advance(1_000)
        with pytest.raises(AlreadyExists):
            await cq.submit("new", key="k", conflict="reject", queue="elsewhere")
        stats_after = await cq.stats()
        stored = await reread(cq, existing.id)
        pointee = await cq.get_status_by_key("k")
    assert stats_after == stats_before
    assert stored.to_dict() == existing.to_dict()
    assert pointee == TaskRef(existing.id, status)


@pytest.mark.parametrize("conflict", CONFLICTS)
async def test_every_strategy_inserts_when_the_key_is_unused(db: Database, conflict: str) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", {"n": 1}, key="fresh", conflict=conflict)
        pointee = await cq.get_by_key("fresh")
        count = await total(cq)
    assert task.status == "queued"
    assert pointee is not None
    assert pointee.to_dict() == task.to_dict()
    assert count == 1


async def test_replace_cancels_a_queued_task_and_points_the_key_at_a_new_one(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        old = await make_existing(cq, "queued")
        clock.advance(1_000)
        new = await cq.submit("new", {"v": "new"}, key="k", conflict="replace")
        old_after = await reread(cq, old.id)
        pointee = await cq.get_status_by_key("k")
    assert old_after.status == "canceled"
    assert old_after.completed_at_ms == START_MS + 1_000
    assert new.id != old.id
    assert new.status == "queued"
    assert pointee == TaskRef(new.id, "queued")


async def test_replace_requests_cancel_on_a_running_task_and_points_the_key_at_a_new_one(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        old = await make_existing(cq, "running")
        clock.advance(1_000)
        new = await cq.submit("new", key="k", conflict="replace")
        old_after = await reread(cq, old.id)
        pointee = await cq.get_status_by_key("k")
    assert old_after.status == "running"
    assert old_after.cancel_requested_at_ms == START_MS + 1_000
    assert old_after.completed_at_ms is None
    assert pointee == TaskRef(new.id, "queued")


async def test_replaced_running_task_ends_canceled_when_its_attempt_returns(
    db: Database,
) -> None:
    async with db.client() as cq:
        task = await cq.submit("old", key="k")
        lease = await claim(cq, task)
        await cq.submit("new", key="k", conflict="replace")
        await cq.backend.arun(kernel.complete(lease, WORKER, '"late"'), write=True)
        old_after = await reread(cq, task.id)
    assert old_after.status == "canceled"
    assert old_after.result is None


async def test_reuse_succeeded_returns_the_succeeded_task_with_its_result(db: Database) -> None:
    async with db.client() as cq:
        done = await make_existing(cq, "succeeded")
        returned = await cq.submit("new", key="k", conflict="reuse-succeeded")
    assert returned.id == done.id
    assert returned.status == "succeeded"
    assert returned.result == {"answer": 42}


async def test_reuse_after_success_runs_again_under_the_same_key(db: Database) -> None:
    async with db.client() as cq:
        done = await make_existing(cq, "succeeded")
        again = await cq.submit("new", key="k")
        second = await cq.submit("new", key="k")
    assert again.id != done.id
    assert again.result is None
    assert second.id == again.id


async def test_a_key_is_global_across_queues_and_names(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        first = await cq.submit("email.send", key="shared", queue="email")
        second = await cq.submit("sms.send", key="shared", queue="sms")
        count = await total(cq)
    assert second.id == first.id
    assert (second.name, second.queue) == ("email.send", "email")
    assert count == 1


async def test_keys_differing_only_in_case_are_different_keys(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        lower = await cq.submit("job", key="abc")
        upper = await cq.submit("job", key="ABC")
    assert lower.id != upper.id


async def test_unkeyed_submits_never_collide(fresh: PluginDatabase) -> None:
    async with fresh.client() as cq:
        ids = {(await cq.submit("job")).id for _ in range(3)}
        count = await total(cq)
    assert len(ids) == 3
    assert count == 3


# --- keys of purged or vanished tasks ------------------------------------------------------


@pytest.mark.parametrize("conflict", CONFLICTS)
async def test_a_key_whose_task_was_purged_is_free(db: Database, conflict: str) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        old = await make_existing(cq, "succeeded")
        clock.advance(1)
        assert await cq.purge() == [old.id]
        assert await cq.get_by_key("k") is None
        new = await cq.submit("new", key="k", conflict=conflict)
        pointee = await cq.get_status_by_key("k")
    assert new.id != old.id
    assert new.status == "queued"
    assert pointee == TaskRef(new.id, "queued")


def delete_task_behind_the_keys_back(db: Database, task_id: str) -> None:
    """Delete a task row without cascading to its key, as a foreign-key-less writer might."""
    if db.kind == "sqlite":
        assert db.path is not None
        conn = sqlite3.connect(db.path, timeout=10)
        try:
            conn.execute("pragma foreign_keys = off")
            with conn:
                conn.execute("delete from cairnq_tasks where id = ?", (task_id,))
            left = conn.execute("select count(*) from cairnq_task_keys").fetchone()[0]
        finally:
            conn.close()
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(db.url, autocommit=True) as conn:
            conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
            conn.execute("set session_replication_role = replica")  # skips FK triggers
            conn.execute("delete from cairnq_tasks where id = %s", (task_id,))
            row = conn.execute("select count(*) from cairnq_task_keys").fetchone()
            left = row[0] if row else 0
    assert left == 1, "the key row should still point at the deleted task"


async def test_a_key_pointing_at_a_vanished_task_counts_as_free(db: Database) -> None:
    async with db.client() as cq:
        old = await make_existing(cq, "queued")
        delete_task_behind_the_keys_back(db, old.id)
        new = await cq.submit("new", key="k", conflict="reject")
        pointee = await cq.get_status_by_key("k")
    assert new.id != old.id
    assert pointee == TaskRef(new.id, "queued")


# --- cancel_by_key / retry_by_key ----------------------------------------------------------


async def test_cancel_by_key_cancels_a_queued_task(db: Database) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, "queued")
        canceled = await cq.cancel_by_key("k")
        stored = await reread(cq, task.id)
    assert canceled is not None
    assert canceled.id == task.id
    assert canceled.status == "canceled"
    assert stored.status == "canceled"


async def test_cancel_by_key_requests_cancel_on_a_running_task(db: Database) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, "running")
        requested = await cq.cancel_by_key("k")
    assert requested is not None
    assert requested.id == task.id
    assert requested.status == "running"
    assert requested.cancel_requested


@pytest.mark.parametrize("status", ["succeeded", "failed", "canceled"])
async def test_cancel_by_key_of_a_finished_task_returns_none(db: Database, status: str) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, status)
        outcome = await cq.cancel_by_key("k")
        stored = await reread(cq, task.id)
    assert outcome is None
    assert stored.to_dict() == task.to_dict()


async def test_cancel_by_key_of_an_unknown_key_returns_none(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job", key="k")
        assert await cq.cancel_by_key("other") is None
        stored = await reread(cq, task.id)
    assert stored.status == "queued"


async def test_cancel_by_key_acts_on_the_task_the_key_points_at_now(db: Database) -> None:
    async with db.client() as cq:
        old = await make_existing(cq, "failed")
        new = await cq.submit("new", key="k")
        canceled = await cq.cancel_by_key("k")
        old_after = await reread(cq, old.id)
    assert canceled is not None
    assert canceled.id == new.id
    assert old_after.to_dict() == old.to_dict()


@pytest.mark.parametrize("status", ["failed", "canceled"])
async def test_retry_by_key_requeues_a_failed_or_canceled_task(db: Database, status: str) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, status)
        retried = await cq.retry_by_key("k")
        pointee = await cq.get_status_by_key("k")
    assert retried is not None
    assert retried.id == task.id
    assert retried.status == "queued"
    assert pointee == TaskRef(task.id, "queued")


async def test_retry_by_key_with_reset_attempt_zeroes_attempts(db: Database) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, "failed")
        retried = await cq.retry_by_key("k", reset_attempt=True)
    assert task.attempt == 1
    assert retried is not None
    assert retried.attempt == 0


@pytest.mark.parametrize("status", ["queued", "running", "succeeded"])
async def test_retry_by_key_of_a_task_that_cannot_retry_returns_none(
    db: Database, status: str
) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, status)
        outcome = await cq.retry_by_key("k")
        stored = await reread(cq, task.id)
    assert outcome is None
    assert stored.to_dict() == task.to_dict()


async def test_retry_by_key_of_an_unknown_key_returns_none(db: Database) -> None:
    async with db.client() as cq:
        assert await cq.retry_by_key("nobody") is None
        assert await cq.stats() == {}


async def test_reuse_returns_a_task_revived_by_retry_by_key(db: Database) -> None:
    async with db.client() as cq:
        task = await make_existing(cq, "failed")
        await cq.retry_by_key("k")
        again = await cq.submit("new", key="k")
    assert again.id == task.id
    assert again.status == "queued"


async def test_wait_by_key_of_an_unknown_key_times_out_saying_so(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait_by_key("missing", timeout_ms=20, poll_ms=10)
    assert excinfo.value.key == "missing"
    assert excinfo.value.task is None
    assert "no task under this key" in str(excinfo.value)


async def test_wait_by_key_returns_the_task_the_key_points_at_when_it_finishes(
    db: Database,
) -> None:
    async with db.client() as cq:
        await make_existing(cq, "failed")
        new = await cq.submit("new", key="k")
        waiter = asyncio.create_task(cq.wait_by_key("k", timeout_ms=60_000))
        await cq.cancel(new.id)
        done = await waiter
    assert done.id == new.id
    assert done.status == "canceled"


# --- concurrency ---------------------------------------------------------------------------


async def test_concurrent_reuse_submits_leave_one_task_per_key(db: Database) -> None:
    keys = [f"key-{i % 4}" for i in range(20)]
    async with db.client() as cq:
        tasks = await asyncio.gather(
            *(cq.submit("job", {"i": i}, key=k) for i, k in enumerate(keys))
        )
        pointees = {k: await cq.get_by_key(k) for k in set(keys)}
        count = await total(cq)
    ids_by_key: dict[str, set[str]] = {}
    for key, task in zip(keys, tasks, strict=True):
        ids_by_key.setdefault(key, set()).add(task.id)
    assert count == 4
    assert all(len(ids) == 1 for ids in ids_by_key.values())
    for key, ids in ids_by_key.items():
        pointee = pointees[key]
        assert pointee is not None
        assert {pointee.id} == ids


async def test_concurrent_reject_submits_let_exactly_one_through(db: Database) -> None:
    async with db.client() as cq:
        outcomes = await asyncio.gather(
            *(cq.submit("job", {"i": i}, key="once", conflict="reject") for i in range(20)),
            return_exceptions=True,
        )
        pointee = await cq.get_by_key("once")
        count = await total(cq)
    winners = [o for o in outcomes if isinstance(o, Task)]
    losers = [o for o in outcomes if isinstance(o, AlreadyExists)]
    assert len(winners) == 1
    assert len(losers) == 19
    assert all(e.key == "once" for e in losers)
    assert count == 1
    assert pointee is not None
    assert pointee.id == winners[0].id


async def test_concurrent_replace_submits_leave_exactly_one_live_task(db: Database) -> None:
    async with db.client() as cq:
        await asyncio.gather(*(cq.submit("job", key="k", conflict="replace") for _ in range(20)))
        stats = await cq.stats()
        live = await cq.list(status="queued")
        pointee = await cq.get_status_by_key("k")
    assert stats["default"]["queued"] == 1
    assert stats["default"]["canceled"] == 19
    assert pointee == TaskRef(live[0].id, "queued")


def submit_from_threads(
    db: Database, keys_per_thread: list[list[str]], conflict: str
) -> list[Task | BaseException]:
    """Each thread has its own SyncCairnQ; all start submitting together."""
    clients: list[SyncCairnQ] = [db.sync_client() for _ in keys_per_thread]
    for client in clients:
        client.open()
    start = threading.Barrier(len(clients))

    def run(client: SyncCairnQ, keys: list[str]) -> list[Task | BaseException]:
        start.wait()
        out: list[Task | BaseException] = []
        for key in keys:
            try:
                out.append(client.submit("job", key=key, conflict=conflict))
            except Exception as exc:
                out.append(exc)
        return out

    try:
        with ThreadPoolExecutor(max_workers=len(clients)) as pool:
            pairs = zip(clients, keys_per_thread, strict=True)
            futures = [pool.submit(run, client, keys) for client, keys in pairs]
            return [item for f in futures for item in f.result()]
    finally:
        for client in clients:
            client.close()


def test_reuse_submits_from_four_threads_leave_one_task_per_key(db: Database) -> None:
    keys = [f"key-{i}" for i in range(5)]
    outcomes = submit_from_threads(db, [keys] * 4, "reuse")
    with db.sync_client() as cq:
        count = sum(sum(s.values()) for s in cq.stats().values())
        pointees = {k: cq.get_status_by_key(k) for k in keys}
    assert all(isinstance(o, Task) for o in outcomes), outcomes
    ids_by_key: dict[str, set[str]] = {}
    for key, task in zip(keys * 4, outcomes, strict=True):
        assert isinstance(task, Task)
        ids_by_key.setdefault(key, set()).add(task.id)
    assert count == 5
    for key in keys:
        assert len(ids_by_key[key]) == 1
        pointee = pointees[key]
        assert pointee is not None
        assert {pointee.id} == ids_by_key[key]


def test_reject_submits_from_four_threads_let_exactly_one_through(db: Database) -> None:
    outcomes = submit_from_threads(db, [["once"] * 5] * 4, "reject")
    with db.sync_client() as cq:
        count = sum(sum(s.values()) for s in cq.stats().values())
        pointee = cq.get_status_by_key("once")
    winners = [o for o in outcomes if isinstance(o, Task)]
    losers = [o for o in outcomes if isinstance(o, AlreadyExists)]
    assert len(winners) == 1
    assert len(losers) == 19, outcomes
    assert count == 1
    assert pointee == TaskRef(winners[0].id, "queued")
