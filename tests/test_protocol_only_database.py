"""A database only the protocol's own migrations built (0001..0010, as the TypeScript
SDK migrates it), opened by a cairnq client and worker with ``migrate=False``.

Tasks are served; each feature with tables of its own steps aside, saying so in
one line, and its calls that need the tables raise ``SchemaIncomplete`` naming the
migration ``cairnq migrate`` would add (``docs/coming-from/reference-sdk.md``, "A database only the
protocol migrated"). Retention there: ``tests/test_without_extensions.py``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    Limit,
    SchemaIncomplete,
    Snooze,
    Task,
    TaskContext,
    Worker,
    kernel,
)
from cairnq.extensions import Limits
from cairnq.workflows import Graph

from ._db import Database
from ._waits import eventually
from .test_without_extensions import protocol_only

PROTOCOL = {
    "sqlite": [
        "0001_init.sql",
        "0002_purge_index.sql",
        "0004_lease_index.sql",
        "0005_clear_terminal_lease.sql",
        "0006_claim_name_index.sql",
        "0007_purge_status_index.sql",
        "0008_claim_due_index.sql",
        "0009_purge_queue_index.sql",
        "0010_drop_status_index.sql",
    ],
}
PROTOCOL["postgres"] = sorted([*PROTOCOL["sqlite"], "0003_notify.sql"])

STEP_ASIDE = (
    "this database lacks cairnq's migrations x0006_limits.sql, x0007_flow.sql, "
    "x0008_workflows.sql, x0009_steps.sql, x0010_dependencies_satisfied.sql, "
    "x0017_batches.sql, x0019_waits.sql, x0020_policies.sql, x0021_pauses_until.sql, "
    "x0023_logs.sql: limits, pauses, workflows, "
    "snooze, steps, history, batches, waits, policies, logs step aside "
    "until it has them "
    "(run `cairnq migrate`)"
)
PRESENCE = (
    "this database lacks table cairnq_workers (migration x0002_workers.sql), so this "
    "worker publishes no presence and no task names: it shows only through the tasks it "
    "runs (run `cairnq migrate` to add it)"
)
WORKFLOW_TABLES = "migrations x0008_workflows.sql, x0010_dependencies_satisfied.sql"


@pytest.fixture
def protocol_db(db: Database) -> Database:
    """``db`` rebuilt with the protocol's own migrations only."""
    protocol_only(db)
    return db


@pytest.fixture
async def cq(protocol_db: Database) -> AsyncIterator[CairnQ]:
    async with protocol_db.client(migrate=False) as client:
        yield client


def worker_on(db: Database, **options: Any) -> Worker:
    return db.worker(migrate=False, poll_interval_ms=20, **options)


async def ended(cq: CairnQ, task: Task) -> Task:
    """``task`` once it has ended (failed tasks included)."""
    return await eventually(
        lambda: _if_ended(cq, task.id), f"task {task.name} ending", timeout=10.0
    )


async def _if_ended(cq: CairnQ, task_id: str) -> Task | None:
    task = await cq.get(task_id)
    return task if task is not None and task.is_terminal else None


def lines(caplog: pytest.LogCaptureFixture, words: str) -> list[logging.LogRecord]:
    """The records whose message holds ``words``."""
    return [r for r in caplog.records if words in r.getMessage()]


def one_line(caplog: pytest.LogCaptureFixture, words: str) -> logging.LogRecord:
    """The one record holding ``words``: one line, no traceback."""
    found = lines(caplog, words)
    assert len(found) == 1, [r.getMessage() for r in found]
    assert "\n" not in found[0].getMessage() and found[0].exc_info is None
    return found[0]


async def refused(call: Callable[[], Awaitable[object]], *migrations: str) -> str:
    """The one-line ``SchemaIncomplete`` message ``call`` raises; it names ``migrations``
    and ``cairnq migrate``."""
    with pytest.raises(SchemaIncomplete) as raised:
        await call()
    message = str(raised.value)
    assert "\n" not in message and "cairnq migrate" in message
    for migration in migrations:
        assert migration in message
    return message


