"""The worker's log lines: what an operator reads about each task, at which level."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import pytest

from cairnq import TaskContext, TaskError

from ._db import Database


def worker_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "cairnq.worker"]


def about(caplog: pytest.LogCaptureFixture, task_id: str) -> list[logging.LogRecord]:
    return [r for r in worker_records(caplog) if getattr(r, "task_id", None) == task_id]


async def logged(caplog: pytest.LogCaptureFixture, task_id: str) -> None:
    while not about(caplog, task_id):
        await asyncio.sleep(0.01)


async def test_a_task_start_is_logged_at_debug_with_its_name_id_attempt_and_queue(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, queues=["emails"])

    @worker.task("email.send")
    async def send(ctx: TaskContext, payload: Any) -> None: ...

    with caplog.at_level(logging.DEBUG, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("email.send", {}, queue="emails", max_attempts=4)
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    [started] = [r for r in about(caplog, task.id) if r.levelno == logging.DEBUG]
    assert started.getMessage() == f"task email.send {task.id} attempt 1/4 on queue emails: started"
    assert (started.task_name, started.queue, started.attempt) == ("email.send", "emails", 1)  # type: ignore[attr-defined]


async def test_a_task_end_is_logged_at_info_with_its_outcome_and_duration(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task("email.send")
    async def send(ctx: TaskContext, payload: Any) -> str:
        return "sent"

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("email.send", {})
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    [ended] = about(caplog, task.id)
    assert ended.levelno == logging.INFO
    assert ended.getMessage().startswith(
        f"task email.send {task.id} attempt 1/3 on queue default: succeeded after "
    )
    assert ended.outcome == "succeeded"  # type: ignore[attr-defined]
    assert ended.duration_ms >= 0  # type: ignore[attr-defined]
    assert ended.exc_info is None


async def test_a_handler_exception_followed_by_a_retry_is_logged_at_warning_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task("flaky")
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("kaboom")
        return "ok"

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("flaky", {})
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    first, second = about(caplog, task.id)
    assert first.levelno == logging.WARNING
    assert "attempt 1/3" in first.getMessage()
    assert "retrying in " in first.getMessage()
    assert first.getMessage().endswith("RuntimeError: kaboom")
    assert first.outcome == "retrying"  # type: ignore[attr-defined]
    assert first.exc_info is None
    assert (second.levelno, second.outcome) == (logging.INFO, "succeeded")  # type: ignore[attr-defined]


async def test_a_retry_carries_the_traceback_when_the_logger_is_at_debug(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task("flaky")
    async def flaky(ctx: TaskContext, payload: Any) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("kaboom")
        return "ok"

    with caplog.at_level(logging.DEBUG, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("flaky", {})
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    [retried] = [r for r in about(caplog, task.id) if r.levelno == logging.WARNING]
    assert retried.exc_info is not None and isinstance(retried.exc_info[1], RuntimeError)


async def test_a_batch_handler_exception_is_logged_with_one_traceback_for_the_batch(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, concurrency=3)

    @worker.task("embed", batch=3)
    async def embed(contexts: list[TaskContext]) -> None:
        raise RuntimeError("kaboom")

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq:
            tasks = await cq.submit_many([{"task": "embed", "max_attempts": 1}] * 3)
            async with worker.background():
                for task in tasks:
                    await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    ends = [r for t in tasks for r in about(caplog, t.id)]
    assert [r.levelno for r in ends] == [logging.ERROR] * 3
    assert all(r.getMessage().endswith("RuntimeError: kaboom") for r in ends)
    assert len([r for r in ends if r.exc_info is not None]) == 1


async def test_a_final_handler_exception_is_logged_at_error_with_its_traceback(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task("bad")
    async def bad(ctx: TaskContext, payload: Any) -> None:
        raise TaskError("bad address", code="bad_address")

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("bad", {})
            await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    [ended] = about(caplog, task.id)
    assert ended.levelno == logging.ERROR
    assert f"task bad {task.id} attempt 1/3 on queue default: failed after " in ended.getMessage()
    assert ended.outcome == "failed"  # type: ignore[attr-defined]
    assert ended.exc_info is not None and isinstance(ended.exc_info[1], TaskError)


def explode_deep(depth: int) -> None:
    if depth:
        explode_deep(depth - 1)
    raise LookupError("no such row")


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_final_failure_traceback_starts_at_the_handler_frame(
    db: Database, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    worker = db.worker(poll_interval_ms=20)

    if kind == "async":

        @worker.task("bad")
        async def bad(ctx: TaskContext, payload: Any) -> None:
            explode_deep(2)

    else:

        @worker.task("bad")
        def bad_sync(ctx: Any, payload: Any) -> None:
            explode_deep(2)

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("bad", {}, max_attempts=1)
            done = await cq.wait(task.id, timeout_ms=10_000)
        await worker.close()
    [ended] = about(caplog, task.id)
    assert ended.exc_info is not None
    text = logging.Formatter().formatException(ended.exc_info)
    frames = [line.strip() for line in text.splitlines() if line.strip().startswith("File ")]
    assert frames[0].endswith(", in bad" if kind == "async" else ", in bad_sync"), text
    assert [f for f in frames if "explode_deep" in f] != []
    assert "cairnq" not in text.replace(__file__, ""), text
    assert done.error is not None
    assert done.error["details"]["traceback"].startswith(
        "Traceback (most recent call last):\n" + text.splitlines()[1]
    )


async def test_a_misuse_of_the_api_is_logged_once_at_error_without_a_traceback(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task("nap")
    async def nap(ctx: TaskContext, payload: Any) -> None:
        await ctx.snooze(-5)

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("nap", {}, max_attempts=3)
            await cq.wait(task.id, timeout_ms=10_000)
            await asyncio.wait_for(logged(caplog, task.id), 10)
        await worker.close()
    [ended] = about(caplog, task.id)
    assert (ended.levelno, ended.outcome, ended.exc_info) == (logging.ERROR, "failed", None)  # type: ignore[attr-defined]
    assert ended.getMessage().startswith(
        f"task nap {task.id} attempt 1/3 on queue default: failed after "
    )
    assert ended.getMessage().endswith(
        ": InvalidArgument: snooze delay must be 0 seconds or more, got -5; "
        "not retried: the same call fails the same way on every attempt"
    )


async def test_a_canceled_task_end_is_logged_as_canceled(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20)
    started = asyncio.Event()

    @worker.task("slow")
    async def slow(ctx: TaskContext, payload: Any) -> None:
        started.set()
        while not await ctx.canceled():
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq, worker.background():
            task = await cq.submit("slow", {})
            await asyncio.wait_for(started.wait(), 10)
            await cq.cancel(task.id)
            await cq.wait(task.id, timeout_ms=10_000)
            await asyncio.wait_for(logged(caplog, task.id), 10)
        await worker.close()
    [ended] = about(caplog, task.id)
    assert (ended.levelno, ended.outcome) == (logging.INFO, "canceled")  # type: ignore[attr-defined]
    assert ": canceled after " in ended.getMessage()


async def test_a_drain_timeout_lists_the_tasks_it_hands_back_at_warning(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, drain_timeout="50ms", concurrency=2)
    started = 0
    both = asyncio.Event()

    @worker.task("stuck")
    async def stuck(ctx: TaskContext, payload: Any) -> None:
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with db.client() as cq:
            tasks = [await cq.submit("stuck", {"n": n}) for n in range(2)]
            async with worker.background():
                await asyncio.wait_for(both.wait(), 10)
            after = [await cq.get(t.id) for t in tasks]
        await worker.close()
    [handed] = [r for r in worker_records(caplog) if "handing them back" in r.getMessage()]
    assert handed.levelno == logging.WARNING
    for task in tasks:
        assert f"{task.id} (stuck)" in handed.getMessage()
    assert sorted(handed.task_ids) == sorted(t.id for t in tasks)  # type: ignore[attr-defined]
    assert [t.status for t in after if t is not None] == ["queued", "queued"]


async def test_worker_start_is_logged_with_its_database_queues_concurrency_and_task_names(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    worker = db.worker(poll_interval_ms=20, queues=["emails", "default"], concurrency=3)

    @worker.task("email.send")
    async def send(ctx: TaskContext, payload: Any) -> None: ...

    @worker.task("audit")
    async def audit(ctx: TaskContext, payload: Any) -> None: ...

    with caplog.at_level(logging.INFO, logger="cairnq"):
        async with worker.background():
            pass
        await worker.close()
    [started] = [r for r in worker_records(caplog) if " started on " in r.getMessage()]
    where = db.path if db.kind == "sqlite" else "PostgreSQL "
    assert str(where) in started.getMessage()
    assert started.getMessage().endswith(
        ": queues emails,default, concurrency 3, tasks audit, email.send"
    )
    assert started.task_names == ["audit", "email.send"]  # type: ignore[attr-defined]
    assert f" started on {started.database}: " in started.getMessage()  # type: ignore[attr-defined]


def test_json_formatter_writes_one_object_with_the_extra_fields_and_the_traceback() -> None:
    from cairnq.logging import JsonFormatter

    logger = logging.getLogger("cairnq.test.json")
    try:
        raise RuntimeError("kaboom")
    except RuntimeError:
        record = logger.makeRecord(
            logger.name,
            logging.WARNING,
            __file__,
            1,
            "task %s failed",
            ("t1",),
            sys.exc_info(),
            extra={"task_id": "t1", "queue": "emails", "duration_ms": 1.5, "ids": {"a"}},
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    document = json.loads(line)
    assert document["level"] == "WARNING"
    assert document["logger"] == "cairnq.test.json"
    assert document["message"] == "task t1 failed"
    assert document["time"].endswith("Z")
    assert (document["task_id"], document["queue"], document["duration_ms"]) == (
        "t1",
        "emails",
        1.5,
    )
    assert document["ids"] == ["a"]
    assert document["exc_info"].startswith("Traceback (most recent call last):")
    assert document["exc_info"].endswith("RuntimeError: kaboom")
    assert "args" not in document and "msg" not in document
