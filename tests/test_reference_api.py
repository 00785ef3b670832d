"""Code written for the reference Python SDK runs on cairnq: its spellings beside cairnq's.

Each test uses the reference SDK's form (protocol.md section 5) and checks that
cairnq's own form is not disturbed where both exist.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from pathlib import Path
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    InvalidArgument,
    Retention,
    RetentionRule,
    SyncCairnQ,
    SyncTaskContext,
    Task,
    TaskContext,
    TaskRef,
    TaskTimeout,
)
from cairnq.testing import FakeClock

from ._db import Database


async def settled(cq: CairnQ, task_id: str) -> Task:
    return await cq.wait(task_id, timeout_ms=10_000, poll_ms=20, max_poll_ms=50)


# --- 1: connect() on an instance ----------------------------------------------------------


async def test_connect_on_a_sqlite_client_opens_it_and_returns_it(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    cq = CairnQ.sqlite(path)
    connected = await cq.connect()
    try:
        assert connected is cq
        assert path.exists()
    finally:
        await cq.close()


async def test_connect_on_a_client_instance_starts_its_retention(db: Database) -> None:
    cq = CairnQ(db.backend(), retention=Retention(60_000))
    assert await cq.connect() is cq
    try:
        assert cq.sweeper is not None and cq.sweeper.running
        assert (await cq.submit("job")).status == "queued"
    finally:
        await cq.close()
    assert not cq.sweeper.running


def test_connect_on_a_sync_client_instance_opens_it_and_returns_it(db: Database) -> None:
    cq = SyncCairnQ(db.backend(), retention=Retention(60_000))
    assert cq.connect() is cq
    try:
        assert cq.sweeper is not None and cq.sweeper.running
    finally:
        cq.close()


async def test_connect_on_the_class_still_builds_a_client_for_a_url(tmp_path: Path) -> None:
    cq = CairnQ.connect(f"sqlite:///{tmp_path / 'tasks.db'}", max_json_depth=8)
    try:
        assert isinstance(cq, CairnQ)
        assert (await cq.submit("job")).status == "queued"
    finally:
        await cq.close()


# --- 2: status properties -----------------------------------------------------------------


@pytest.mark.parametrize("status", ["queued", "running", "succeeded", "failed", "canceled"])
async def test_task_status_properties_have_the_reference_names(db: Database, status: str) -> None:
    async with db.client() as cq:
        task = dataclasses.replace(await cq.submit("job"), status=status)  # type: ignore[arg-type]
    spelled = {
        s: getattr(task, s) for s in ("queued", "running", "succeeded", "failed", "canceled")
    }
    assert spelled == {s: s == status for s in spelled}
    assert spelled[status] == getattr(task, f"is_{status}")


async def test_task_ref_is_terminal_follows_the_status(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        queued = await cq.get_status(task.id)
        await cq.cancel(task.id)
        canceled = await cq.get_status(task.id)
    assert queued is not None and not queued.is_terminal
    assert canceled is not None and canceled.is_terminal


def test_task_ref_from_row_reads_the_id_and_status() -> None:
    ref = TaskRef.from_row({"id": "task_01J0000000000000000000000", "status": "failed", "x": 1})
    assert ref == TaskRef("task_01J0000000000000000000000", "failed")


# --- 6: keyword spellings -----------------------------------------------------------------


async def test_submit_takes_the_task_name_as_name(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit(name="email.send", payload={"to": "a"}, queue="mail")
    assert (task.name, task.payload, task.queue) == ("email.send", {"to": "a"}, "mail")


def test_sync_submit_takes_the_task_name_as_name(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit(name="email.send")
    assert task.name == "email.send"


async def test_submit_with_both_task_and_name_is_an_invalid_argument(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="task='a' and name='b'"):
            await cq.submit("a", name="b")
        assert await cq.list() == []


async def test_call_takes_the_task_name_as_name(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def add(ctx: TaskContext, payload: dict[str, int]) -> int:
        return payload["a"] + payload["b"]

    async with db.client() as cq, worker.background():
        assert await cq.call(name="add", payload={"a": 1, "b": 2}) == 3
    await worker.close()


async def test_ctx_submit_takes_the_child_name_as_name(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def parent(ctx: TaskContext) -> str:
        child = await ctx.submit(name="child", payload={"n": 1})
        return child.id

    async with db.client() as cq, worker.background():
        done = await settled(cq, (await cq.submit("parent")).id)
        child = await cq.get(done.result)
    await worker.close()
    assert done.status == "succeeded"
    assert child is not None and (child.name, child.parent_id) == ("child", done.id)


async def test_worker_task_decorator_takes_the_name_as_a_keyword(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task(name="reports.build")
    async def build(ctx: TaskContext, payload: Any) -> str:
        return ctx.name

    async with db.client() as cq, worker.background():
        assert await cq.call("reports.build") == "reports.build"
    await worker.close()


def test_worker_task_with_the_name_given_twice_is_an_invalid_argument(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument, match="task='a' and name='b'"):
        worker.task("a", name="b")


async def test_background_takes_a_concurrency(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=1)

    @worker.task
    async def job(ctx: TaskContext) -> int:
        return 1

    async with worker.background(concurrency=3):
        running_with = worker.concurrency
    await worker.close()
    assert running_with == 3


def test_serve_takes_a_concurrency(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=1)

    @worker.task
    def job(ctx: SyncTaskContext) -> str:
        return "done"

    with db.sync_client() as cq:
        task = cq.submit("job")
        worker.serve(concurrency=2, until_idle=True)
        done = cq.get(task.id)
    assert worker.concurrency == 2
    assert done is not None and done.result == "done"


# --- 7: behaviour -------------------------------------------------------------------------


async def test_ctx_progress_returns_the_updated_task(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def job(ctx: TaskContext) -> dict[str, Any]:
        task = await ctx.progress(0.25, "a quarter")
        return {"id": task.id, "progress": task.progress, "message": task.message}

    async with db.client() as cq, worker.background():
        submitted = await cq.submit("job")
        done = await settled(cq, submitted.id)
    await worker.close()
    assert done.result == {"id": submitted.id, "progress": 0.25, "message": "a quarter"}


async def test_sync_ctx_progress_returns_the_updated_task(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    def job(ctx: SyncTaskContext) -> list[Any]:
        task = ctx.progress(None, "working")
        return [task.status, task.message]

    async with db.client() as cq, worker.background():
        done = await settled(cq, (await cq.submit("job")).id)
    await worker.close()
    assert done.result == ["running", "working"]


async def test_batch_of_one_delivers_a_list_of_one_context(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task("one", batch=1)
    async def one(contexts: list[TaskContext]) -> dict[str, Any]:
        return {ctx.task_id: [type(contexts).__name__, len(contexts)] for ctx in contexts}

    async with db.client() as cq, worker.background():
        done = await settled(cq, (await cq.submit("one")).id)
    await worker.close()
    assert done.result == ["list", 1]


def test_task_needs_six_fields_and_defaults_the_other_seventeen() -> None:
    task = Task(
        id="task_01J0000000000000000000000",
        name="job",
        status="queued",
        run_at_ms=5,
        created_at_ms=5,
        updated_at_ms=5,
    )
    assert (task.queue, task.payload, task.metadata) == ("default", None, {})
    assert (task.attempt, task.max_attempts, task.priority) == (0, 3, 0)
    assert task.error is None and task.completed_at_ms is None and task.root_id is None
    assert list(task.to_dict())[:4] == ["id", "name", "queue", "status"]


def test_task_without_its_times_names_exactly_those_three_as_missing() -> None:
    missing = "missing 3 required positional arguments: 'run_at_ms', 'created_at_ms', and"
    with pytest.raises(TypeError, match=missing):
        Task(id="task_01J0000000000000000000000", name="job", status="queued")  # type: ignore[call-arg]


def test_retention_rules_can_be_called_as_a_method() -> None:
    policy = Retention(older_than_ms={"succeeded": 1000, "failed": 2000})
    assert policy.rules() == (
        RetentionRule(1000, status="succeeded"),
        RetentionRule(2000, status="failed"),
    )
    assert policy.rules() == policy.rules


def test_retention_keeps_older_than_ms_as_given() -> None:
    assert Retention(older_than_ms=5000).older_than_ms == 5000


def test_task_context_imports_from_cairnq_context() -> None:
    module = importlib.import_module("cairnq.context")
    assert module.TaskContext is TaskContext


# --- 9: error bases -----------------------------------------------------------------------


async def test_except_oserror_does_not_catch_a_wait_timeout(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("job")
        caught_by = ""
        try:
            await cq.wait(task.id, timeout_ms=0)
        except OSError:
            caught_by = "OSError"
        except TaskTimeout:
            caught_by = "TaskTimeout"
    assert caught_by == "TaskTimeout"


# --- 11: a wait on a delayed task ---------------------------------------------------------


async def test_wait_timeout_on_a_delayed_task_says_when_it_is_due(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        task = await cq.submit("report.build", delay_ms=60_000)
        clock.advance(302)
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout_ms=0)
    assert "still queued (attempt 0/3), next run in ~59s: it was" in str(excinfo.value)


def test_connect_on_an_instance_given_a_url_says_to_call_it_on_the_class(tmp_path: Path) -> None:
    cq = SyncCairnQ.sqlite(tmp_path / "t.db")
    with pytest.raises(InvalidArgument, match=r"call SyncCairnQ.connect\(url\)"):
        cq.connect("sqlite:///other.db")
    assert not (tmp_path / "other.db").exists()


# --- 12: module-level names the reference's own tests import ------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "cairnq._sql.find_protocol_root",
        "cairnq._sql.load_statements",
        "cairnq._sql.load_migrations",
        "cairnq._ids.now_ms",
        "cairnq._wait.next_poll_ms",
        "cairnq.backpressure.QueueDepthGate",
    ],
)
def test_the_reference_module_level_names_import(path: str) -> None:
    module, name = path.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name))


def test_now_ms_is_the_wall_clock_in_epoch_milliseconds() -> None:
    now_ms = importlib.import_module("cairnq._ids").now_ms
    before = time.time_ns() // 1_000_000
    value = now_ms()
    after = time.time_ns() // 1_000_000
    assert type(value) is int
    assert before <= value <= after


@pytest.mark.parametrize(
    ("current", "ceiling", "expected"),
    [
        (100, 500, 150),
        (150, 500, 225),
        (2, 500, 3),
        (400, 500, 500),
        (8, 9, 9),
        (500, 500, 500),
        (1, 500, 2),
        (0, 500, 1),
        (3, 9, 4),
    ],
)
def test_next_poll_ms_grows_by_half_at_least_one_at_most_the_ceiling(
    current: int, ceiling: int, expected: int
) -> None:
    next_poll_ms = importlib.import_module("cairnq._wait").next_poll_ms
    assert next_poll_ms(current, ceiling) == expected


# --- 13: the reference's phrases in cairnq's messages -------------------------------------


async def test_wait_by_key_with_no_task_under_the_key_says_so_in_the_reference_words(
    db: Database,
) -> None:
    async with db.client() as cq:
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait_by_key("missing", timeout_ms=20, poll_ms=10)
    assert str(excinfo.value) == (
        "key missing did not finish within 20ms: "
        "no task under this key — never submitted, or already purged?"
    )
