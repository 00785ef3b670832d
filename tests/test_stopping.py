"""Stopping running work: a cancel stops a running ``async def`` handler after its grace
period (``cancel_grace``), and an isolated plain ``def`` handler by killing its child
process; every stopped attempt ends ``canceled``, on every backend."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, TaskContext, TaskTimeout, Worker

from . import _isolated_handlers
from ._db import Database
from ._waits import eventually
from .test_task_policies import in_use


async def settled(cq: CairnQ, task_id: str) -> Any:
    return await cq.wait(task_id, timeout_ms=20_000, poll_ms=20, max_poll_ms=50)


def quick(db: Database, **options: Any) -> Worker:
    """A worker that sees a cancel within 50 ms (its heartbeat)."""
    return db.worker(poll_interval_ms=20, lease_ms=2000, heartbeat_interval="50ms", **options)


async def test_a_canceled_async_handler_that_never_checks_ends_canceled_with_its_cleanup_run(
    db: Database,
) -> None:
    """It ends within its grace period of the cancel being seen: by the task row's own
    times, the settlement comes at most ``cancel_grace`` plus a heartbeat (when the
    worker sees the cancel) plus a generous slack after the cancel, where the handler
    left alone would sleep for an hour."""
    grace_ms, heartbeat_ms, slack_ms = 200, 50, 5_000
    worker = quick(db, cancel_grace=f"{grace_ms}ms", drain_timeout="1s")
    assert worker.heartbeat_interval_ms == heartbeat_ms
    started, cleaned = asyncio.Event(), asyncio.Event()

    @worker.task
    async def stuck(ctx: TaskContext, payload: Any) -> str:
        started.set()
        try:
            await asyncio.sleep(3600)  # the handler never checks for cancel
        finally:
            cleaned.set()
        return "never"

    async with db.client() as cq, worker.background():
        task = await cq.submit("stuck", {})
        await asyncio.wait_for(started.wait(), 10)
        await cq.cancel(task.id)
        # The wait (20 s) outlasts the bound: a late settlement fails the bound below,
        # none at all the check that it settled.
        with contextlib.suppress(TaskTimeout):
            await settled(cq, task.id)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and done.cancel_requested_at_ms is not None
    assert done.completed_at_ms is not None, f"not settled: {done.status}"
    took_ms = done.completed_at_ms - done.cancel_requested_at_ms
    assert took_ms < grace_ms + heartbeat_ms + slack_ms, took_ms
    assert cleaned.is_set()
    assert (done.status, done.attempt, done.result) == ("canceled", 1, None)
    assert (done.error["type"], done.error["code"]) == ("HandlerStopped", "canceled")


async def test_a_stopped_handler_that_swallows_the_stop_and_returns_still_ends_canceled(
    db: Database,
) -> None:
    worker = quick(db, cancel_grace=0)
    started = asyncio.Event()
    swallowed: list[str] = []

    @worker.task
    async def stubborn(ctx: TaskContext, payload: Any) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.append(ctx.task_id)
        return "returned anyway"

    async with db.client() as cq, worker.background():
        task = await cq.submit("stubborn", {})
        await asyncio.wait_for(started.wait(), 10)
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
    await worker.close()
    assert swallowed == [task.id]
    assert (done.status, done.result) == ("canceled", None)


def cooperative(finished: list[str]) -> Any:
    """A handler that sees its cancel, then runs on for 20 turns of the loop."""

    async def handler(ctx: TaskContext, payload: Any) -> str:
        while not await ctx.canceled():
            await asyncio.sleep(0.01)
        for _ in range(20):
            await asyncio.sleep(0)
        finished.append(ctx.task_id)
        return "finished"

    return handler


async def test_without_a_grace_period_a_canceled_async_handler_runs_on_until_it_returns(
    db: Database,
) -> None:
    worker = quick(db, cancel_grace=None)
    finished: list[str] = []
    worker.register("coop", cooperative(finished))
    async with db.client() as cq, worker.background():
        task = await cq.submit("coop", {})
        await eventually(lambda: cq.get(task.id), "the task exists")
        await eventually(lambda: _running(cq, task.id), "the task runs", timeout=10)
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
    await worker.close()
    assert finished == [task.id]
    assert done.status == "canceled" and done.error is None


async def test_a_zero_grace_stops_the_handler_at_its_next_await_after_the_cancel_is_seen(
    db: Database,
) -> None:
    worker = quick(db, cancel_grace=0)
    finished: list[str] = []
    worker.register("coop", cooperative(finished))
    async with db.client() as cq, worker.background():
        task = await cq.submit("coop", {})
        await eventually(lambda: _running(cq, task.id), "the task runs", timeout=10)
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
    await worker.close()
    assert finished == []
    assert (done.status, done.error["type"]) == ("canceled", "HandlerStopped")


async def test_a_handlers_own_cancel_grace_wins_over_the_workers(db: Database) -> None:
    worker = quick(db, cancel_grace=None)
    finished: list[str] = []
    worker.register("coop", cooperative(finished), cancel_grace="0s")
    async with db.client() as cq, worker.background():
        task = await cq.submit("coop", {})
        await eventually(lambda: _running(cq, task.id), "the task runs", timeout=10)
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
    await worker.close()
    assert finished == []
    assert (done.status, done.error["type"]) == ("canceled", "HandlerStopped")


async def test_a_plain_def_handler_is_not_stopped_and_ends_canceled_when_it_returns(
    db: Database,
) -> None:
    worker = quick(db, cancel_grace=0)
    finished: list[str] = []

    @worker.task
    def threaded(ctx: Any, payload: Any) -> str:
        while not ctx.canceled():
            ctx.lease_lost.wait(0.01)  # the handler's own pace: it checks every 10 ms
        finished.append(ctx.task_id)
        return "finished"

    async with db.client() as cq, worker.background():
        task = await cq.submit("threaded", {})
        await eventually(lambda: _running(cq, task.id), "the task runs", timeout=10)
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
    await worker.close()
    assert finished == [task.id]
    assert (done.status, done.error) == ("canceled", None)


async def _running(cq: CairnQ, task_id: str) -> bool:
    task = await cq.get(task_id)
    return task is not None and task.status == "running"


# --- isolated plain def handlers ------------------------------------------------------------


def _alive(pid: int) -> bool:
    # The process may be reaped between the signal check and the read: gone is gone.
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


async def test_a_canceled_isolated_handler_has_its_child_process_killed(
    db: Database, tmp_path: Path
) -> None:
    worker = quick(db, cancel_grace="100ms")
    worker.register("sleeper", _isolated_handlers.sleeper, isolate=True)
    pidfile = tmp_path / "pid"
    async with db.client() as cq, worker.background():
        task = await cq.submit("sleeper", {"pidfile": str(pidfile)})
        await eventually(pidfile.exists, "the child started the handler", timeout=60)
        pid = int(pidfile.read_text())
        await cq.cancel(task.id)
        done = await settled(cq, task.id)
        await eventually(lambda: not _alive(pid), "the child process is gone", timeout=20)
    await worker.close()
    assert (done.status, done.error["type"]) == ("canceled", "HandlerStopped")


@pytest.mark.parametrize("bound", ["timeout", "max_run_ms"])
async def test_an_isolated_handler_past_its_run_time_fails_as_handler_timeout_and_is_killed(
    db: Database, tmp_path: Path, bound: str
) -> None:
    """Past its task's ``timeout`` (or the worker's ``max_run_ms``), an isolated plain
    ``def`` handler's child process is killed and the attempt fails as ``handler_timeout``,
    the handler otherwise sleeping ten minutes."""
    worker = quick(db, max_run_ms=2000 if bound == "max_run_ms" else None)
    worker.register("adder", _isolated_handlers.adder, isolate=True)
    worker.register("sleeper", _isolated_handlers.sleeper, isolate=True)
    pidfile = tmp_path / "pid"
    async with db.client() as cq:
        await in_use(cq)
        async with worker.background():
            # A first call starts the child process, so the bound counts the handler alone.
            warm = await cq.submit("adder", {"a": 1, "b": 1}, timeout="2m")
            assert (await settled(cq, warm.id)).status == "succeeded"
            own = {"timeout": "2s"} if bound == "timeout" else {}
            task = await cq.submit("sleeper", {"pidfile": str(pidfile)}, max_attempts=1, **own)
            await eventually(pidfile.exists, "the child started the handler", timeout=60)
            pid = int(pidfile.read_text())
            done = await settled(cq, task.id)
            await eventually(lambda: not _alive(pid), "the child process is gone", timeout=20)
    await worker.close()
    assert (done.status, done.attempt, done.error["code"]) == ("failed", 1, "handler_timeout")
    said = "its timeout=2s" if bound == "timeout" else "max_run_ms=2000"
    assert done.error["message"] == f"handler ran longer than {said}"


async def test_an_isolated_handler_returns_its_result_from_a_child_process(
    db: Database,
) -> None:
    worker = quick(db)
    worker.register("adder", _isolated_handlers.adder, isolate=True)
    async with db.client() as cq, worker.background():
        task = await cq.submit("adder", {"a": 2, "b": 3})
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "succeeded"
    assert (done.result["sum"], done.result["task_id"]) == (5, task.id)
    assert done.result["pid"] != os.getpid()


async def test_an_isolated_handlers_exception_fails_its_attempt(db: Database) -> None:
    worker = quick(db)
    worker.register("breaker", _isolated_handlers.breaker, isolate=True)
    async with db.client() as cq, worker.background():
        task = await cq.submit("breaker", {}, max_attempts=1)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.error["type"]) == ("failed", "ValueError")
    assert "broken in the child" in done.error["message"]


# --- refused options ------------------------------------------------------------------------


@pytest.mark.parametrize("grace", ["soon", -1, True, [1], float("nan"), "2d"])
def test_the_worker_refuses_a_cancel_grace_that_is_not_a_duration_up_to_a_day(
    db: Database, grace: Any
) -> None:
    with pytest.raises(InvalidArgument, match="cancel_grace"):
        db.worker(cancel_grace=grace)


@pytest.mark.parametrize("grace", ["soon", -1, True])
def test_a_handler_with_a_bad_cancel_grace_is_refused_and_not_registered(
    db: Database, grace: Any
) -> None:
    worker = db.worker()

    async def handler(ctx: TaskContext) -> None:
        return None

    with pytest.raises(InvalidArgument, match="cancel_grace"):
        worker.register("job", handler, cancel_grace=grace)
    assert worker.registry.names() == []


def _lambda_handler() -> Any:
    return lambda ctx: None


async def _async_handler(ctx: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("handler", "options", "message"),
    [
        (_isolated_handlers.adder, {"isolate": "yes"}, "isolate must be True or False"),
        (_async_handler, {"isolate": True}, "plain def handler"),
        (_isolated_handlers.adder, {"isolate": True, "batch": 2}, "batch"),
        (_lambda_handler(), {"isolate": True}, "module's top level"),
    ],
    ids=["not-a-bool", "async-def", "batch", "lambda"],
)
def test_isolate_is_refused_for_a_handler_it_cannot_run_and_nothing_is_registered(
    db: Database, handler: Any, options: dict[str, Any], message: str
) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument, match=message):
        worker.register("job", handler, **options)
    assert worker.registry.names() == []


async def test_a_batch_call_is_stopped_once_every_task_it_holds_was_canceled(
    db: Database,
) -> None:
    worker = quick(db, cancel_grace=0)
    started, cleaned = asyncio.Event(), asyncio.Event()

    @worker.task(batch=2)
    async def stuck(contexts: list[TaskContext]) -> None:
        if len(contexts) == 2:
            started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    async with db.client() as cq:
        tasks = [await cq.submit("stuck", {}) for _ in range(2)]
        async with worker.background():
            await asyncio.wait_for(started.wait(), 10)
            for task in tasks:
                await cq.cancel(task.id)
            done = [await settled(cq, task.id) for task in tasks]
    await worker.close()
    assert cleaned.is_set()
    assert [(d.status, d.error["type"]) for d in done] == [("canceled", "HandlerStopped")] * 2
