"""The read layer behind the dashboard and metrics: overview, keyset pages, activity, workers.

Tasks are moved to ``running``, ``succeeded`` or ``failed`` through the same
low-level operations a worker uses, under a worker id the test chooses, and
time comes from a ``FakeClock``, so every count, age and bucket is exact.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from cairnq import (
    STATUSES,
    CairnQ,
    InvalidArgument,
    QueueSummary,
    SyncCairnQ,
    WorkerInfo,
    kernel,
)
from cairnq.kernel.views import decode_cursor, encode_cursor, prefix_range
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database

WORKER = "worker_reads_test"
START_MS = 1_800_000_000_000


def claim(cq: SyncCairnQ, name: str, queue: str = "default", worker: str = WORKER) -> Lease:
    op = kernel.claim([queue], worker, 60_000, [kernel.Draw([name], 1)], 100)
    rows = cq.backend.run(op, write=True)
    assert len(rows) == 1
    return Lease.of(rows[0])


def succeed(cq: SyncCairnQ, lease: Lease, worker: str = WORKER) -> None:
    cq.backend.run(kernel.complete(lease, worker, json.dumps({"ok": True})), write=True)


def fail(cq: SyncCairnQ, lease: Lease) -> None:
    envelope = json.dumps({"type": "Boom", "code": "boom", "message": "no", "retryable": False})
    op = kernel.fail(lease, WORKER, envelope, retryable=False, delay_ms=0)
    cq.backend.run(op, write=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def cq(db: Database, clock: FakeClock) -> SyncCairnQ:
    return db.sync_client(clock=clock).open()


# --- overview --------------------------------------------------------------------------------


def test_overview_counts_every_status_per_queue_zero_filled_and_sorted(cq: SyncCairnQ) -> None:
    cq.submit("a", queue="zeta")
    cq.submit("a", queue="alpha")
    cq.submit("b", queue="alpha")
    succeed(cq, claim(cq, "b", "alpha"))
    claim(cq, "a", "alpha")
    summaries = cq.overview()
    assert [s.queue for s in summaries] == ["alpha", "zeta"]
    assert summaries[0].counts == dict.fromkeys(STATUSES, 0) | {"running": 1, "succeeded": 1}
    assert summaries[1].counts == dict.fromkeys(STATUSES, 0) | {"queued": 1}


def test_overview_age_is_now_minus_run_at_of_the_oldest_due_queued_task(
    cq: SyncCairnQ, clock: FakeClock
) -> None:
    cq.submit("first")
    clock.advance(5_000)
    cq.submit("second")
    clock.advance(2_000)
    assert cq.overview() == [
        QueueSummary("default", dict.fromkeys(STATUSES, 0) | {"queued": 2}, 7_000, due=2)
    ]


def test_overview_due_backlog_counts_due_queued_tasks_only(cq: SyncCairnQ) -> None:
    for _ in range(3):
        cq.submit("now")
    cq.submit("later", delay_ms=60_000)
    claim(cq, "now", "default")
    (summary,) = cq.overview()
    assert (summary.counts["queued"], summary.due) == (3, 2)


def test_overview_age_ignores_tasks_delayed_into_the_future(cq: SyncCairnQ) -> None:
    cq.submit("later", delay_ms=60_000)
    assert cq.overview()[0].oldest_queued_age_ms is None
    assert cq.overview()[0].due == 0


def test_overview_of_an_empty_database_is_empty(cq: SyncCairnQ) -> None:
    assert cq.overview() == []


async def test_async_overview_matches_the_sync_one(db: Database, clock: FakeClock) -> None:
    sync = db.sync_client(clock=clock).open()
    sync.submit("a", queue="q")
    async with db.client(clock=clock) as cq:
        assert await cq.overview() == sync.overview()


# --- keyset pages ----------------------------------------------------------------------------


def test_pages_walk_every_task_newest_first_by_id_without_overlap(cq: SyncCairnQ) -> None:
    ids = [cq.submit("t", {"i": i}).id for i in range(7)]
    expected = sorted(ids, reverse=True)
    seen: list[str] = []
    page = cq.list_page(limit=3)
    seen += [t.id for t in page.tasks]
    while page.next_cursor:
        page = cq.list_page(limit=3, cursor=page.next_cursor)
        seen += [t.id for t in page.tasks]
    assert seen == expected


def test_the_last_page_has_no_cursor(cq: SyncCairnQ) -> None:
    cq.submit("t")
    cq.submit("t")
    assert cq.list_page(limit=2).next_cursor is None


def test_a_cursor_stays_correct_while_new_tasks_arrive(cq: SyncCairnQ) -> None:
    for _ in range(4):
        cq.submit("old")
    first = cq.list_page(limit=2)
    # Ids carry the wall-clock millisecond of submission: a later one sorts after.
    time.sleep(0.002)
    for _ in range(3):
        cq.submit("new")
    second = cq.list_page(limit=2, cursor=first.next_cursor)
    assert [t.name for t in second.tasks] == ["old", "old"]
    assert {t.id for t in first.tasks}.isdisjoint(t.id for t in second.tasks)


def test_listed_tasks_leave_out_payload_result_and_metadata(cq: SyncCairnQ) -> None:
    cq.submit("t", {"big": "x" * 1000}, metadata={"m": 1})
    succeed(cq, claim(cq, "t"))
    (task,) = cq.list_page().tasks
    assert (task.payload, task.result, task.metadata) == (None, None, None)
    assert task.status == "succeeded"


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("status", "failed", "failing"),
        ("queue", "emails", "mailer"),
        ("name", "mailer", "mailer"),
        ("key", "k-1", "keyed"),
        ("correlation_id", "req-9", "correlated"),
    ],
)
def test_pages_filter_by_each_field(cq: SyncCairnQ, field: str, value: str, match: str) -> None:
    cq.submit("plain")
    cq.submit("mailer", queue="emails")
    cq.submit("keyed", key="k-1")
    cq.submit("correlated", correlation_id="req-9")
    cq.submit("failing")
    fail(cq, claim(cq, "failing"))
    page = cq.list_page(**{field: value})
    assert [t.name for t in page.tasks] == [match]


def test_id_prefix_finds_the_ids_that_start_with_it(cq: SyncCairnQ) -> None:
    tasks = [cq.submit("t") for _ in range(3)]
    target = tasks[1].id
    found = cq.list_page(id_prefix=target[:-1]).tasks
    assert target in [t.id for t in found]
    assert all(t.id.startswith(target[:-1]) for t in found)
    assert [t.id for t in cq.list_page(id_prefix=target).tasks] == [target]


@pytest.mark.parametrize("pattern", ["task%", "task_%", "%", "_"])
def test_id_prefix_is_text_not_a_pattern(cq: SyncCairnQ, pattern: str) -> None:
    cq.submit("t")
    assert cq.list_page(id_prefix=pattern).tasks == []


def test_a_malformed_cursor_is_refused(cq: SyncCairnQ) -> None:
    with pytest.raises(InvalidArgument, match="cursor"):
        cq.list_page(cursor="nonsense")


def test_a_page_size_over_the_limit_is_refused(cq: SyncCairnQ) -> None:
    with pytest.raises(InvalidArgument, match="limit"):
        cq.list_page(limit=1001)


def test_cursors_round_trip() -> None:
    assert decode_cursor(encode_cursor("task_A.B")) == "task_A.B"


def test_a_cursor_of_another_form_is_refused(cq: SyncCairnQ) -> None:
    task = cq.submit("t")
    with pytest.raises(InvalidArgument, match="cursor"):
        cq.list_page(cursor=f"1800000000000.{task.id}")


def test_prefix_range_bounds_exactly_the_strings_with_the_prefix() -> None:
    low, high = prefix_range("task_0Z")
    assert (low, high) == ("task_0Z", "task_0[")
    assert prefix_range("a\U0010ffff") == ("a\U0010ffff", "b")
    assert prefix_range("\U0010ffff") == ("\U0010ffff", None)
    assert prefix_range("a\ud7ff") == ("a\ud7ff", "a\ue000")


# --- activity --------------------------------------------------------------------------------


def test_activity_counts_finished_tasks_per_bucket_by_outcome(
    cq: SyncCairnQ, clock: FakeClock
) -> None:
    for name in ("ok1", "bad", "ok2", "gone"):
        cq.submit(name, queue="q")
    succeed(cq, claim(cq, "ok1", "q"))  # 30 minutes ago: the first of three 10-minute buckets
    clock.advance(25 * 60_000)
    fail(cq, claim(cq, "bad", "q"))  # 5 minutes ago: the last bucket
    succeed(cq, claim(cq, "ok2", "q"))
    cq.cancel(cq.list(name="gone")[0].id)
    clock.advance(5 * 60_000)
    (series,) = cq.activity(window="30m", bucket="10m")
    assert series.queue == "q"
    assert series.start_ms == clock.now_ms() - 30 * 60_000
    assert series.succeeded == (1, 0, 1)
    assert series.failed == (0, 0, 1)
    assert series.canceled == (0, 0, 1)
    assert series.failure_rate == pytest.approx(1 / 3)


def test_activity_leaves_out_tasks_finished_before_the_window(
    cq: SyncCairnQ, clock: FakeClock
) -> None:
    cq.submit("t")
    succeed(cq, claim(cq, "t"))
    clock.advance(3_600_001)
    assert cq.activity() == []


def test_activity_of_a_named_queue_is_zeros_when_nothing_finished(cq: SyncCairnQ) -> None:
    (series,) = cq.activity(window="1m", bucket="20s", queue="idle")
    assert (series.queue, series.succeeded, series.failure_rate) == ("idle", (0, 0, 0), None)


def test_activity_refuses_more_than_a_thousand_buckets(cq: SyncCairnQ) -> None:
    with pytest.raises(InvalidArgument, match="buckets"):
        cq.activity(window="1h", bucket="1s")


# --- workers ---------------------------------------------------------------------------------


async def seen(cq: CairnQ, worker_id: str) -> dict[str, WorkerInfo]:
    """The workers listed once ``worker_id`` is among them (its first write is asynchronous)."""
    for _ in range(100):
        infos = {i.worker_id: i for i in await cq.presence.workers()}
        if worker_id in infos and infos[worker_id].last_seen_ms is not None:
            return infos
        await asyncio.sleep(0.05)
    raise AssertionError(f"{worker_id} never showed up")


def test_a_lease_held_by_another_sdk_shows_as_a_worker_from_its_running_tasks(
    cq: SyncCairnQ,
) -> None:
    task = cq.submit("t")
    claim(cq, "t", worker="ts-worker-1")
    (info,) = cq.presence.workers()
    assert info.worker_id == "ts-worker-1"
    assert info.last_seen_ms is None and info.queues is None
    assert [t.id for t in info.running] == [task.id]


def test_an_expired_lease_is_not_running_on_any_worker(cq: SyncCairnQ, clock: FakeClock) -> None:
    cq.submit("t")
    claim(cq, "t", worker="ts-worker-1")
    clock.advance(60_001)
    assert cq.presence.workers() == []


async def test_a_running_cairnq_worker_lists_itself_with_its_queues_and_task(
    db: Database,
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    worker = db.worker(queues=["emails", "default"], concurrency=3)

    @worker.task
    async def slow(ctx: object, payload: object) -> None:
        started.set()
        await release.wait()

    async with db.client() as cq, worker.background():
        task = await cq.submit("slow", queue="emails")
        await asyncio.wait_for(started.wait(), 10)
        infos = await seen(cq, worker.worker_id)
        release.set()
    info = infos[worker.worker_id]
    assert info.queues == ("emails", "default")
    assert info.concurrency == 3
    assert info.pid is not None and info.last_seen_ms is not None
    assert [t.id for t in info.running] == [task.id]


async def test_a_worker_that_stops_cleanly_removes_itself(db: Database) -> None:
    worker = db.worker()

    @worker.task
    async def noop(ctx: object, payload: object) -> None:
        return None

    async with db.client() as cq:
        async with worker.background():
            await cq.call("noop", timeout_ms=10_000)
        assert await cq.presence.workers() == []


def test_the_read_models_are_exported_from_the_package() -> None:
    import cairnq

    assert {"QueueSummary", "TaskPage", "QueueActivity", "WorkerInfo"} <= set(cairnq.__all__)


def test_without_the_workers_table_lease_holders_still_show(sqlite_db: Database) -> None:
    import sqlite3

    sqlite_db.sync_client().open().stats()
    assert sqlite_db.path is not None
    with sqlite3.connect(sqlite_db.path) as conn:
        conn.execute("drop table cairnq_workers")
        conn.execute("delete from cairnq_migrations where name = 'x0002_workers.sql'")
    cq = sqlite_db.sync_client(migrate=False).open()
    cq.submit("t")
    claim(cq, "t", worker="ts-worker-1")
    assert [w.worker_id for w in cq.presence.workers()] == ["ts-worker-1"]


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"id_prefix": "task_01"}, "sqlite_autoindex_cairnq_tasks_1"),
        ({"root_id": "r", "status": "failed"}, "cairnq_tasks_root_idx"),
        ({"correlation_id": "c"}, "cairnq_tasks_correlation_idx"),
        ({"name": "n", "queue": "q"}, "cairnq_tasks_name_idx"),
        ({"status": "failed"}, "cairnq_tasks_status_completed_idx"),
        ({"queue": "q"}, "cairnq_tasks_claim"),
    ],
)
def test_a_filtered_page_reads_through_an_index(
    sqlite_db: Database, filters: dict[str, str], index: str
) -> None:
    import sqlite3

    from cairnq.kernel import views as _reads
    from cairnq.protocol.statements import statements

    sqlite_db.sync_client().open().stats()
    op = _reads.list_page(**filters)
    step = next(op)
    if step.statement.startswith("list_count_"):
        step = op.send([{"n": 0}])  # a rare value: its index serves the page
    assert sqlite_db.path is not None
    with sqlite3.connect(sqlite_db.path) as conn:
        text = statements("sqlite")[step.statement].text
        plan = " | ".join(r[3] for r in conn.execute("explain query plan " + text, step.params))
    assert f"USING INDEX {index}" in plan
    assert "SCAN cairnq_tasks" not in plan


@pytest.mark.parametrize(
    "filters",
    [{}, {"id_prefix": "task_01"}, {"status": "succeeded"}, {"queue": "q", "name": "n"}],
)
def test_a_page_in_id_order_walks_the_primary_key_without_sorting(
    sqlite_db: Database, filters: dict[str, str]
) -> None:
    import sqlite3

    from cairnq.kernel import views as _reads
    from cairnq.protocol.statements import statements

    sqlite_db.sync_client().open().stats()
    op = _reads.list_page(cursor=_reads.encode_cursor("task_01"), **filters)
    step = next(op)
    if step.statement.startswith("list_count_"):
        step = op.send([{"n": _reads.INDEX_SORT_MAX}])  # a common value: walk the key
    assert sqlite_db.path is not None
    with sqlite3.connect(sqlite_db.path) as conn:
        text = statements("sqlite")[step.statement].text
        plan = " | ".join(r[3] for r in conn.execute("explain query plan " + text, step.params))
    assert "USING INDEX sqlite_autoindex_cairnq_tasks_1 (id>? AND id<?)" in plan or (
        "USING INDEX sqlite_autoindex_cairnq_tasks_1 (id<?)" in plan
    )
    assert "TEMP B-TREE" not in plan


@pytest.mark.parametrize(
    ("filters", "common"),
    [({"status": "queued"}, "queued"), ({"queue": "q"}, "q"), ({"name": "n"}, "n")],
)
def test_a_filter_on_a_common_value_is_served_by_the_key_walk(
    filters: dict[str, str], common: str
) -> None:
    from cairnq.kernel import views as _reads

    op = _reads.list_page(**filters)
    probe = next(op)
    assert common in probe.params.values()
    assert op.send([{"n": _reads.INDEX_SORT_MAX}]).statement == "list_page"


@pytest.mark.parametrize("cap", [1, 100], ids=["key walk", "index and sort"])
def test_pages_by_queue_are_the_same_whichever_statement_serves_them(
    cq: SyncCairnQ, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    from cairnq.kernel import views as _reads

    monkeypatch.setattr(_reads, "INDEX_SORT_MAX", cap)
    ids = [cq.submit("t", queue="a" if i % 2 else "b").id for i in range(7)]
    expected = sorted(ids[1::2], reverse=True)
    seen: list[str] = []
    page = cq.list_page(queue="a", limit=2)
    seen += [t.id for t in page.tasks]
    while page.next_cursor:
        page = cq.list_page(queue="a", limit=2, cursor=page.next_cursor)
        seen += [t.id for t in page.tasks]
    assert seen == expected


def test_a_key_outside_the_id_prefix_lists_nothing(cq: SyncCairnQ) -> None:
    task = cq.submit("t", key="k")
    assert cq.list_page(key="k", id_prefix="task_").tasks[0].id == task.id
    assert cq.list_page(key="k", id_prefix="nope").tasks == []
    assert cq.list_page(key="missing").tasks == []


@pytest.mark.parametrize(
    ("field", "index"),
    [
        ("name", "cairnq_tasks_name_idx"),
        ("status", "cairnq_tasks_status_completed_idx"),
        ("queue", "cairnq_tasks_claim"),
    ],
)
def test_the_count_before_a_filtered_page_reads_only_its_index(
    sqlite_db: Database, field: str, index: str
) -> None:
    import sqlite3

    from cairnq.kernel import views as _reads
    from cairnq.protocol.statements import statements

    sqlite_db.sync_client().open().stats()
    probe = next(_reads.list_page(**{field: "queued"}))
    assert probe.statement == f"list_count_{field}"
    assert probe.params["cap"] == _reads.INDEX_SORT_MAX
    assert sqlite_db.path is not None
    with sqlite3.connect(sqlite_db.path) as conn:
        text = statements("sqlite")[probe.statement].text
        plan = " | ".join(r[3] for r in conn.execute("explain query plan " + text, probe.params))
    assert f"USING COVERING INDEX {index}" in plan