# --- the database and the worker -------------------------------------------------------


async def test_opening_without_migrating_leaves_only_the_protocol_migrations(
    protocol_db: Database, cq: CairnQ
) -> None:
    worker = worker_on(protocol_db)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    await worker.run(until_idle=True)
    applied = await cq.backend.arun(kernel.applied_migrations(), write=False)
    assert sorted(applied) == PROTOCOL[protocol_db.kind]


async def test_a_client_and_worker_opened_without_migrating_serve_tasks(
    protocol_db: Database, cq: CairnQ
) -> None:
    worker = worker_on(protocol_db)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return f"done {payload['n']}"

    tasks = [await cq.submit("job", {"n": n}) for n in range(3)]
    async with worker.background():
        done = [await cq.wait(t.id, timeout_ms=10_000, poll_ms=20) for t in tasks]
    await worker.close()
    assert [(t.status, t.result) for t in done] == [("succeeded", f"done {n}") for n in range(3)]


async def test_a_worker_names_the_features_that_step_aside_in_one_info_line(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    worker = worker_on(protocol_db)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    await worker.run(until_idle=True)
    line = one_line(caplog, "step aside")
    assert (line.name, line.levelno, line.getMessage()) == (
        "cairnq.worker",
        logging.INFO,
        STEP_ASIDE,
    )


async def test_presence_steps_aside_in_one_warning_line(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    worker = worker_on(protocol_db)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    task = await cq.submit("job")
    async with worker.background():
        await ended(cq, task)
        line = await eventually(lambda: lines(caplog, "cairnq_workers"), "presence's line")
    await worker.close()
    assert len(line) == 1
    line = one_line(caplog, "cairnq_workers")
    assert (line.name, line.levelno, line.getMessage()) == (
        "cairnq.worker",
        logging.WARNING,
        PRESENCE,
    )


async def test_presence_reads_see_a_worker_only_through_the_task_it_holds(
    protocol_db: Database, cq: CairnQ
) -> None:
    worker = worker_on(protocol_db)
    started, release = asyncio.Event(), asyncio.Event()

    @worker.task
    async def job(ctx: TaskContext) -> None:
        started.set()
        await release.wait()

    task = await cq.submit("job")
    idle = await cq.presence.workers()
    async with worker.background():
        await asyncio.wait_for(started.wait(), 10)
        [seen] = await cq.presence.workers()
        unserved = await cq.presence.unserved()
        release.set()
        await ended(cq, task)
    await worker.close()
    assert (idle, unserved) == ([], [])
    assert [t.id for t in seen.running] == [task.id]
    assert (seen.worker_id, seen.queues, seen.last_seen_ms) == (worker.worker_id, None, None)


async def test_submit_warn_unserved_says_once_in_one_line_it_can_tell_nothing(
    cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    tasks = [await cq.submit("job", warn_unserved=True) for _ in range(2)]
    line = one_line(caplog, "warn_unserved")
    assert (line.name, line.levelno) == ("cairnq.client", logging.WARNING)
    assert "x0002_workers.sql" in line.getMessage() and "checks nothing" in line.getMessage()
    assert [t.status for t in tasks] == ["queued", "queued"]


async def test_a_worker_serving_tasks_warns_of_nothing_but_presence(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    reported: list[BaseException] = []
    worker = worker_on(protocol_db, on_error=lambda exc, context: reported.append(exc))

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    tasks = [await cq.submit("job") for _ in range(3)]
    async with worker.background():
        for task in tasks:
            await ended(cq, task)
        # Every periodic part of the worker has had a turn (the workflows' sweep runs at once).
        await eventually(lambda: lines(caplog, "cairnq_workers"), "presence's line")
    await worker.close()
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [PRESENCE]
    assert reported == []


# --- schedules --------------------------------------------------------------------------


async def test_a_worker_declaring_a_schedule_says_in_one_line_it_evaluates_none(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    worker = worker_on(protocol_db)
    worker.schedule("tick", "job", every="10s")

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    await worker.run(until_idle=True)
    line = one_line(caplog, "x0005_schedules.sql")
    assert (line.name, line.levelno) == ("cairnq.schedules", logging.WARNING)
    assert "evaluates no schedules and the 1 it declares are not stored" in line.getMessage()
    assert await cq.list() == []


async def test_a_worker_declaring_no_schedule_says_in_one_info_line_it_evaluates_none(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    worker = worker_on(protocol_db)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        pass

    await worker.run(until_idle=True)
    line = one_line(caplog, "x0005_schedules.sql")
    assert (line.name, line.levelno, line.getMessage()) == (
        "cairnq.schedules",
        logging.INFO,
        "this database lacks cairnq's schedules (migration x0005_schedules.sql), so this "
        "worker evaluates no schedules (run `cairnq migrate` to add them)",
    )


async def test_client_schedule_calls_raise_schema_incomplete_naming_x0005(cq: CairnQ) -> None:
    for call in (
        lambda: cq.schedules.add("tick", "job", every="10s"),
        lambda: cq.schedules.get("tick"),
        cq.schedules.list,
        lambda: cq.schedules.pause("tick"),
        lambda: cq.schedules.resume("tick"),
        lambda: cq.schedules.remove("tick"),
        lambda: cq.schedules.history("tick"),
        cq.schedules.run_due,
    ):
        await refused(call, "x0005_schedules.sql")


# --- limits -----------------------------------------------------------------------------


async def test_client_limit_calls_raise_schema_incomplete_naming_x0006(cq: CairnQ) -> None:
    for call in (
        lambda: cq.limits.set(Limit.concurrency(1, queue="default")),
        cq.limits.list,
        lambda: cq.limits.remove("limit_x"),
        cq.limits.usage,
    ):
        await refused(call, "x0006_limits.sql")


async def test_a_worker_declaring_limits_refuses_to_start_naming_x0006(
    protocol_db: Database,
) -> None:
    worker = worker_on(protocol_db, extensions=[Limits([Limit.concurrency(1, queue="default")])])
    message = await refused(lambda: worker.run(until_idle=True), "x0006_limits.sql")
    await worker.close()
    assert "declares 1 limit(s)" in message


# --- pauses and snoozes -------------------------------------------------------------------


async def test_client_pause_calls_raise_schema_incomplete_naming_x0007(cq: CairnQ) -> None:
    for call in (
        lambda: cq.pauses.pause_queue("default"),
        lambda: cq.pauses.resume_queue("default"),
        lambda: cq.pauses.pause_task("job"),
        lambda: cq.pauses.resume_task("job"),
        cq.pauses.list,
    ):
        await refused(call, "x0007_flow.sql")


async def test_client_snooze_reads_raise_schema_incomplete_naming_x0007(cq: CairnQ) -> None:
    task = await cq.submit("job")
    await refused(lambda: cq.snooze.get(task.id), "x0007_flow.sql")


async def test_a_raised_snooze_fails_the_attempt_for_retry_saying_why_in_one_line(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq")
    worker = worker_on(protocol_db, retry_backoff_ms=10, retry_backoff_max_ms=10)
    errors: list[Any] = []

    @worker.task
    async def job(ctx: TaskContext) -> None:
        if ctx.attempt == 1:
            raise Snooze(60)
        errors.append(ctx.task.error)

    task = await cq.submit("job", max_attempts=2)
    async with worker.background():
        done = await ended(cq, task)
    await worker.close()
    assert (done.status, done.attempt) == ("succeeded", 2)
    [error] = errors
    assert (error["type"], error["code"]) == ("SchemaIncomplete", "snooze_unavailable")
    line = one_line(caplog, f"{task.id} attempt 1/2")
    assert line.levelno == logging.WARNING
    assert re.fullmatch(
        rf"task job {task.id} attempt 1/2 on queue default: retrying in \d+ms after [\d.]+m?s: "
        rf"SchemaIncomplete: {re.escape(error['message'])}",
        line.getMessage(),
    )


async def test_ctx_snooze_raises_schema_incomplete_naming_x0007(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    await handler_call_refused(
        protocol_db, cq, caplog, lambda ctx: ctx.snooze(60), "x0007_flow.sql"
    )


# --- workflows ----------------------------------------------------------------------------


async def test_client_workflow_calls_raise_schema_incomplete_naming_x0008_and_x0010(
    cq: CairnQ,
) -> None:
    first = await cq.submit("job")
    for call in (
        lambda: cq.submit("job", depends_on=[first]),
        lambda: cq.submit_graph(Graph().add("a", "job").add("b", "job", after=["a"])),
        lambda: cq.workflows.submit(Graph().add("a", "job").add("b", "job", after=["a"])),
        lambda: cq.workflows.dependencies(first.id),
    ):
        await refused(call, WORKFLOW_TABLES)


async def test_a_workflow_read_shows_the_tasks_of_a_root_without_edges(cq: CairnQ) -> None:
    root = await cq.submit("job")
    child = await cq.submit("job", parent_id=root.id, root_id=root.id)
    workflow = await cq.workflows.get(child.id)
    assert workflow is not None
    assert (workflow.root_id, list(workflow.tasks), workflow.edges) == (
        root.id,
        [root.id, child.id],
        [],
    )


async def test_ctx_spawn_raises_schema_incomplete_naming_x0008_and_x0010(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    await handler_call_refused(
        protocol_db, cq, caplog, lambda ctx: ctx.spawn("child"), WORKFLOW_TABLES
    )


async def test_ctx_gather_raises_schema_incomplete_naming_x0008_and_x0010(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    child = await cq.submit("child")
    await handler_call_refused(
        protocol_db, cq, caplog, lambda ctx: ctx.gather([child]), WORKFLOW_TABLES
    )


# --- steps and history --------------------------------------------------------------------


async def test_ctx_step_raises_schema_incomplete_naming_x0009(
    protocol_db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    await handler_call_refused(
        protocol_db, cq, caplog, lambda ctx: ctx.step("one", lambda: 1), "x0009_steps.sql"
    )


async def test_client_step_and_attempt_reads_raise_schema_incomplete_naming_x0009(
    cq: CairnQ,
) -> None:
    task = await cq.submit("job")
    for call in (lambda: cq.steps.list(task.id), lambda: cq.attempts.list(task.id)):
        await refused(call, "x0009_steps.sql")


# --- a cairnq call in a handler that the database cannot serve ----------------------------


async def handler_call_refused(
    db: Database,
    cq: CairnQ,
    caplog: pytest.LogCaptureFixture,
    call: Callable[[TaskContext], Awaitable[object]],
    migrations: str,
) -> None:
    """A handler making ``call`` fails its attempt with the ``SchemaIncomplete`` it
    raises, logged in one line (the stored error keeps the traceback)."""
    caplog.set_level(logging.INFO, logger="cairnq")
    caught: list[str] = []
    worker = worker_on(db)

    @worker.task
    async def job(ctx: TaskContext) -> None:
        try:
            await call(ctx)
        except SchemaIncomplete as exc:
            caught.append(str(exc))
            raise

    task = await cq.submit("job", max_attempts=1)
    async with worker.background():
        done = await ended(cq, task)
    await worker.close()
    assert len(caught) == 1 and migrations in caught[0] and "cairnq migrate" in caught[0]
    assert done.status == "failed" and done.error is not None
    assert (done.error["type"], done.error["message"]) == ("SchemaIncomplete", caught[0])
    assert "Traceback" in done.error["details"]["traceback"]
    line = one_line(caplog, f"{task.id} attempt 1/1")
    assert line.levelno == logging.ERROR
    assert re.fullmatch(
        rf"task job {task.id} attempt 1/1 on queue default: failed after [\d.]+m?s: "
        rf"SchemaIncomplete: {re.escape(caught[0])}",
        line.getMessage(),
    )
