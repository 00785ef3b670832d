"""What settling or renewing a batch of leases reads stays about the same however many tasks run.

A draining worker settles its finished tasks with ``complete_many`` and renews
its leases with ``heartbeat_batch``, a batch at a time, while other workers
hold thousands of leases and the planner's statistics still describe the
table as it was before the drain began. Each row of the batch must be found by
its id: a plan that walks every running task (or every index entry left by one
not yet vacuumed) costs a drain time that grows with its own progress.

Work is SQLite virtual machine steps (a progress handler called on every step),
and on PostgreSQL the rows of ``cairnq_tasks`` the plan looked at (kept or
filtered out, over all loops; ``EXPLAIN ANALYZE`` under a generic plan, as
psycopg's prepared statements get), with the statistics taken before the claims.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from cairnq import SyncCairnQ, kernel
from cairnq.kernel.settle import owned_many
from cairnq.models import Lease
from cairnq.protocol.statements import statements

from ._db import Database, admin_connect, statement_work

SMALL, LARGE = 100, 20_000
BATCH = 50
MINE, OTHER = "worker_settle_cost_mine", "worker_settle_cost_other"


def _claim(cq: SyncCairnQ, worker_id: str, count: int) -> list[Lease]:
    leases: list[Lease] = []
    while len(leases) < count:
        want = min(1_000, count - len(leases))
        rows = cq.backend.run(
            kernel.claim(["default"], worker_id, 600_000, [kernel.Draw(None, want)], 0), write=True
        )
        assert rows, "nothing left to claim"
        leases.extend(Lease.of(row) for row in rows)
    return leases


def _params(name: str, leases: list[Lease]) -> dict[str, Any]:
    params: dict[str, Any] = {
        **owned_many(leases, MINE),
        "now_ms": int(time.time() * 1000),
    }
    if name == "complete_many":
        params["results"] = ['"ok"'] * len(leases)
    else:
        params["lease_ms"] = 600_000
    return params


def _work(db: Database, name: str, params: dict[str, Any]) -> tuple[int, int]:
    """(work, rows) of one run of ``name``, the statistics left as they are."""
    if db.kind == "sqlite":
        return statement_work(
            db, name, {k: json.dumps(v) if isinstance(v, list) else v for k, v in params.items()}
        )
    import psycopg
    from psycopg import sql

    statement = statements("postgres")[name]
    names = sorted(statement.params)
    text = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", statement.text)
    with admin_connect(db.url) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        # The plan psycopg's prepared statements end up with: made without the values.
        conn.execute("set plan_cache_mode = force_generic_plan")
        conn.execute(f"prepare settle as {text}")
        slots = ", ".join(["%s"] * len(names))
        explain = f"explain (analyze, format json) execute settle({slots})"
        cursor = psycopg.ClientCursor(conn)
        [[plan]] = cursor.execute(explain, [params[n] for n in names]).fetchone()
    return _rows_read(plan["Plan"]), int(plan["Plan"]["Actual Rows"])


def _rows_read(node: dict[str, Any]) -> int:
    """Rows of ``cairnq_tasks`` the plan looked at: kept or filtered out, over every loop."""
    own = 0
    if node.get("Relation Name") == "cairnq_tasks" and "Scan" in node["Node Type"]:
        per_loop = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
        own = round(per_loop * node["Actual Loops"])
    return own + sum(_rows_read(child) for child in node.get("Plans", []))


def _statistics_before_the_claims(db: Database) -> None:
    """PostgreSQL: statistics taken while every task was queued, kept so while the test claims.

    SQLite keeps none (cairnq never runs ``ANALYZE``): its planner's defaults apply.
    """
    if db.kind == "sqlite":
        return
    from psycopg import sql

    with admin_connect(db.url) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        conn.execute("alter table cairnq_tasks set (autovacuum_enabled = false)")
        conn.execute("analyze cairnq_tasks")


@pytest.mark.parametrize("name", ["complete_many", "heartbeat_batch"])
def test_a_batch_reads_no_more_with_a_hundred_times_the_running_tasks(
    db: Database, name: str
) -> None:
    cq = db.sync_client().open()
    work = []
    have = 0
    for total in (SMALL, LARGE):
        for start in range(have, total, 5_000):
            cq.submit_many([{"task": "job"} for _ in range(min(5_000, total - start))])
        _statistics_before_the_claims(db)
        _claim(cq, OTHER, total - have - BATCH)
        mine = _claim(cq, MINE, BATCH)
        have = total
        steps, rows = _work(db, name, _params(name, mine))
        assert rows == BATCH
        work.append(steps)
    # At most twice, plus one per row: the larger table's indexes are a level deeper.
    assert work[1] < 2 * work[0] + BATCH, f"{name} work with {SMALL} and {LARGE} tasks: {work}"


@pytest.mark.parametrize("name", ["complete_many", "history_complete_many"])
def test_a_prepared_settlement_of_one_task_reuses_one_generic_plan_on_postgres(
    pg_db: Database, name: str
) -> None:
    # PostgreSQL makes five custom plans of a prepared statement, then keeps its generic
    # plan unless that looks dearer than they did: a plan made for lists it can count
    # (one element) would always look cheaper, and each settlement would be planned anew.
    import psycopg
    from psycopg import sql

    cq = pg_db.sync_client().open()
    cq.submit_many([{"task": "job"} for _ in range(20)])
    statement = statements("postgres")[name]
    names = sorted(statement.params)
    text = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", statement.text)
    with admin_connect(pg_db.url) as conn:
        if conn.info.server_version < 140000:
            pytest.skip("pg_prepared_statements counts plans from PostgreSQL 14 on")
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(pg_db.schema or "")))
        conn.execute("set plan_cache_mode = auto")  # the server's default, whatever it is set to
        conn.execute(f"prepare settle as {text}")
        slots = ", ".join(["%s"] * len(names))
        cursor = psycopg.ClientCursor(conn)
        for lease in _claim(cq, MINE, 10):
            params = {**_params("complete_many", [lease]), "claims": [lease.token]}
            params |= {"started": [None], "worker": MINE}
            cursor.execute(f"execute settle({slots})", [params[n] for n in names])
            assert len(cursor.fetchall()) == 1
        generic, custom = conn.execute(
            "select generic_plans, custom_plans from pg_prepared_statements where name = 'settle'"
        ).fetchone()
    cq.close()
    assert (generic, custom) == (5, 5)
