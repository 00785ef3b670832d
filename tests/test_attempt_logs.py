"""Attempt logs: what a handler logs with ``ctx.log`` (and, opt-in, the standard
``logging`` records ``capture_logging`` routes there) is stored with its attempt, capped
and cut with a marker, read back by ``cq.attempts.logs``, ``cairnq get`` and the
dashboard's task page, and removed with its task."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import pytest

from cairnq import InvalidArgument
from cairnq.cli import main
from cairnq.dashboard import create_app
from cairnq.history import AttemptLogs, capture_logging

from ._db import Database
from ._waits import eventually
from .test_cli import db_args
from .test_dashboard import http


def _worker(db: Database, **options: Any) -> Any:
    return db.worker(poll_interval_ms=20, retry_backoff_ms=0, **options)


async def test_each_attempt_keeps_the_lines_its_handler_logged(db: Database) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        ctx.log(f"attempt {ctx.attempt} starts")
        if ctx.attempt == 1:
            ctx.log("no luck", level="warning")
            raise RuntimeError("first attempt fails")
        return "ok"

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=2)
        await worker.run(until_idle=True)
        found = await cq.attempts.logs(task.id)
        attempts = await cq.attempts.list(task.id)
    assert [(e.attempt, [(ln.level, ln.message, ln.source) for ln in e.lines]) for e in found] == [
        (1, [("info", "attempt 1 starts", "ctx.log"), ("warning", "no luck", "ctx.log")]),
        (2, [("info", "attempt 2 starts", "ctx.log")]),
    ]
    assert [e.claim for e in found] == [a.claim for a in attempts]


async def test_a_plain_def_handler_logs_through_its_blocking_context(db: Database) -> None:
    worker = _worker(db)

    @worker.task
    def job(ctx: Any) -> Any:
        ctx.log("from a thread", level="ERROR")
        return None

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        found = await cq.attempts.logs(task.id)
    assert [(ln.level, ln.message) for ln in found[0].lines] == [("error", "from a thread")]


async def test_lines_past_the_cap_are_dropped_and_a_marker_says_how_many(db: Database) -> None:
    worker = _worker(db, extensions=[AttemptLogs(log_max_bytes=1024)])
    sent = [f"line {i:03d} " + "x" * (i % 7) * 20 for i in range(100)]

    @worker.task
    async def chatty(ctx: Any) -> Any:
        for line in sent:
            ctx.log(line)

    async with db.client() as cq:
        task = await cq.submit("chatty")
        await worker.run(until_idle=True)
        (entry,) = await cq.attempts.logs(task.id)
    kept = [ln for ln in entry.lines if ln.level != "cut"]
    whole = [ln for ln in kept if ln.message in sent]
    assert [ln.message for ln in whole] == sent[: len(whole)]
    # Each line is kept whole, or cut short (the first past the cap), or dropped; the
    # line cut short is counted as dropped too.
    assert len(whole) + entry.dropped == 100
    assert 0 < len(kept) < 100
    assert sum(len(ln.message) for ln in kept) <= 1024
    assert entry.lines[-1].level == "cut" and f"{entry.dropped} line(s)" in entry.lines[-1].message


async def test_a_handler_cap_of_its_own_applies_to_its_attempts(db: Database) -> None:
    worker = _worker(db)

    @worker.task(log_max_bytes=256)
    async def chatty(ctx: Any) -> Any:
        for i in range(20):
            ctx.log(f"line {i} " + "y" * 40)

    async with db.client() as cq:
        task = await cq.submit("chatty")
        await worker.run(until_idle=True)
        (entry,) = await cq.attempts.logs(task.id)
    assert entry.dropped > 0 and entry.lines[-1].level == "cut"


async def test_an_attempt_that_logs_nothing_stores_nothing(db: Database) -> None:
    worker = _worker(db)

    @worker.task
    async def quiet(ctx: Any) -> Any:
        return 1

    async with db.client() as cq:
        task = await cq.submit("quiet")
        await worker.run(until_idle=True)
        assert await cq.attempts.logs(task.id) == []


async def test_a_tasks_logs_go_with_it_when_it_is_purged(db: Database) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        ctx.log("kept until purged")

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        assert len(await cq.attempts.logs(task.id)) == 1
        # A purge takes tasks that ended before its own millisecond.
        await eventually(lambda: cq.purge(older_than_ms=0), "the task purged")
        assert await cq.attempts.logs(task.id) == []


async def test_captured_logging_records_go_with_the_attempt_that_emitted_them(
    db: Database,
) -> None:
    worker = _worker(db)
    app = logging.getLogger("tests.attempt_logs.app")
    app.setLevel(logging.DEBUG)

    @worker.task
    async def job(ctx: Any) -> Any:
        app.info("about to work on %s", ctx.task_id)
        app.debug("below the capture's level")

    @worker.task
    def blocking(ctx: Any) -> Any:
        app.warning("from a thread")

    stop = capture_logging(worker, "tests.attempt_logs", level="INFO")
    try:
        async with db.client() as cq:
            first = await cq.submit("job")
            second = await cq.submit("blocking")
            app.info("outside any handler")
            await worker.run(until_idle=True)
            one = await cq.attempts.logs(first.id)
            two = await cq.attempts.logs(second.id)
    finally:
        stop()
    assert [(ln.level, ln.message, ln.source) for ln in one[0].lines] == [
        ("info", f"about to work on {first.id}", "tests.attempt_logs.app")
    ]
    assert [(ln.level, ln.message) for ln in two[0].lines] == [("warning", "from a thread")]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"message": 5}, "must be text"),
        ({"message": "x", "level": "loud"}, "log level must be one of"),
        ({"message": "x", "level": 20}, "log level must be one of"),
    ],
)
async def test_a_bad_log_call_is_refused_and_keeps_nothing(
    db: Database, kwargs: dict[str, Any], words: str
) -> None:
    worker = _worker(db)
    raised: list[BaseException] = []

    @worker.task
    async def job(ctx: Any) -> Any:
        try:
            ctx.log(**kwargs)
        except InvalidArgument as exc:
            raised.append(exc)

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        assert await cq.attempts.logs(task.id) == []
    assert len(raised) == 1 and words in str(raised[0])


@pytest.mark.parametrize("value", [0, 255, 16 * 1024 * 1024 + 1, "64k", 1.5, True])
def test_a_bad_log_max_bytes_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgument, match="log_max_bytes must be a whole number"):
        AttemptLogs(log_max_bytes=value)


@pytest.mark.parametrize("value", [0, "64k", True])
async def test_a_bad_handler_log_max_bytes_registers_nothing(db: Database, value: Any) -> None:
    worker = _worker(db)

    async def job(ctx: Any) -> Any:
        return None

    with pytest.raises(InvalidArgument, match="log_max_bytes"):
        worker.register("job", job, log_max_bytes=value)
    assert "job" not in worker.registry.names()
    await worker.close()


async def test_two_workers_capturing_one_logger_keep_only_their_own_runs_records(
    db: Database,
) -> None:
    mine = db.worker(queues=["mine"], extensions=[AttemptLogs()], poll_interval_ms=20)
    other = db.worker(queues=["other"], extensions=[AttemptLogs()], poll_interval_ms=20)
    app = logging.getLogger("tests.attempt_logs.two")
    app.setLevel(logging.DEBUG)

    @mine.task
    async def job(ctx: Any) -> Any:
        app.info("kept once")
        app.debug("below this worker's level")

    stops = [
        capture_logging(mine, "tests.attempt_logs.two", level="INFO"),
        capture_logging(other, "tests.attempt_logs.two", level="DEBUG"),
    ]
    try:
        async with db.client() as cq:
            task = await cq.submit("job", queue="mine")
            await mine.run(until_idle=True)
            logs = await cq.attempts.logs(task.id)
    finally:
        for stop in stops:
            stop()
        await other.close()
    assert [(ln.level, ln.message) for ln in logs[0].lines] == [("info", "kept once")]


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        ((object(),), {}, "needs a cairnq Worker"),
        ((None, 5), {}, "logger must be"),
        ((None, "app"), {"level": "LOUD"}, "level must be a logging level"),
        ((None, "app"), {"level": -1}, "level must be a logging level"),
    ],
)
async def test_a_bad_capture_logging_call_is_refused(
    db: Database, args: tuple[Any, ...], kwargs: dict[str, Any], words: str
) -> None:
    worker = _worker(db)
    given = (worker, *args[1:]) if args[0] is None else args
    with pytest.raises(InvalidArgument, match=words):
        capture_logging(*given, **kwargs)
    await worker.close()


async def _logged_task(db: Database) -> str:
    worker = _worker(db)

    @worker.task
    async def job(ctx: Any) -> Any:
        ctx.log("shown by get")

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
    return task.id


def test_cairnq_get_shows_each_attempts_lines(db: Database) -> None:
    task_id = asyncio.run(_logged_task(db))
    out = io.StringIO()
    assert main(["get", task_id, *db_args(db)], out=out) == 0
    shown = json.loads(out.getvalue())
    assert [ln["message"] for ln in shown["logs"][0]["lines"]] == ["shown by get"]
    assert shown["logs"][0]["attempt"] == 1


async def test_the_dashboard_task_page_shows_each_attempts_lines(db: Database) -> None:
    task_id = await _logged_task(db)
    async with db.client() as cq, http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task_id})).text
    assert "data-logs" in page and "shown by get" in page
