"""Replay: ``cq.retry(task_id, from_step=...)`` queues a failed or canceled task again
with its recorded steps before that step kept and those from it on run again; a
succeeded task, a task without such a step and a bad ``from_step`` are refused with
nothing changed. The CLI's ``--from-step`` and the dashboard's form call the same."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument
from cairnq.cli import main
from cairnq.dashboard import create_app

from ._db import Database
from .test_cli import db_args
from .test_dashboard import csrf_from, http


def _billing(db: Database, effects: Counter[str]) -> Any:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    def effect(name: str) -> Any:
        def run() -> str:
            effects[name] += 1
            return f"{name} #{effects[name]}"

        return run

    @worker.task
    async def bill(ctx: Any) -> Any:
        fetched = await ctx.step("fetch", effect("fetch"))
        charged = await ctx.step("charge", effect("charge"))
        mailed = await ctx.step("email", effect("email"))
        return [fetched, charged, mailed]

    return worker


async def _failed_after_all_steps(db: Database, cq: CairnQ, effects: Counter[str]) -> str:
    """The id of a task that recorded its three steps, then failed for good."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    def effect(name: str) -> Any:
        def run() -> str:
            effects[name] += 1
            return f"{name} #{effects[name]}"

        return run

    @worker.task
    async def bill(ctx: Any) -> Any:
        for name in ("fetch", "charge", "email"):
            await ctx.step(name, effect(name))
        raise RuntimeError("failed after its steps")

    task = await cq.submit("bill", max_attempts=1)
    await worker.run(until_idle=True)
    return task.id


async def test_a_replay_keeps_the_steps_before_the_named_one_and_runs_it_and_the_rest_again(
    db: Database,
) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, effects)
        queued = await cq.retry(task_id, from_step="charge")
        await _billing(db, effects).run(until_idle=True)
        done = await cq.get(task_id)
        steps = await cq.steps.list(task_id)
    assert queued is not None and queued.status == "queued"
    assert done is not None and done.status == "succeeded"
    assert done.result == ["fetch #1", "charge #2", "email #2"]
    assert effects == {"fetch": 1, "charge": 2, "email": 2}
    assert [(s.name, s.seq, s.attempt) for s in steps] == [
        ("fetch", 1, 1),
        ("charge", 2, 2),
        ("email", 3, 2),
    ]


async def test_a_canceled_task_is_replayed_from_a_step(db: Database) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, effects)
        await cq.retry(task_id)
        await cq.cancel(task_id)
        queued = await cq.retry(task_id, from_step="email")
        steps = await cq.steps.list(task_id)
    assert queued is not None and queued.status == "queued"
    assert [s.name for s in steps] == ["fetch", "charge"]


async def test_a_replay_of_a_succeeded_task_is_refused_and_changes_nothing(db: Database) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        task = await cq.submit("bill")
        await _billing(db, effects).run(until_idle=True)
        with pytest.raises(InvalidArgument, match="succeeded; a succeeded task is never queued"):
            await cq.retry(task.id, from_step="charge")
        done = await cq.get(task.id)
        steps = await cq.steps.list(task.id)
    assert done is not None and done.status == "succeeded"
    assert [s.name for s in steps] == ["fetch", "charge", "email"]


async def test_a_replay_from_a_step_the_task_never_recorded_is_refused(db: Database) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, effects)
        with pytest.raises(InvalidArgument, match=r"recorded no step 'refund'.*'fetch', 'charge'"):
            await cq.retry(task_id, from_step="refund")
        still = await cq.get(task_id)
        steps = await cq.steps.list(task_id)
    assert still is not None and still.status == "failed"
    assert len(steps) == 3


async def test_a_replay_of_an_unknown_task_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="no task"):
            await cq.retry("task_01JD0000000000000000000000", from_step="charge")


@pytest.mark.parametrize(
    ("value", "words"),
    [(5, "must be the name"), ("", "step name"), ("cairnq:version", "keeps for its own")],
)
async def test_a_bad_from_step_is_refused(db: Database, value: Any, words: str) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, effects)
        with pytest.raises(InvalidArgument, match=words):
            await cq.retry(task_id, from_step=value)
        still = await cq.get(task_id)
    assert still is not None and still.status == "failed"


