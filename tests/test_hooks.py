"""The seams instrumentation uses: submit hooks on clients, call scopes on workers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cairnq import InvalidArgument, Task, TaskContext
from cairnq.hooks import PendingSubmit, SubmitDone

from ._db import Database


async def test_a_submit_hook_that_raises_does_not_fail_the_submit(db: Database) -> None:
    def broken(pending: PendingSubmit) -> SubmitDone:
        raise RuntimeError("instrumentation bug")

    async with db.client() as cq:
        cq.add_submit_hook(broken)
        task = await cq.submit("job", {"n": 1})
        stored = await cq.get(task.id)
    assert stored is not None and stored.payload == {"n": 1}


async def test_a_submit_hook_hears_the_error_of_a_refused_submit(db: Database) -> None:
    heard: list[tuple[Task | None, str]] = []

    def hook(pending: PendingSubmit) -> SubmitDone:
        return lambda task, error: heard.append((task, type(error).__name__))

    async with db.client() as cq:
        await cq.submit("job", {}, key="taken")
        cq.add_submit_hook(hook)
        with pytest.raises(Exception, match="taken"):
            await cq.submit("job", {}, key="taken", conflict="reject")
    assert heard == [(None, "AlreadyExists")]


async def test_a_removed_submit_hook_is_not_called(db: Database) -> None:
    seen: list[str] = []

    def hook(pending: PendingSubmit) -> None:
        seen.append(pending.name)

    async with db.client() as cq:
        remove = cq.add_submit_hook(hook)
        await cq.submit("first", {})
        remove()
        await cq.submit("second", {})
    assert seen == ["first"]


def test_add_submit_hook_refuses_what_is_not_callable(db: Database) -> None:
    with db.sync_client() as cq, pytest.raises(InvalidArgument, match="callable"):
        cq.add_submit_hook("not a hook")  # type: ignore[arg-type]


async def test_a_call_scope_that_fails_to_enter_is_reported_and_the_task_still_runs(
    db: Database,
) -> None:
    reported: list[str] = []
    worker = db.worker(
        poll_interval_ms=20, on_error=lambda exc, context: reported.append(context["phase"])
    )

    def broken(contexts: Sequence[TaskContext]) -> contextlib.AbstractContextManager[None]:
        raise RuntimeError("scope bug")

    worker.add_call_scope(broken)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> str:
        return "ran"

    async with db.client() as cq, worker.background():
        assert await cq.call("job", {}, timeout_ms=10_000) == "ran"
    await worker.close()
    assert reported == ["scope"]


async def test_a_call_scope_is_open_while_the_handler_runs_and_its_settlement_is_written(
    db: Database,
) -> None:
    log: list[str] = []
    worker = db.worker(poll_interval_ms=20, on_event=lambda e: log.append(e.kind))

    @contextlib.contextmanager
    def scope(contexts: Sequence[TaskContext]) -> Iterator[None]:
        log.append("enter")
        yield
        log.append("exit")

    worker.add_call_scope(scope)

    @worker.task
    async def job(ctx: TaskContext, payload: Any) -> None:
        log.append("handler")

    async with db.client() as cq, worker.background():
        await cq.call("job", {}, timeout_ms=10_000)
    await worker.close()
    assert log == ["enter", "started", "handler", "succeeded", "exit"]
