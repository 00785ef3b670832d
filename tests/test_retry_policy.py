"""Retry policies per task name (``@worker.task(retry=..., max_attempts=...)``,
``TaskDef(retry=...)``) and run timeouts per task name, on every backend; the
delays a ``Retry`` computes; and the README's Durable steps example, run as written."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, Retry, TaskContext, TaskDef, Worker
from cairnq.extensions.policies import _ops as policies_ops

from ._db import Database
from ._statements import sent_statements
from ._waits import eventually
from .test_hostile import raw

ROOT = Path(__file__).resolve().parents[1]


async def settled(cq: CairnQ, task_id: str) -> Any:
    return await cq.wait(task_id, timeout_ms=20_000, poll_ms=20, max_poll_ms=50)


def fixed(value: float) -> Any:
    return lambda: value


# --- the delays a policy computes -----------------------------------------------------------


def test_an_exponential_policy_doubles_its_window_from_its_base() -> None:
    retry = Retry(base="1s", jitter="none")
    assert [retry.delay_ms(a, None) for a in (1, 2, 3)] == [1000, 2000, 4000]


def test_a_linear_policy_grows_its_window_by_its_base() -> None:
    retry = Retry(backoff="linear", base="10s", jitter=False)
    assert [retry.delay_ms(a, None) for a in (1, 2, 3)] == [10_000, 20_000, 30_000]


def test_a_constant_policy_waits_its_base_every_time() -> None:
    retry = Retry(backoff="constant", base=timedelta(seconds=3), jitter="none")
    assert [retry.delay_ms(a, None) for a in (1, 5, 9)] == [3000, 3000, 3000]


def test_no_window_is_longer_than_the_maximum_delay() -> None:
    retry = Retry(base="1s", max_delay="5s", jitter="none")
    assert retry.delay_ms(10, None) == 5000


def test_equal_jitter_keeps_the_delay_in_the_upper_half_of_the_window() -> None:
    retry = Retry(backoff="constant", base="1s")
    assert (
        retry.delay_ms(1, None, rand=fixed(0.0)),
        retry.delay_ms(1, None, rand=fixed(0.99)),
    ) == (
        500,
        995,
    )


def test_full_jitter_spreads_the_delay_over_the_whole_window() -> None:
    retry = Retry(backoff="constant", base="1s", jitter="full")
    assert (retry.delay_ms(1, None, rand=fixed(0.0)), retry.delay_ms(1, None, rand=fixed(0.5))) == (
        0,
        500,
    )


def test_a_backoff_function_gets_the_attempt_and_the_error() -> None:
    seen: list[tuple[int, object]] = []

    def backoff(attempt: int, error: object) -> str:
        seen.append((attempt, error))
        return "30s" if isinstance(error, TimeoutError) else "1s"

    error = TimeoutError("slow")
    assert Retry(backoff=backoff).delay_ms(2, error) == 30_000
    assert seen == [(2, error)]


def test_the_workers_base_and_maximum_apply_where_the_policy_sets_none() -> None:
    retry = Retry(jitter="none")
    assert retry.delay_ms(3, None, base_ms=100, max_ms=250) == 250


def test_a_policy_does_not_retry_the_errors_it_names_nor_their_subclasses() -> None:
    retry = Retry(no_retry=(LookupError,))
    assert (retry.retries(KeyError("k")), retry.retries(ValueError("v"))) == (False, True)


# --- bad values refused -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_attempts": 0}, "max_attempts must be >= 1"),
        ({"max_attempts": "5"}, "max_attempts must be an integer"),
        ({"backoff": "quadratic"}, "backoff must be one of"),
        ({"base": "10"}, "base"),
        ({"base": -1}, "base"),
        ({"max_delay": True}, "max_delay must be a duration"),
        ({"max_delay": "400d"}, "max_delay"),
        ({"jitter": "half"}, "jitter must be one of"),
        ({"no_retry": ("KeyError",)}, "no_retry must be exception classes"),
        ({"no_retry": (int,)}, "no_retry must be exception classes"),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_a_retry_option_of_a_wrong_type_or_value_is_refused(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        Retry(**options)


def test_a_backoff_function_returning_no_duration_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="the backoff function's delay"):
        Retry(backoff=lambda attempt, error: "soon").delay_ms(1, None)


async def test_a_registration_with_a_bad_policy_registers_nothing(db: Database) -> None:
    worker = db.worker()
    handler = _noop
    with pytest.raises(InvalidArgument, match=r"retry must be a cairnq\.Retry"):
        worker.register("a", handler, retry={"max_attempts": 3})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="max_attempts must be >= 1"):
        worker.register("b", handler, max_attempts=0)
    with pytest.raises(InvalidArgument, match="timeout"):
        worker.register("c", handler, timeout="0s")
    with pytest.raises(InvalidArgument, match="give it once"):
        worker.register("d", handler, max_attempts=2, retry=Retry(max_attempts=4))
    assert len(worker.registry) == 0
    assert worker.client.handler_attempts == {}
    await worker.close()


async def test_a_task_definition_with_a_bad_policy_is_refused_at_submit_and_writes_nothing(
    db: Database,
) -> None:
    bad = TaskDef("job", retry="twice")
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match=r"TaskDef retry must be a cairnq\.Retry"):
            await cq.submit(bad)
        assert await cq.list() == []


BAD_TIMEOUTS: list[Any] = [[5], 0, -1, "-1s", "10", True, timedelta(0)]
BAD_ATTEMPTS: list[Any] = [0, -1, "3", 1.5, True]


def tasks_in_table(db: Database) -> int:
    [(count,)] = raw(db, "select count(*) from cairnq_tasks")
    return int(count)


async def refused_unsent(db: Database, call: Awaitable[Any], said: str) -> None:
    """``call`` (not yet begun, as a coroutine is) is refused with ``InvalidArgument``
    saying ``said``, before any statement reached the database."""
    with sent_statements(db) as sent, pytest.raises(InvalidArgument, match=said):
        await call
    assert sent == []


async def test_a_task_definition_with_a_bad_timeout_is_refused_at_submit_and_writes_nothing(
    db: Database,
) -> None:
    async with db.client() as cq:
        for timeout in BAD_TIMEOUTS:
            defn = TaskDef("job", timeout=timeout)
            said = "TaskDef timeout"
            await refused_unsent(db, cq.submit(defn), said)
            # The submit's own values do not let the definition's bad one through.
            own = {"key": "k", "max_attempts": 2, "timeout": "5s"}
            await refused_unsent(db, cq.submit(defn, **own), said)
            await refused_unsent(db, cq.submit_many([(defn, None)]), said)
    assert tasks_in_table(db) == 0


async def test_a_task_definition_with_a_bad_max_attempts_is_refused_at_submit_and_writes_nothing(
    db: Database,
) -> None:
    async with db.client() as cq:
        for attempts in BAD_ATTEMPTS:
            defn = TaskDef("job", max_attempts=attempts)
            said = "TaskDef max_attempts must be"
            await refused_unsent(db, cq.submit(defn), said)
            await refused_unsent(db, cq.submit(defn, key="k", max_attempts=2), said)
            await refused_unsent(db, cq.submit_many([(defn, None)]), said)
    assert tasks_in_table(db) == 0


async def test_a_task_definition_with_a_bad_timeout_or_max_attempts_registers_nothing(
    db: Database,
) -> None:
    worker = db.worker()
    for timeout in BAD_TIMEOUTS:
        with pytest.raises(InvalidArgument, match="TaskDef timeout"):
            worker.register(TaskDef("job", timeout=timeout), _noop)
        with pytest.raises(InvalidArgument, match="TaskDef timeout"):
            worker.register(TaskDef("job", timeout=timeout), _noop, timeout="5s")
    for attempts in BAD_ATTEMPTS:
        with pytest.raises(InvalidArgument, match="TaskDef max_attempts must be"):
            worker.register(TaskDef("job", max_attempts=attempts), _noop)
        with pytest.raises(InvalidArgument, match="TaskDef max_attempts must be"):
            worker.register(TaskDef("job", max_attempts=attempts), _noop, max_attempts=2)
    assert len(worker.registry) == 0
    assert worker.client.handler_attempts == {}
    await worker.close()


async def _noop(ctx: TaskContext) -> None:
    return None


# --- on a running worker ----------------------------------------------------------------------


async def test_a_handlers_max_attempts_is_written_by_the_client_its_worker_is_built_on(
    db: Database,
) -> None:
    async with db.client() as cq:
        worker = Worker(cq)
        worker.register("job", _noop, max_attempts=7)
        task = await cq.submit("job")
        many = await cq.submit_many([("job", {}), ("other", {})])
        explicit = await cq.submit("job", max_attempts=2)
        await worker.close()
    assert task.max_attempts == 7
    assert [t.max_attempts for t in many] == [7, 3]
    assert explicit.max_attempts == 2


async def test_a_task_definitions_retry_policy_gives_the_submits_max_attempts(
    db: Database,
) -> None:
    defn = TaskDef("job", retry=Retry(max_attempts=6))
    async with db.client() as cq:
        task = await cq.submit(defn)
    assert task.max_attempts == 6


async def test_a_handlers_lower_max_attempts_ends_a_task_whose_submit_gave_none(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    runs: list[int] = []

    @worker.task(retry=Retry(max_attempts=2))
    async def flaky(ctx: TaskContext) -> None:
        runs.append(ctx.attempt)
        raise RuntimeError("again")

    async with db.client() as cq, worker.background():
        task = await cq.submit("flaky")
        done = await settled(cq, task.id)
    await worker.close()
    assert (task.max_attempts, done.status, done.attempt, runs) == (3, "failed", 2, [1, 2])


async def test_a_submits_own_max_attempts_stands_over_its_handlers_lower_one(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    runs: list[int] = []

    @worker.task(max_attempts=2)
    async def flaky(ctx: TaskContext) -> None:
        runs.append(ctx.attempt)
        raise RuntimeError("again")

    async with db.client() as cq, worker.background():
        task = await cq.submit("flaky", max_attempts=4)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.attempt, runs) == ("failed", 4, [1, 2, 3, 4])


async def test_a_submits_retry_policy_max_attempts_stands_over_its_handlers_lower_one(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)
    runs: list[int] = []

    @worker.task(max_attempts=2)
    async def flaky(ctx: TaskContext) -> None:
        runs.append(ctx.attempt)
        raise RuntimeError("again")

    async with db.client() as cq:
        await cq.backend.arun(policies_ops.enable(0), write=True)
        async with worker.background():
            # 3 is also the protocol's default: the stored policy says the submit gave it.
            task = await cq.submit("flaky", retry=Retry(max_attempts=3, base=0))
            done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.attempt, runs) == ("failed", 3, [1, 2, 3])


async def test_an_error_the_policy_names_fails_the_task_at_once(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task(retry=Retry(no_retry=(KeyError,)))
    async def lookup(ctx: TaskContext) -> None:
        raise KeyError("missing")

    async with db.client() as cq, worker.background():
        task = await cq.submit("lookup", max_attempts=5)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.attempt) == ("failed", 1)
    assert (done.error["type"], done.error["retryable"]) == ("KeyError", False)


async def test_a_handlers_backoff_sets_the_next_run_of_a_failed_attempt(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task(retry=Retry(backoff=lambda attempt, error: "1h"))
    async def slow_retry(ctx: TaskContext) -> None:
        raise RuntimeError("later")

    async def requeued() -> Any:
        found = await cq.get(task.id)
        return found if found is not None and found.attempt == 1 and found.is_queued else None

    async with db.client() as cq, worker.background():
        task = await cq.submit("slow_retry")
        after = await eventually(requeued, "the task queued again")
    await worker.close()
    assert after.run_at_ms - after.updated_at_ms >= 3_599_000


async def test_a_handlers_timeout_fails_a_run_that_takes_longer(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task(timeout="50ms", max_attempts=1)
    async def stuck(ctx: TaskContext) -> None:
        await asyncio.Event().wait()

    async with db.client() as cq, worker.background():
        task = await cq.submit("stuck", max_attempts=1)
        done = await settled(cq, task.id)
    await worker.close()
    assert done.status == "failed"
    assert done.error["code"] == "handler_timeout"
    assert "timeout=50ms" in done.error["message"]


async def test_a_task_definitions_timeout_applies_to_the_handler_registered_with_it(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20)
    defn = TaskDef("stuck", timeout=timedelta(milliseconds=50), max_attempts=1)

    @worker.task(defn)
    async def stuck(ctx: TaskContext) -> None:
        await asyncio.Event().wait()

    async with db.client() as cq, worker.background():
        task = await cq.submit(defn)
        done = await settled(cq, task.id)
    await worker.close()
    assert (done.status, done.error["code"]) == ("failed", "handler_timeout")


# --- the Durable steps page's example ------------------------------------------------


def _durable_steps_example() -> str:
    text = (ROOT / "docs" / "steps.md").read_text()
    return re.findall(r"```python exec\n(.*?)```", text, re.S)[0]


def test_the_durable_steps_example_runs_as_written_with_its_handlers_max_attempts(
    tmp_path: Path,
) -> None:
    program = _durable_steps_example()
    assert "@worker.task(max_attempts=5)" in program
    (tmp_path / "bill.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "bill.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ch_7"
    with sqlite3.connect(tmp_path / "cairnq.db") as conn:
        rows = conn.execute("select status, max_attempts from cairnq_tasks").fetchall()
    assert rows == [("succeeded", 5)]
