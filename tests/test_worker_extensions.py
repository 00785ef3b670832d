"""A worker runs the extensions its client was given and those it is given besides
cairnq's own, each only while ready.

A ready extension's hooks run in the worker's settlements; one whose migrations
the database lacks steps aside, and the worker says so in one shared line for
every extension that does. An extension given to both the client and the worker
runs once; two different extensions of one name are refused.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from cairnq import InvalidArgument, InvalidExtension, Worker
from cairnq.errors import error_envelope
from cairnq.extensions import Extension, Hooks, Schedules, WorkerView
from cairnq.extensions._context import Settle, Signal
from cairnq.protocol.steps import Op, Row

from ._db import Database
from .test_statement_count import KERNEL_MIGRATIONS
from .test_without_extensions import migrate_only


class Audit(Extension):
    """Notes the status of every task a settlement ends (in the settlement's transaction)."""

    name = "audit"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def hooks(self, worker: WorkerView) -> Hooks:
        def record(rows: Sequence[Row]) -> Op[None]:
            self.seen.extend((str(r["id"]), str(r["status"])) for r in rows)
            return
            yield  # a generator: an operation with no statement

        return Hooks(task_end=record)


class Other(Audit):
    """As ``Audit``, under another name."""

    name = "other"


class Unmigrated(Audit):
    """As ``Audit``, on a migration no database has."""

    name = "unmigrated"
    needs = ("x_unmigrated_0001_log.sql",)


async def test_an_extension_given_to_a_worker_runs_its_hook_in_each_settlement(
    db: Database,
) -> None:
    audit = Audit()
    worker = db.worker(poll_interval_ms=20, extensions=[audit])

    @worker.task
    async def job(ctx: Any) -> None:
        return None

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
    await worker.close()
    assert audit.seen == [(task.id, "succeeded")]


async def settle_one(worker: Worker) -> str:
    """Submit one task through ``worker``'s client and run the worker until idle; its id."""

    @worker.task
    async def job(ctx: Any) -> None:
        return None

    task = await worker.client.submit("job")
    await worker.run(until_idle=True)
    await worker.close()
    return task.id


async def test_a_worker_runs_the_extensions_its_client_was_given(db: Database) -> None:
    audit = Audit()
    async with db.client(extensions=[audit]) as cq:
        task_id = await settle_one(Worker(cq, poll_interval_ms=20))
    assert audit.seen == [(task_id, "succeeded")]


async def test_an_extension_given_to_the_client_and_the_worker_runs_once(db: Database) -> None:
    of_client, of_worker = Audit(), Audit()
    async with db.client(extensions=[of_client]) as cq:
        task_id = await settle_one(Worker(cq, poll_interval_ms=20, extensions=[of_worker]))
    assert of_worker.seen == [(task_id, "succeeded")]
    assert of_client.seen == []


async def test_a_worker_runs_its_client_s_extensions_and_its_own(db: Database) -> None:
    audit, other = Audit(), Other()
    async with db.client(extensions=[audit]) as cq:
        task_id = await settle_one(Worker(cq, poll_interval_ms=20, extensions=[other]))
    assert audit.seen == other.seen == [(task_id, "succeeded")]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (None, "extensions takes a list of Extension instances, not None"),
        (Schedules(), r"extensions takes a list: extensions=\[Schedules\(...\)\]"),
        ("schedules", "extensions takes a list of Extension instances, not 'schedules'"),
    ],
    ids=["none", "one-alone", "a-string"],
)
def test_a_worker_given_no_list_of_extensions_is_refused_with_a_clear_message(
    db: Database, given: Any, message: str
) -> None:
    cq = db.client()
    with pytest.raises(InvalidArgument, match=message):
        Worker(cq, extensions=given)


@pytest.mark.parametrize(
    "given", [None, Schedules(), "schedules"], ids=["none", "one-alone", "a-string"]
)
def test_a_client_given_no_list_of_extensions_is_refused_with_a_clear_message(
    db: Database, given: Any
) -> None:
    with pytest.raises(InvalidArgument, match="extensions takes a list"):
        db.client(extensions=given)


