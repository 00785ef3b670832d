"""A worker run ``until_idle`` asks its components' ``before_idle`` before it stops.

A component that made work due (``True``) makes the run claim again; one that
failed with an error that may pass (a ``retryable`` ``DatabaseError``) is reported
and asked again after a claim, ``BEFORE_IDLE_RETRIES`` times in a row at most; any
other failure is reported and the run stops. The workflows' and the batches' own
``before_idle`` are tested beside their sweeps (``test_workflows_in_use.py``,
``test_batches.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from cairnq import CairnQ, DatabaseBusy
from cairnq.extensions import Component, Extension, Part, WorkerView
from cairnq.worker._claimer import BEFORE_IDLE_RETRIES

from ._db import Database


class _Asked(Extension):
    """An extension whose component answers ``before_idle`` with ``answers`` in turn (a
    callable is awaited with the worker's client, an exception raised), then ``False``."""

    name = "asked"

    def __init__(self, answers: Sequence[Any]) -> None:
        self.answers = list(answers)
        self.asked = 0

    def components(self, worker: WorkerView) -> list[Component]:
        extension, client = self, worker.client

        class Answering(Part):
            name = "asked"

            async def before_idle(self) -> bool:
                extension.asked += 1
                if not extension.answers:
                    return False
                answer = extension.answers.pop(0)
                if isinstance(answer, BaseException):
                    raise answer
                if callable(answer):
                    await answer(client)
                    return True
                return bool(answer)

        return [Answering()]


async def _submit_job(client: CairnQ) -> None:
    await client.submit("job")


async def _run(db: Database, answers: Sequence[Any]) -> tuple[_Asked, list[str], list[Any]]:
    """Run a worker ``until_idle`` with ``_Asked(answers)``; the extension, the tasks its
    handler ran and the errors it reported."""
    asked = _Asked(answers)
    errors: list[Any] = []
    worker = db.worker(
        poll_interval_ms=20,
        extensions=[asked],
        on_error=lambda exc, context: errors.append((exc, context.get("phase"))),
    )
    ran: list[str] = []

    @worker.task
    async def job(ctx: Any) -> None:
        ran.append(ctx.task.id)

    await asyncio.wait_for(worker.run(until_idle=True), 30)
    return asked, ran, errors


async def test_a_run_claims_again_and_runs_what_a_component_made_due_before_it_stops(
    db: Database,
) -> None:
    asked, ran, errors = await _run(db, [_submit_job])
    assert (len(ran), asked.asked, errors) == (1, 2, [])


async def test_a_component_that_made_nothing_due_lets_the_run_stop_at_once(db: Database) -> None:
    asked, ran, errors = await _run(db, [])
    assert (ran, asked.asked, errors) == ([], 1, [])


async def test_a_failure_that_may_pass_is_reported_and_asked_again_after_a_claim(
    db: Database,
) -> None:
    busy = DatabaseBusy("the file is busy")
    asked, ran, errors = await _run(db, [busy, _submit_job])
    assert (len(ran), asked.asked) == (1, 3)
    assert errors == [(busy, "before_idle")]


async def test_a_failure_that_keeps_coming_back_stops_the_run_after_the_retries(
    db: Database,
) -> None:
    answers = [DatabaseBusy("busy") for _ in range(BEFORE_IDLE_RETRIES + 5)]
    asked, ran, errors = await _run(db, answers)
    assert (ran, asked.asked) == ([], BEFORE_IDLE_RETRIES + 1)
    assert [phase for _, phase in errors] == ["before_idle"] * (BEFORE_IDLE_RETRIES + 1)


async def test_a_failure_that_cannot_pass_is_reported_and_the_run_stops(db: Database) -> None:
    broken = RuntimeError("a bug in the component")
    asked, ran, errors = await _run(db, [broken, _submit_job])
    assert (ran, asked.asked, errors) == ([], 1, [(broken, "before_idle")])