async def test_a_replay_keeps_the_recorded_version_so_another_version_still_fails(
    db: Database,
) -> None:
    effects: Counter[str] = Counter()
    async with db.client() as cq:
        first = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

        @first.task(version=1)
        async def bill(ctx: Any) -> Any:
            await ctx.step("fetch", lambda: "f")
            raise RuntimeError("fail")

        task = await cq.submit("bill", max_attempts=1)
        await first.run(until_idle=True)
        await cq.retry(task.id, from_step="fetch")
        second = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

        @second.task(name="bill", version=2)
        async def bill2(ctx: Any) -> Any:
            effects["ran"] += 1
            return await ctx.step("fetch", lambda: "g")

        await second.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None and done.status == "failed"
    assert done.error is not None and done.error["type"] == "StepsChanged"
    assert effects == {"ran": 1}


async def test_a_patched_at_the_replayed_step_answers_again_and_takes_the_new_branch(
    db: Database,
) -> None:
    async with db.client() as cq:
        old = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

        @old.task
        async def bill(ctx: Any) -> Any:
            await ctx.step("fetch", lambda: "f")
            await ctx.step("charge", lambda: "dollars")
            raise RuntimeError("fail")

        task = await cq.submit("bill", max_attempts=1)
        await old.run(until_idle=True)
        await cq.retry(task.id, from_step="charge")
        new = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

        @new.task(name="bill")
        async def bill_new(ctx: Any) -> Any:
            await ctx.step("fetch", lambda: "f")
            if await ctx.patched("cents"):
                return await ctx.step("charge-cents", lambda: "cents")
            return await ctx.step("charge", lambda: "dollars")

        await new.run(until_idle=True)
        done = await cq.get(task.id)
    assert done is not None and (done.status, done.result) == ("succeeded", "cents")


async def _failed_task(db: Database) -> str:
    async with db.client() as cq:
        return await _failed_after_all_steps(db, cq, Counter())


async def _names(db: Database, task_id: str) -> tuple[str | None, list[str]]:
    async with db.client() as cq:
        task = await cq.get(task_id)
        steps = await cq.steps.list(task_id)
    return (None if task is None else task.status), [s.name for s in steps]


def test_cli_retry_from_step_replays_the_task(db: Database) -> None:
    task_id = asyncio.run(_failed_task(db))
    out = io.StringIO()
    code = main(["retry", task_id, "--from-step", "email", *db_args(db)], out=out)
    assert code == 0 and task_id in out.getvalue()
    assert asyncio.run(_names(db, task_id)) == ("queued", ["fetch", "charge"])


def test_cli_retry_from_a_step_never_recorded_exits_1(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = asyncio.run(_failed_task(db))
    code = main(["retry", task_id, "--from-step", "nope", *db_args(db)], out=io.StringIO())
    assert code == 1
    assert "recorded no step 'nope'" in capsys.readouterr().err
    assert asyncio.run(_names(db, task_id)) == ("failed", ["fetch", "charge", "email"])


async def test_the_dashboard_replays_a_failed_task_from_the_step_whose_button_was_used(
    db: Database,
) -> None:
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, Counter())
        async with http(create_app(cq)) as client:
            page = (await client.get("/task", params={"id": task_id})).text
            assert page.count("data-replay") == 3
            response = await client.post(
                "/steps/replay",
                data={"csrf": csrf_from(page), "id": task_id, "from_step": "charge"},
            )
            after = (await client.get("/task", params={"id": task_id})).text
        steps = await cq.steps.list(task_id)
        task = await cq.get(task_id)
    assert response.status_code == 303
    assert task is not None and task.status == "queued"
    assert [s.name for s in steps] == ["fetch"]
    assert "data-replay" not in after


async def test_the_dashboard_refuses_a_replay_from_a_step_never_recorded(db: Database) -> None:
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, Counter())
        async with http(create_app(cq)) as client:
            page = (await client.get("/task", params={"id": task_id})).text
            response = await client.post(
                "/steps/replay",
                data={"csrf": csrf_from(page), "id": task_id, "from_step": "nope"},
            )
        task = await cq.get(task_id)
    assert response.status_code == 400 and "recorded no step" in response.text
    assert task is not None and task.status == "failed"


async def test_a_read_only_dashboard_offers_no_replay(db: Database) -> None:
    async with db.client() as cq:
        task_id = await _failed_after_all_steps(db, cq, Counter())
        async with http(create_app(cq, read_only=True)) as client:
            page = (await client.get("/task", params={"id": task_id})).text
    assert "Steps" in page and "data-replay" not in page