def test_two_different_extensions_of_one_name_are_refused(db: Database) -> None:
    class Impostor(Other):
        name = "audit"

    cq = db.client(extensions=[Audit()])
    with pytest.raises(InvalidExtension, match="two extensions are named audit"):
        Worker(cq, extensions=[Impostor()])


async def test_an_extension_whose_migration_is_missing_steps_aside_in_the_shared_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairnq.worker")
    unmigrated = Unmigrated()
    worker = db.worker(poll_interval_ms=20, extensions=[unmigrated])

    @worker.task
    async def job(ctx: Any) -> None:
        return None

    async with db.client() as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and done.status == "succeeded"
    assert unmigrated.seen == []
    lines = [r.getMessage() for r in caplog.records if "step aside" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "x_unmigrated_0001_log.sql" in lines[0] and "unmigrated step aside" in lines[0]
    assert "cairnq migrate" in lines[0]


async def test_on_a_kernel_only_database_every_extension_steps_aside_in_one_line(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    migrate_only(db, lambda name: not name.startswith("x") or name in KERNEL_MIGRATIONS)
    caplog.set_level(logging.INFO, logger="cairnq.worker")
    worker = Worker(
        db.backend(migrate=False), poll_interval_ms=20, extensions=[Schedules(evaluate=False)]
    )

    @worker.task
    async def job(ctx: Any) -> None:
        return None

    async with db.client(migrate=False) as cq:
        task = await cq.submit("job")
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert done is not None and done.status == "succeeded"
    lines = [r.getMessage() for r in caplog.records if "step aside" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    for name in ("limits", "pauses", "workflows", "snooze", "steps", "history"):
        assert name in lines[0]
    # Presence and schedules say it in their own line.
    assert "presence" not in lines[0] and "schedules" not in lines[0]
    for migration in ("x0006_limits.sql", "x0007_flow.sql", "x0008_workflows.sql"):
        assert migration in lines[0]


def test_a_worker_refuses_an_extension_named_as_a_builtin(db: Database) -> None:
    class Limits(Audit):
        name = "limits"

    with pytest.raises(InvalidArgument, match="two extensions are named limits"):
        Worker(db.url, extensions=[Limits()])


class Later(Exception):
    """A handler signal of the ``Deferring`` extension: give the task back, retried at once."""


class Deferring(Extension):
    """Settles a raised ``Later`` by failing the attempt retryable with no delay."""

    name = "deferring"

    def __init__(self) -> None:
        self.signalled: list[str] = []

    def signals(self) -> Mapping[type[BaseException], Signal]:
        async def later(raised: BaseException, contexts: Sequence[Any], settle: Settle) -> None:
            envelope = error_envelope("Later", "later", str(raised), retryable=True)
            for ctx in contexts:
                self.signalled.append(ctx.task.id)
                write = functools.partial(ctx._record_failure, envelope, retryable=True, delay_ms=0)
                await settle(ctx, write)

        return {Later: later}


async def test_a_signal_an_extension_declares_settles_the_handler_s_call(db: Database) -> None:
    deferring = Deferring()
    worker = db.worker(poll_interval_ms=20, extensions=[deferring])
    runs: list[int] = []

    @worker.task
    async def job(ctx: Any) -> None:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise Later("not yet")

    async with db.client() as cq:
        task = await cq.submit("job", max_attempts=3)
        await worker.run(until_idle=True)
        done = await cq.get(task.id)
    await worker.close()
    assert deferring.signalled == [task.id]
    assert done.status == "succeeded" and runs == [1, 2]


def test_a_worker_refuses_two_extensions_settling_one_signal(db: Database) -> None:
    class Again(Deferring):
        name = "again"

    with pytest.raises(InvalidExtension, match="handler signal Later is deferring's"):
        Worker(db.url, extensions=[Deferring(), Again()])
