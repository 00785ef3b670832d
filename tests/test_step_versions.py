"""Versions of durable code: a retry whose handler's steps no longer match what earlier
attempts recorded (reordered, replaced, another declared version) fails with
``steps_changed`` instead of handing a recorded result to another step;
``ctx.patched`` lets a change go out under tasks in flight."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from cairnq import InvalidArgument, TaskContext, Worker
from cairnq.extensions import Steps
from cairnq.history import StepsChanged

from ._db import Database


def _worker(db: Database, **options: Any) -> Worker:
    return db.worker(poll_interval_ms=20, retry_backoff_ms=0, **options)


def recorder(ran: Counter[str]) -> Any:
    """A step function for step ``name``: counts its runs, returns its name."""

    def make(name: str) -> Any:
        def run() -> str:
            ran[name] += 1
            return f"{name} result"

        return run

    return make


def redeployed(first: list[str], then: list[str], ran: Counter[str]) -> Any:
    """A handler whose first attempt runs steps ``first`` and fails; the code is then
    changed, and later attempts run steps ``then``."""
    make = recorder(ran)

    async def handler(ctx: TaskContext) -> list[str]:
        names = first if ctx.attempt == 1 else then
        results = [await ctx.step(name, make(name)) for name in names]
        if ctx.attempt == 1:
            raise ConnectionError("crash after the steps; a deploy comes before the retry")
        return results

    return handler


async def _run_one(db: Database, worker: Worker, **submit: Any) -> Any:
    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3, **submit)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    return done


async def test_a_retry_onto_reordered_steps_fails_with_steps_changed_and_runs_no_step(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    worker = _worker(db)
    worker.register("job", redeployed(["a", "b"], ["b", "a"], ran))
    done = await _run_one(db, worker)
    assert (done.status, done.attempt) == ("failed", 2)
    assert (done.error["type"], done.error["code"]) == ("StepsChanged", "steps_changed")
    assert done.error["details"]["recorded"] == ["a", "b"]
    assert (done.error["details"]["step"], done.error["details"]["seq"]) == ("b", 1)
    assert ran == {"a": 1, "b": 1}


async def test_a_retry_onto_a_replaced_step_fails_at_that_step_after_replaying_the_ones_before(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    worker = _worker(db)
    worker.register("job", redeployed(["a", "b"], ["a", "c"], ran))
    done = await _run_one(db, worker)
    assert (done.status, done.error["code"]) == ("failed", "steps_changed")
    assert (done.error["details"]["step"], done.error["details"]["seq"]) == ("c", 2)
    assert ran == {"a": 1, "b": 1}


async def test_a_retry_onto_steps_appended_after_the_recorded_ones_replays_and_runs_the_new(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    worker = _worker(db)
    worker.register("job", redeployed(["a"], ["a", "b"], ran))
    done = await _run_one(db, worker)
    assert (done.status, done.result) == ("succeeded", ["a result", "b result"])
    assert ran == {"a": 1, "b": 1}


async def _first_attempt_then_retry(db: Database, old: Any, new: Any, ran: Counter[str]) -> Any:
    """Attempt 1 on a worker whose handler declares version ``old`` (fails for good after
    its step), a retry by hand, attempt 2 on a worker whose handler declares ``new``."""
    make = recorder(ran)

    async def handler(ctx: TaskContext) -> str:
        result = await ctx.step("a", make("a"))
        if ctx.attempt == 1:
            raise ConnectionError("crash after the step")
        return str(result)

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        for version in (old, new):
            worker = _worker(db)
            worker.register("job", handler, version=version)
            await worker.run(until_idle=True)
            await worker.close()
            if version is old:
                await cq.retry(task.id)
        return await cq.get(task.id)


@pytest.mark.parametrize(("old", "new"), [("1", "2"), (None, "1"), ("1", None), (1, "2")], ids=str)
async def test_a_retry_onto_another_declared_version_fails_with_steps_changed(
    db: Database, old: Any, new: Any
) -> None:
    ran: Counter[str] = Counter()
    done = await _first_attempt_then_retry(db, old, new, ran)
    assert (done.status, done.error["code"]) == ("failed", "steps_changed")
    recorded = None if old is None else str(old)
    assert (done.error["details"]["recorded_version"], done.error["details"]["version"]) == (
        recorded,
        new,
    )
    assert ran == {"a": 1}


async def test_a_retry_onto_the_same_declared_version_replays_the_recorded_steps(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    done = await _first_attempt_then_retry(db, "7", 7, ran)
    assert (done.status, done.result) == ("succeeded", "a result")
    assert ran == {"a": 1}


async def test_a_workers_steps_version_applies_to_its_handlers_without_their_own(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    worker = _worker(db, extensions=[Steps(version="2026-12")])
    worker.register("job", redeployed(["a"], ["a"], ran))
    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", ["a result"])
    assert [s.name for s in steps] == ["a"]


def patched_handler(ran: Counter[str], branches: list[bool], *, new_code_from: int) -> Any:
    """Old code: steps a, b; new code (attempts from ``new_code_from``): a, then c under
    ``patched("use-c")`` or b without it. Attempt 1 fails after its steps."""
    make = recorder(ran)

    async def handler(ctx: TaskContext) -> list[str]:
        results = [await ctx.step("a", make("a"))]
        if ctx.attempt < new_code_from:
            results.append(await ctx.step("b", make("b")))
        else:
            branch = await ctx.patched("use-c")
            branches.append(branch)
            step = "c" if branch else "b"
            results.append(await ctx.step(step, make(step)))
        if ctx.attempt == 1:
            raise ConnectionError("crash after the steps")
        return results

    return handler


async def test_patched_keeps_a_task_that_ran_past_the_change_on_the_old_branch(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    branches: list[bool] = []
    worker = _worker(db)
    worker.register("job", patched_handler(ran, branches, new_code_from=2))
    done = await _run_one(db, worker)
    assert (done.status, done.result) == ("succeeded", ["a result", "b result"])
    assert branches == [False]
    assert ran == {"a": 1, "b": 1}


async def test_patched_takes_the_new_branch_for_a_new_task_and_again_on_its_retry(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    branches: list[bool] = []
    worker = _worker(db)
    worker.register("job", patched_handler(ran, branches, new_code_from=1))
    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", ["a result", "c result"])
    assert branches == [True, True]
    assert ran == {"a": 1, "c": 1}
    assert [s.name for s in steps] == ["a", "c"]


async def test_patched_takes_the_new_branch_for_a_task_that_never_reached_the_change(
    db: Database,
) -> None:
    ran: Counter[str] = Counter()
    branches: list[bool] = []
    make = recorder(ran)

    async def handler(ctx: TaskContext) -> list[str]:
        results = [await ctx.step("a", make("a"))]
        if ctx.attempt == 1:
            raise ConnectionError("crash before the change's point")
        branch = await ctx.patched("use-c")
        branches.append(branch)
        results.append(await ctx.step("c" if branch else "b", make("c" if branch else "b")))
        return results

    worker = _worker(db)
    worker.register("job", handler)
    done = await _run_one(db, worker)
    assert (done.status, done.result) == ("succeeded", ["a result", "c result"])
    assert branches == [True]


# --- refused options ------------------------------------------------------------------------


BAD_VERSIONS = [True, "", "x" * 201, [1], 1.5, "a\x00b"]


@pytest.mark.parametrize("version", BAD_VERSIONS, ids=repr)
def test_a_handler_with_a_bad_version_is_refused_and_not_registered(
    db: Database, version: Any
) -> None:
    worker = db.worker()

    async def handler(ctx: TaskContext) -> None:
        return None

    with pytest.raises(InvalidArgument, match="version must be"):
        worker.register("job", handler, version=version)
    assert worker.registry.names() == []


@pytest.mark.parametrize("version", BAD_VERSIONS, ids=repr)
def test_the_steps_extension_refuses_a_bad_version(version: Any) -> None:
    with pytest.raises(InvalidArgument, match="version must be"):
        Steps(version=version)


async def test_a_step_named_with_cairnqs_own_prefix_is_refused_and_records_nothing(
    db: Database,
) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: TaskContext) -> Any:
        return await ctx.step("cairnq:version", lambda: "mine")

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    await worker.close()
    assert (done.status, done.error["code"]) == ("failed", "misuse")
    assert "cairnq:" in done.error["message"]
    assert steps == []


async def test_patched_refuses_a_bad_name_and_records_nothing(db: Database) -> None:
    worker = _worker(db)

    @worker.task
    async def job(ctx: TaskContext) -> Any:
        return await ctx.patched("")

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=1)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
        steps = await cq.backend.arun(_raw_steps(task.id), write=False)
    await worker.close()
    assert (done.status, done.error["code"]) == ("failed", "misuse")
    assert steps == []


def _raw_steps(task_id: str) -> Any:
    from cairnq.extensions.steps._ops import recorded_steps

    return recorded_steps(task_id)


def test_steps_changed_is_a_final_task_error_with_its_envelope() -> None:
    error = StepsChanged("changed", details={"step": "a"})
    assert (error.retryable, error.envelope()["code"]) == (False, "steps_changed")


async def test_steps_started_together_keep_their_positions_on_a_retry(db: Database) -> None:
    ran: Counter[str] = Counter()
    make = recorder(ran)
    worker = _worker(db)

    @worker.task
    async def job(ctx: TaskContext) -> list[str]:
        results = await asyncio.gather(*(ctx.step(name, make(name)) for name in "abc"))
        if ctx.attempt == 1:
            raise ConnectionError("crash after the steps")
        return list(results)

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", ["a result", "b result", "c result"])
    assert ran == {"a": 1, "b": 1, "c": 1}


async def test_a_plain_def_handlers_patched_blocks_and_answers_as_the_async_one(
    db: Database,
) -> None:
    worker = _worker(db)

    @worker.task
    def job(ctx: Any) -> list[Any]:
        first = ctx.patched("new-way")
        value = ctx.step("after", lambda: "after result")
        if ctx.attempt == 1:
            raise ConnectionError("crash after the step")
        return [first, value]

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert (done.status, done.result) == ("succeeded", [True, "after result"])
