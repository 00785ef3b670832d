"""What a page of ``list_page`` reads stays about the same however many tasks exist.

Work is measured the way the idle probe's is (``test_client``): SQLite virtual
machine steps through a progress handler, PostgreSQL buffers from
``EXPLAIN (ANALYZE, BUFFERS)``. Each test runs the very statement and parameters
the read op chooses, on a small table and then on one a hundred times larger.
"""

from __future__ import annotations

import re
from typing import Any

from cairnq import SyncCairnQ, kernel
from cairnq.kernel import views as _reads
from cairnq.protocol.statements import statements
from cairnq.protocol.steps import Call

from ._db import Database, admin_connect, statement_work

SMALL, LARGE = 100, 20_000
WORKER = "worker_list_cost_test"


def chosen_call(**filters: Any) -> Call:
    """The page statement ``list_page(**filters)`` runs, its count probe answered ``count``."""
    count = filters.pop("count", 0)
    op = _reads.list_page(**filters)
    step = next(op)
    while step.statement.startswith("list_count_"):
        step = op.send([{"n": count}])
    assert isinstance(step, Call)
    return step


def page_work(db: Database, call: Call, *, generic: bool = False) -> tuple[int, int]:
    """(work, rows) of one run of ``call``: SQLite VM steps or PostgreSQL buffers touched.

    ``generic`` (PostgreSQL) runs it as a prepared statement under a generic plan, one
    made without the parameter values, as psycopg's prepared statements may get.
    """
    dialect = "sqlite" if db.kind == "sqlite" else "postgres"
    statement = statements(dialect)[call.statement]
    params = {name: call.params[name] for name in statement.params}
    if not generic:
        return statement_work(db, call.statement, params)
    import psycopg
    from psycopg import sql as psql

    with admin_connect(db.url) as conn:
        conn.execute(psql.SQL("set search_path to {}").format(psql.Identifier(db.schema or "")))
        conn.execute("analyze cairnq_tasks")
        names = sorted(params)
        text = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", statement.text)
        conn.execute("set plan_cache_mode = force_generic_plan")
        conn.execute(f"prepare page as {text}")
        cursor = psycopg.ClientCursor(conn)
        slots = ", ".join(["%s"] * len(names))
        explain = f"explain (analyze, buffers, format json) execute page({slots})"
        [[plan]] = cursor.execute(explain, [params[name] for name in names]).fetchone()
    top = plan["Plan"]
    return int(top["Shared Hit Blocks"] + top["Shared Read Blocks"]), int(top["Actual Rows"])


def fill(cq: SyncCairnQ, total: int) -> None:
    """Submit tasks until ``total`` exist, in batches, a few of them succeeded."""
    have = sum(s.total for s in cq.overview())
    for start in range(have, total, 5_000):
        cq.submit_many([{"task": "job"} for _ in range(min(5_000, total - start))])


def about_the_same(work: list[int], rows: int) -> bool:
    """Work that does not grow with the table: at most twice, plus one page per row read.

    A page's rows may each sit on their own PostgreSQL heap page however the table
    was filled, and a larger index is a level deeper; a scan of every task is
    hundreds of pages (or hundreds of thousands of steps) at the larger size.
    """
    return work[1] < 2 * work[0] + rows


def work_small_and_large(db: Database, call: Call, *, generic: bool = False) -> list[int]:
    cq = db.sync_client().open()
    work = []
    for total in (SMALL, LARGE):
        fill(cq, total)
        steps, rows = page_work(db, call, generic=generic)
        assert rows == call.params["limit"]
        work.append(steps)
    return work


def test_a_first_unfiltered_page_reads_no_more_with_a_hundred_times_the_tasks(
    db: Database,
) -> None:
    work = work_small_and_large(db, chosen_call(limit=50))
    assert about_the_same(work, 51), f"page work with {SMALL} and {LARGE} tasks: {work}"


def test_a_later_unfiltered_page_reads_no_more_with_a_hundred_times_the_tasks(
    db: Database,
) -> None:
    cq = db.sync_client().open()
    fill(cq, SMALL)
    # A cursor in the middle of the small table stays in the middle of the large one:
    # later tasks have greater ids.
    middle = sorted(t.id for t in cq.list(limit=SMALL))[SMALL // 2 + 5]
    call = chosen_call(limit=40, cursor=_reads.encode_cursor(middle))
    work = work_small_and_large(db, call)
    assert about_the_same(work, 41), f"page work with {SMALL} and {LARGE} tasks: {work}"


def test_a_page_of_a_common_status_reads_no_more_with_a_hundred_times_the_tasks(
    db: Database,
) -> None:
    # The count probe finds at least INDEX_SORT_MAX queued tasks: the walk serves it.
    call = chosen_call(status="queued", limit=50, count=_reads.INDEX_SORT_MAX)
    assert call.statement == "list_page"
    work = work_small_and_large(db, call)
    assert about_the_same(work, 51), f"page work with {SMALL} and {LARGE} tasks: {work}"


def test_a_page_of_a_rare_status_reads_no_more_with_a_hundred_times_the_other_tasks(
    db: Database,
) -> None:
    cq = db.sync_client().open()
    cq.submit_many([{"task": "rare"} for _ in range(60)])
    for _ in range(60):
        rows = cq.backend.run(
            kernel.claim(["default"], WORKER, 60_000, [kernel.Draw(["rare"], 1)], 100), write=True
        )
        assert len(rows) == 1
    call = chosen_call(status="running", limit=50, count=60)
    assert call.statement == "list_page_status"
    work = []
    for total in (SMALL, LARGE):
        fill(cq, total)
        steps, rows = page_work(db, call)
        assert rows == 51
        work.append(steps)
    assert about_the_same(work, 51), f"page work with {SMALL} and {LARGE} tasks: {work}"


def test_a_later_page_stays_cheap_under_a_generic_postgresql_plan(pg_db: Database) -> None:
    # Both ends of the key range are always set, so a plan made without the cursor's
    # value still starts the walk at the cursor instead of at the newest task.
    cq = pg_db.sync_client().open()
    fill(cq, SMALL)
    middle = sorted(t.id for t in cq.list(limit=SMALL))[SMALL // 2 + 5]
    call = chosen_call(limit=40, cursor=_reads.encode_cursor(middle))
    work = work_small_and_large(pg_db, call, generic=True)
    assert about_the_same(work, 41), f"page work with {SMALL} and {LARGE} tasks: {work}"
