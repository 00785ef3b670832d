"""Duration spellings of the options that had only ``*_ms`` or ``*_s`` ones.

Beside the reference SDK's ``*_ms`` options (kept, not deprecated): ``timeout=`` of
``wait``, ``wait_by_key``, ``call`` and ``ctx.wait``; ``older_than=`` of ``purge`` and
``Retention``. In place of cairnq's own (kept one release, each warning once):
``Worker(heartbeat_interval=, drain_timeout=, recovery_interval=)``,
``PostgresBackend(op_timeout=, listen_health=)``, ``Snooze(delay)`` and
``ctx.snooze(delay)`` for ``delay_ms=``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

import pytest

from cairnq import InvalidArgument, Retention, Snooze, TaskTimeout, Worker
from cairnq._deprecated import CairnQDeprecationWarning, forget_warnings
from cairnq.backends.postgres import PostgresBackend
from cairnq.testing import FakeClock

from ._db import Database
from .test_client import START_MS, make_canceled

# --- wait, wait_by_key, call, ctx.wait: timeout= beside timeout_ms= -------------------------


async def test_wait_with_a_duration_timeout_times_out_as_its_milliseconds(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("report.build", queue="unserved")
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait(task.id, timeout="50ms", poll_ms=10)
    assert excinfo.value.timeout_ms == 50


async def test_wait_by_key_takes_a_timeout_in_seconds(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("report.build", key="report-1", queue="unserved")
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.wait_by_key("report-1", timeout=0.04, poll_ms=10)
    assert excinfo.value.timeout_ms == 40


async def test_call_takes_a_timedelta_timeout(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(TaskTimeout) as excinfo:
            await cq.call(
                "report.build", queue="unserved", timeout=datetime.timedelta(seconds=0.03)
            )
    assert excinfo.value.timeout_ms == 30


async def test_call_with_a_negative_timeout_submits_nothing_and_names_it(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="timeout must be 0 seconds or more, got -5"):
            await cq.call("report.build", timeout=-5)
        assert await cq.list() == []


async def test_wait_refuses_timeout_and_timeout_ms_together(db: Database) -> None:
    async with db.client() as cq:
        task = await cq.submit("report.build", queue="unserved")
        with pytest.raises(InvalidArgument, match="give timeout or timeout_ms, not both"):
            await cq.wait(task.id, timeout="1s", timeout_ms=1000)


def test_the_blocking_wait_takes_a_duration_timeout(db: Database) -> None:
    with db.sync_client() as cq:
        task = cq.submit("report.build", queue="unserved")
        with pytest.raises(TaskTimeout) as excinfo:
            cq.wait(task.id, timeout="20ms", poll_ms=10)
    assert excinfo.value.timeout_ms == 20


async def test_ctx_wait_takes_a_duration_timeout(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def parent(ctx: Any, payload: Any) -> int:
        try:
            await ctx.wait(payload["id"], timeout="20ms", poll_ms=10)
        except TaskTimeout as exc:
            return exc.timeout_ms
        return -1

    async with db.client() as cq, worker.background():
        other = await cq.submit("report.build", queue="unserved")
        assert await cq.call("parent", {"id": other.id}, timeout="30s") == 20


# --- purge and Retention: older_than= beside older_than_ms= ---------------------------------


async def test_purge_older_than_a_duration_deletes_as_older_than_ms(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        old = await make_canceled(cq, "old")
        clock.advance(1_000)
        await make_canceled(cq, "recent")
        clock.advance(500)
        assert await cq.purge(older_than="1s") == [old.id]


async def test_purge_refuses_older_than_and_older_than_ms_together(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="give older_than or older_than_ms, not both"):
            await cq.purge(older_than="1d", older_than_ms=0)


def test_retention_older_than_a_duration_is_its_milliseconds() -> None:
    assert Retention(older_than="7d").rules == Retention(7 * 86_400_000).rules


def test_retention_older_than_by_status_reads_each_duration() -> None:
    by_status = Retention(older_than={"succeeded": "1d", "failed": 3600})
    assert by_status.rules == Retention({"succeeded": 86_400_000, "failed": 3_600_000}).rules


def test_retention_without_a_cutoff_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="retention needs a cutoff"):
        Retention()


# --- Worker(heartbeat_interval=, drain_timeout=, recovery_interval=) ------------------------


def test_worker_drain_timeout_reads_a_duration() -> None:
    assert Worker(":memory:", drain_timeout="5s").drain_timeout_ms == 5_000


def test_worker_heartbeat_interval_reads_a_timedelta() -> None:
    worker = Worker(":memory:", heartbeat_interval=datetime.timedelta(milliseconds=250))
    assert worker.heartbeat_interval_ms == 250


def test_worker_recovery_interval_reads_seconds() -> None:
    assert Worker(":memory:", recovery_interval=0.2).recovery_interval_ms == 200


def test_worker_duration_defaults_are_unchanged() -> None:
    worker = Worker(":memory:", lease_ms=30_000)
    periods = (worker.heartbeat_interval_ms, worker.recovery_interval_ms, worker.drain_timeout_ms)
    assert periods == (10_000, 15_000, 30_000)


def test_a_negative_drain_timeout_is_named_as_given() -> None:
    with pytest.raises(InvalidArgument, match="drain_timeout must be 0 seconds or more, got -5"):
        Worker(":memory:", drain_timeout=-5)


def test_a_heartbeat_interval_not_shorter_than_the_lease_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="heartbeat_interval must be at most 999ms, got '1s'"):
        Worker(":memory:", lease_ms=1_000, heartbeat_interval="1s")


def test_worker_refuses_a_duration_and_its_old_spelling_together() -> None:
    forget_warnings()
    with (
        pytest.warns(CairnQDeprecationWarning),
        pytest.raises(InvalidArgument, match="give drain_timeout or drain_timeout_ms, not both"),
    ):
        Worker(":memory:", drain_timeout="1s", drain_timeout_ms=1_000)


# --- PostgresBackend(op_timeout=, listen_health=) ---------------------------------------------


def test_postgres_op_timeout_reads_a_duration() -> None:
    assert PostgresBackend("postgresql://h/db", op_timeout="500ms").op_timeout_s == 0.5


def test_postgres_listen_health_reads_seconds() -> None:
    assert PostgresBackend("postgresql://h/db", listen_health=30).listen_health_s == 30.0


def test_postgres_op_timeout_none_waits_forever() -> None:
    assert PostgresBackend("postgresql://h/db", op_timeout=None).op_timeout_s is None


def test_postgres_refuses_op_timeout_and_op_timeout_s_together() -> None:
    forget_warnings()
    with (
        pytest.warns(CairnQDeprecationWarning),
        pytest.raises(InvalidArgument, match="give op_timeout or op_timeout_s, not both"),
    ):
        PostgresBackend("postgresql://h/db", op_timeout="1s", op_timeout_s=1.0)


# --- the old spellings, kept one release: each still works and warns --------------------------

OLD_SPELLINGS: dict[str, tuple[Callable[[], Any], Callable[[Any], bool]]] = {
    "Worker(drain_timeout_ms=...)": (
        lambda: Worker(":memory:", drain_timeout_ms=5_000),
        lambda w: w.drain_timeout_ms == 5_000,
    ),
    "Worker(recovery_interval_ms=...)": (
        lambda: Worker(":memory:", recovery_interval_ms=200),
        lambda w: w.recovery_interval_ms == 200,
    ),
    "PostgresBackend(op_timeout_s=...)": (
        lambda: PostgresBackend("postgresql://h/db", op_timeout_s=0.5),
        lambda b: b.op_timeout_s == 0.5,
    ),
    "PostgresBackend(listen_health_s=...)": (
        lambda: PostgresBackend("postgresql://h/db", listen_health_s=30),
        lambda b: b.listen_health_s == 30.0,
    ),
    "Snooze(delay_ms=...)": (lambda: Snooze(delay_ms=1_500), lambda s: s.delay_ms == 1_500),
}


@pytest.mark.parametrize("old", sorted(OLD_SPELLINGS))
def test_an_old_duration_spelling_still_works_and_warns(old: str) -> None:
    make, works = OLD_SPELLINGS[old]
    forget_warnings()
    with pytest.warns(CairnQDeprecationWarning, match=re.escape(old)):
        made = make()
    assert works(made)


async def test_ctx_snooze_delay_ms_still_works_and_warns(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    snoozed: list[str] = []

    @worker.task
    async def napper(ctx: Any) -> str:
        if not snoozed:
            snoozed.append(ctx.task_id)
            await ctx.snooze(delay_ms=0)
        return "awake"

    forget_warnings()
    async with db.client() as cq, worker.background():
        with pytest.warns(CairnQDeprecationWarning, match=r"ctx\.snooze\(delay_ms=\.\.\.\)"):
            assert await cq.call("napper", timeout="30s") == "awake"
    assert len(snoozed) == 1


# --- cq.activity(window=, bucket=) and the Starlette follow(poll=) -------------------------------


async def test_activity_takes_a_window_and_a_bucket_as_durations(db: Database) -> None:
    async with db.client() as cq:
        (series,) = await cq.activity(window="1m", bucket="20s", queue="idle")
    assert (series.bucket_ms, len(series.succeeded)) == (20_000, 3)


async def test_activity_window_ms_and_bucket_ms_still_work_and_warn(db: Database) -> None:
    forget_warnings()
    async with db.client() as cq:
        with pytest.warns(
            CairnQDeprecationWarning, match=r"cq\.activity\((window|bucket)_ms=\.\.\.\)"
        ):
            (series,) = await cq.activity(window_ms=60_000, bucket_ms=20_000, queue="idle")
    assert (series.bucket_ms, len(series.succeeded)) == (20_000, 3)


async def test_follow_poll_ms_still_works_and_warns(db: Database) -> None:
    starlette = pytest.importorskip("cairnq.contrib.starlette")
    forget_warnings()
    async with db.client() as cq:
        task = await cq.submit("report.build")
        await cq.cancel(task.id)
        with pytest.warns(CairnQDeprecationWarning, match=r"follow\(poll_ms=\.\.\.\)"):
            seen = [t.status async for t in starlette.follow(cq, task.id, poll_ms=20)]
    assert seen == ["canceled"]


# --- cq.presence.workers(within=), cq.presence.unserved(within=) ---------------------------------


async def test_presence_unserved_takes_a_duration_window(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("report.build")
        unserved = await cq.presence.unserved(within="1m")
    assert [(u.queue, u.name) for u in unserved] == [("default", "report.build")]


async def test_presence_workers_within_ms_still_works_and_warns(db: Database) -> None:
    forget_warnings()
    async with db.client() as cq:
        with pytest.warns(CairnQDeprecationWarning, match=r"cq\.presence\.workers\(within_ms="):
            assert await cq.presence.workers(within_ms=60_000) == []


async def test_presence_unserved_within_ms_still_works_and_warns(db: Database) -> None:
    forget_warnings()
    async with db.client() as cq:
        with pytest.warns(CairnQDeprecationWarning, match=r"cq\.presence\.unserved\(within_ms="):
            assert await cq.presence.unserved(within_ms=60_000) == []


def test_worker_heartbeat_interval_ms_the_reference_sdks_spelling_is_taken_without_a_warning() -> (
    None
):
    forget_warnings()
    worker = Worker(":memory:", heartbeat_interval_ms=250)
    assert worker.heartbeat_interval_ms == 250
