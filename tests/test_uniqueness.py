"""Uniqueness over time, debounce and throttle (docs/uniqueness.md), on every backend.

Time is a ``FakeClock`` the backend reads: a period ends when the test advances the
clock. Concurrent submitters are threads, each with its own client (its own
connection on PostgreSQL), let go together.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from cairnq import AlreadyExists, InvalidArgument, SyncCairnQ, TaskDef
from cairnq.models import Task
from cairnq.testing import FakeClock
from cairnq.uniqueness import NotUnique, Period, Throttle, Throttled

from ._db import Database
from ._statements import sent_statements
from .test_hostile import raw

START_MS = 1_800_000_000_000
HOUR_MS = 3_600_000


def _count(cq: Any) -> int:
    return sum(sum(by_status.values()) for by_status in cq.stats().values())


# --- unique_for -------------------------------------------------------------------------


async def test_a_second_submit_within_unique_for_returns_the_first_task(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit("report", {"n": 1}, key="r", unique_for="1h")
        second = await cq.submit("report", {"n": 2}, key="r", unique_for="1h")
        assert second.id == first.id
        assert second.payload == {"n": 1}
        assert (await cq.stats())["default"]["queued"] == 1


async def test_unique_for_holds_after_the_task_finished(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(first.id)
        again = await cq.submit("report", key="r", unique_for="1h")
        assert again.id == first.id
        assert again.status == "canceled"


async def test_unique_for_holds_after_the_task_was_purged(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(first.id)
        clock.advance(1)
        assert await cq.purge(older_than_ms=0) == [first.id]
        with pytest.raises(NotUnique) as caught:
            await cq.submit("report", key="r", unique_for="1h")
        assert (caught.value.key, caught.value.task_id) == ("r", first.id)
        assert caught.value.purged
        assert caught.value.until_ms == START_MS + HOUR_MS
        assert await cq.stats() == {}


async def test_a_submit_after_the_period_inserts_a_new_task(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(first.id)
        clock.advance(HOUR_MS)
        second = await cq.submit("report", key="r", unique_for="1h")
        assert second.id != first.id
        clock.advance(HOUR_MS - 1)
        assert (await cq.submit("report", key="r", unique_for="1h")).id == second.id


async def test_the_period_is_the_one_given_by_the_submit_that_inserted(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("report", key="r", unique_for="10s")
        await cq.cancel(first.id)
        clock.advance(10_000)
        assert (await cq.submit("report", key="r", unique_for="1h")).id != first.id


async def test_reject_within_the_period_raises_not_unique(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        with pytest.raises(NotUnique) as caught:
            await cq.submit("report", key="r", unique_for="1h", conflict="reject")
        assert isinstance(caught.value, AlreadyExists)
        assert (caught.value.task_id, caught.value.purged) == (first.id, False)


async def test_reject_within_a_period_whose_task_was_purged_says_so(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(first.id)
        clock.advance(1)
        await cq.purge(older_than_ms=0)
        with pytest.raises(NotUnique) as caught:
            await cq.submit("report", key="r", unique_for="1h", conflict="reject")
        assert caught.value.purged


async def test_unique_for_on_a_task_def_applies_to_its_submits(db: Database) -> None:
    report = TaskDef[Any, Any]("report", options={"unique_for": datetime.timedelta(hours=1)})
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit(report, key="r")
        await cq.cancel(first.id)
        assert (await cq.submit(report, key="r")).id == first.id


async def test_a_submit_without_unique_for_follows_the_key_alone(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(first.id)
        assert (await cq.submit("report", key="r")).id != first.id


async def test_a_unique_submit_reusing_the_keys_live_task_starts_its_period(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        plain = await cq.submit("report", key="r")
        assert (await cq.submit("report", key="r", unique_for="1h")).id == plain.id
        await cq.cancel(plain.id)
        assert (await cq.submit("report", key="r", unique_for="1h")).id == plain.id


async def test_the_namespace_reads_the_keys_running_period(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        assert await cq.uniqueness.period("r") is None
        first = await cq.submit("report", key="r", unique_for="1h")
        assert await cq.uniqueness.period("r") == Period(
            "r", first.id, START_MS, START_MS + HOUR_MS
        )
        clock.advance(HOUR_MS)
        assert await cq.uniqueness.period("r") is None


def test_the_blocking_namespace_counts_a_throttle_keys_tasks(db: Database) -> None:
    with db.sync_client(clock=FakeClock(START_MS)) as cq:
        assert cq.uniqueness.throttled("t") == 0
        cq.submit("sms", throttle=Throttle(5, "1m", key="t"))
        cq.submit("sms", throttle=Throttle(5, "1m", key="t"))
        assert cq.uniqueness.throttled("t") == 2


def _from_threads(
    db: Database, threads: int, each: Callable[[SyncCairnQ, int], list[Any]]
) -> list[Any]:
    """``each(client, index)`` in ``threads`` threads at once, each with its own client."""
    clients = [db.sync_client() for _ in range(threads)]
    for client in clients:
        client.open()
    start = threading.Barrier(threads)

    def run(client: SyncCairnQ, index: int) -> list[Any]:
        start.wait()
        return each(client, index)

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = [pool.submit(run, c, i) for i, c in enumerate(clients)]
            return [item for f in futures for item in f.result()]
    finally:
        for client in clients:
            client.close()


def test_concurrent_submitters_under_unique_for_store_one_task_per_key(db: Database) -> None:
    def each(cq: SyncCairnQ, index: int) -> list[Any]:
        out: list[Any] = []
        for round_ in range(5):
            for key in ("a", "b"):
                task = cq.submit("job", {"t": index, "r": round_}, key=key, unique_for="1h")
                out.append((key, task.id))
                cq.cancel(task.id)  # a key alone would take the next submit anew
        return out

    outcomes = _from_threads(db, 4, each)
    ids = {key: {i for k, i in outcomes if k == key} for key in ("a", "b")}
    assert [len(ids["a"]), len(ids["b"])] == [1, 1]
    with db.sync_client() as cq:
        assert _count(cq) == 2


# --- debounce ---------------------------------------------------------------------------


async def test_debounce_gives_the_pending_task_the_last_payload_and_pushes_it_back(
    db: Database,
) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("index", {"v": 1}, key="i", debounce="30s")
        assert first.run_at_ms == START_MS + 30_000
        clock.advance(10_000)
        last = await cq.submit("index", {"v": 2}, key="i", debounce="30s", metadata={"m": 2})
        assert last.id == first.id
        assert (last.payload, last.metadata) == ({"v": 2}, {"m": 2})
        assert last.run_at_ms == START_MS + 40_000
        assert (await cq.stats())["default"]["queued"] == 1


async def test_debounce_after_the_task_started_goes_by_the_key_conflict(db: Database) -> None:
    from cairnq import kernel

    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        first = await cq.submit("index", {"v": 1}, key="i", debounce="1ms")
        clock.advance(1)
        claim = kernel.claim(["default"], "w", 30_000, [kernel.Draw(None, 1)], 0)
        assert len(await cq.backend.arun(claim, write=True)) == 1
        running = await cq.submit("index", {"v": 2}, key="i", debounce="30s")
        assert (running.id, running.payload) == (first.id, {"v": 1})
        replaced = await cq.submit("index", {"v": 3}, key="i", debounce="30s", conflict="replace")
        assert replaced.id != first.id and replaced.payload == {"v": 3}


async def test_debounce_leaves_a_pending_task_of_another_name_alone(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        first = await cq.submit("index", {"v": 1}, key="i", debounce="30s")
        other = await cq.submit("reindex", {"v": 2}, key="i", debounce="30s")
        assert other.id == first.id and other.payload == {"v": 1}


async def test_debounce_leaves_a_task_waiting_for_its_dependencies_alone(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        before = await cq.submit("fetch")
        parked = await cq.submit("index", {"v": 1}, key="i", depends_on=[before])
        again = await cq.submit("index", {"v": 2}, key="i", debounce="30s")
        assert (again.id, again.payload, again.run_at_ms) == (
            parked.id,
            {"v": 1},
            parked.run_at_ms,
        )


def test_concurrent_debounced_submits_leave_one_pending_task(db: Database) -> None:
    def each(cq: SyncCairnQ, index: int) -> list[Any]:
        return [
            cq.submit("index", {"t": index, "n": n}, key="i", debounce="1h").id for n in range(5)
        ]

    ids = set(_from_threads(db, 4, each))
    assert len(ids) == 1
    with db.sync_client() as cq:
        [task] = cq.list()
        assert task.payload in [{"t": t, "n": 4} for t in range(4)]
        assert _count(cq) == 1


# --- throttle ---------------------------------------------------------------------------


async def test_throttle_refuses_the_submit_over_its_count(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        for n in range(3):
            await cq.submit("sms", {"n": n}, throttle=Throttle(3, "1m", key="user:1"))
        clock.advance(15_000)
        with pytest.raises(Throttled) as caught:
            await cq.submit("sms", {"n": 3}, throttle=Throttle(3, "1m", key="user:1"))
        assert (caught.value.key, caught.value.limit, caught.value.per_ms) == ("user:1", 3, 60_000)
        assert caught.value.retry_after_ms == 45_000
        assert (await cq.stats())["default"]["queued"] == 3


async def test_throttle_makes_room_as_the_period_slides(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        await cq.submit("sms", throttle=(1, "1m"), key="u")
        clock.advance(60_000)
        await cq.cancel((await cq.get_by_key("u")).id)  # type: ignore[union-attr]
        assert (await cq.submit("sms", throttle=(1, "1m"), key="u")).status == "queued"


async def test_throttle_keys_count_apart(db: Database) -> None:
    async with db.client(clock=FakeClock(START_MS)) as cq:
        await cq.submit("sms", throttle=Throttle(1, "1m", key="a"))
        await cq.submit("sms", throttle=Throttle(1, "1m", key="b"))
        assert (await cq.stats())["default"]["queued"] == 2


def test_concurrent_submitters_under_a_throttle_store_its_count(db: Database) -> None:
    def each(cq: SyncCairnQ, index: int) -> list[Any]:
        out: list[Any] = []
        for n in range(5):
            try:
                out.append(cq.submit("sms", {"n": n}, throttle=Throttle(7, "1h", key="t")))
            except Throttled as exc:
                out.append(exc)
        return out

    outcomes = _from_threads(db, 4, each)
    assert sum(isinstance(o, Task) for o in outcomes) == 7
    with db.sync_client() as cq:
        assert _count(cq) == 7


# --- refusals: a test per option, nothing written ---------------------------------------


BAD = [
    ({"unique_for": "soon", "key": "k"}, "unique_for"),
    ({"unique_for": -1, "key": "k"}, "unique_for"),
    ({"unique_for": True, "key": "k"}, "unique_for"),
    ({"unique_for": "1h"}, "needs a key"),
    ({"unique_for": "1h", "key": "k", "conflict": "replace"}, "replace"),
    ({"debounce": [1], "key": "k"}, "debounce"),
    ({"debounce": 0, "key": "k"}, "debounce"),
    ({"debounce": "1s"}, "needs a key"),
    ({"debounce": "1s", "key": "k", "delay": "1m"}, "delay"),
    ({"debounce": "1s", "key": "k", "unique_for": "1h"}, "alone"),
    ({"throttle": 5, "key": "k"}, "Throttle"),
    ({"throttle": Throttle(0, "1m"), "key": "k"}, "throttle limit"),
    ({"throttle": Throttle(1, "forever"), "key": "k"}, "throttle period"),
    ({"throttle": Throttle(1, "1m")}, "needs a key"),
    ({"throttle": Throttle(1, "1m", key="")}, "throttle key"),
    ({"unique_for": "1h", "key": "k", "expires_in": "1m"}, "not taken with retry"),
    ({"debounce": "1s", "key": "k", "timeout": "1m"}, "not taken with retry"),
]


@pytest.mark.parametrize(("options", "said"), BAD, ids=[str(o) for o, _ in BAD])
async def test_a_bad_option_is_refused_and_nothing_is_written(
    db: Database, options: dict[str, Any], said: str
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument, match=said):
            await cq.submit("job", **options)
        assert sent == []


async def test_a_task_def_with_an_unknown_option_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument, match="TaskDef options"):
            await cq.submit(TaskDef[Any, Any]("job", options={"unique": "1h"}), key="k")
        assert sent == []


BAD_UNIQUE_FOR: list[tuple[Any, str]] = [
    ("soon", "unique_for: invalid duration"),
    ("10", "unique_for: duration '10' has no unit"),
    ([1], "unique_for must be a duration"),
    (True, "unique_for must be a duration"),
    (0, "unique_for must be 0.001 seconds or more"),
    (-1, "unique_for must be 0.001 seconds or more"),
    ("-1h", "unique_for: duration '-1h' is negative"),
    (datetime.timedelta(seconds=-5), "unique_for"),
]


async def test_a_task_def_with_a_bad_unique_for_is_refused_and_nothing_is_written(
    db: Database,
) -> None:
    async with db.client() as cq:
        for value, said in BAD_UNIQUE_FOR:
            defn = TaskDef[Any, Any]("job", options={"unique_for": value})
            with sent_statements(db) as sent, pytest.raises(InvalidArgument, match=said):
                await cq.submit(defn, key="k")
            assert sent == [], value
    assert raw(db, "select count(*) from cairnq_tasks") == [(0,)]


@pytest.mark.parametrize("word", ["unique_for", "debounce", "throttle"])
async def test_a_batch_refuses_the_option_and_writes_nothing(db: Database, word: str) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent:
            with pytest.raises(
                InvalidArgument, match=f"unknown submit_many fields: \\['{word}'\\]"
            ):
                await cq.submit_many([{"task": "job"}, {"task": "job", "key": "k", word: "1h"}])
            with pytest.raises(
                InvalidArgument, match=f"batch submit takes no TaskDef options \\({word}\\)"
            ):
                await cq.submit_many_ids([(TaskDef[Any, Any]("job", options={word: "1h"}), None)])
        assert sent == []


async def test_submits_without_the_options_never_reach_the_extensions_tables(
    db: Database,
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent:
            await cq.submit("job")
            await cq.submit("job", key="k", delay="1s")
            await cq.submit(TaskDef[Any, Any]("job"), key="k2")
            await cq.submit_many([{"task": "job", "key": "k3"}, ("job", None)])
            await cq.submit_many_ids([{"task": "job", "key": "k4"}])
        assert not [line for line in sent if "uniqueness" in line]
        assert [line for line in sent if "insert into cairnq_tasks" in line]


async def test_a_refused_throttle_or_purged_period_writes_nothing(db: Database) -> None:
    clock = FakeClock(START_MS)
    async with db.client(clock=clock) as cq:
        await cq.submit("sms", throttle=Throttle(1, "1m", key="t"))
        gone = await cq.submit("report", key="r", unique_for="1h")
        await cq.cancel(gone.id)
        clock.advance(1)
        await cq.purge(older_than_ms=0)
        before = await cq.stats()
        with pytest.raises(Throttled):
            await cq.submit("sms", key="fresh", throttle=Throttle(1, "1m", key="t"))
        with pytest.raises(NotUnique):
            await cq.submit("report", key="r", unique_for="1h")
        assert await cq.stats() == before
        assert await cq.get_by_key("fresh") is None


async def test_a_unique_submit_on_a_database_without_the_tables_says_what_is_missing(
    db: Database,
) -> None:
    from cairnq import SchemaIncomplete

    from .test_without_extensions import migrate_only

    migrate_only(db, lambda name: name != "x0018_uniqueness.sql")
    async with db.client(migrate=False) as cq:
        with pytest.raises(SchemaIncomplete, match="cairnq_uniqueness"):
            await cq.submit("report", key="r", unique_for="1h")
        assert await cq.stats() == {}
        assert (await cq.submit("report", key="r")).status == "queued"


def test_a_unique_submit_rolled_back_with_the_application_leaves_no_period(
    pg_db: Database,
) -> None:
    import psycopg

    with psycopg.connect(pg_db.url) as conn, pg_db.sync_client() as cq:
        cq.stats()
        conn.execute(f'set search_path to "{pg_db.schema}"')
        conn.commit()
        gone = cq.submit("report", key="r", unique_for="1h", conn=conn)
        conn.rollback()
        assert cq.get(gone.id) is None
        assert cq.uniqueness.period("r") is None
        kept = cq.submit("report", key="r", unique_for="1h", conn=conn)
        conn.commit()
        period = cq.uniqueness.period("r")
        assert period is not None and period.task_id == kept.id
        assert period.until_ms - period.started_ms == 3_600_000
        assert cq.submit("report", key="r", unique_for="1h").id == kept.id
