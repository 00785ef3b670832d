"""``python -m benchmarks.search BACKEND [--tasks N]``: tags, declared search fields and
error text on N tasks (1,000,000 by default).

BACKEND: ``sqlite`` or a PostgreSQL URL (a fresh schema, dropped afterwards).

1. The data: N tasks through ``submit_many_ids`` in batches of 5,000, each with one of
   100 tags (``t0`` .. ``t99``) and ``metadata.customer`` one of 10,000 customers, whose
   terms are written by the search extension's own statement (``search_record``, the
   one a tagged submit runs), batch by batch: the same rows a tagged ``submit`` writes,
   without a round trip per task. One task in 10 (customers 200 to 299, 1200 to 1299, and
   so on) is then marked failed with an error message naming its customer (an
   ``update`` of the benchmark's own: no worker runs for it; the error index's trigger
   indexes each error as it would a settlement's).
2. Searches, each the median of 7 runs after one warm-up (limit 100): a tag (1% of the
   tasks hold it), a declared field (0.01%), a tag and a field, a tag with
   ``status="failed"``, the last hour (no term), the error text ``customer 4242`` by
   the error table (x0026: a scan of the failed tasks' text on SQLite, GIN on
   PostgreSQL) and by the walk down the task ids it replaces (``search_tasks``,
   what a database without the index runs), a prefix (``custom* 4242``), and the error
   text with a tag.
3. The cost of the terms on submit: 1,000 ``submit`` calls one at a time on a client
   with no search field and no tags, then 1,000 with two tags on a client declaring
   ``customer`` (one more row each), each the mean per call.
4. The cost on drain: 2,000 tasks without terms, then 2,000 with two tags and a field,
   each drained by one worker (concurrency 50, ``run(until_idle=True)``), then purged
   (the purge deletes their terms through the forget trigger); then 2,000 tasks whose
   one attempt fails (each error indexed by the trigger), drained and purged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from cairnq import CairnQ, Worker
from cairnq.extensions import Search
from cairnq.extensions.search import check_query
from cairnq.protocol.steps import Call, Op

TAGS, CUSTOMERS, BATCH, RUNS = 100, 10_000, 5_000, 7


def _record(rows: list[list[str]]) -> Op[None]:
    yield Call("search_record", {"rows": json.dumps(rows)}, discard=True)


def _open(target: str, schema: str, **options: Any) -> CairnQ:
    if target.endswith(".db"):
        return CairnQ.sqlite(target, **options)
    return CairnQ.postgres(target, schema=schema, listen=False, **options)


def _fail_some(cq: CairnQ, backend: str, schema: str) -> None:
    """Mark one task in 10 failed with an error naming its customer (raw SQL: set-up only)."""
    if backend == "sqlite":
        import sqlite3

        path = cq.backend.path  # type: ignore[attr-defined]
        with sqlite3.connect(path) as conn:
            conn.execute(
                "update cairnq_tasks set status = 'failed', completed_at_ms = created_at_ms, "
                "error = json_object('type', 'ValueError', 'code', 'handler_error', "
                "'message', 'declined for customer ' || json_extract(metadata, '$.customer'), "
                "'retryable', json('false'), 'details', json('{}')) "
                "where (cast(substr(json_extract(metadata, '$.customer'), 10) as integer) / 100)"
                " % 10 = 2"
            )
        return
    import psycopg

    with psycopg.connect(backend, autocommit=True) as conn:
        conn.execute(
            f"update \"{schema}\".cairnq_tasks set status = 'failed', "
            "completed_at_ms = created_at_ms, error = jsonb_build_object('type', "
            "'ValueError', 'code', 'handler_error', 'message', 'declined for customer ' || "
            "(metadata ->> 'customer'), 'retryable', false, 'details', '{}'::jsonb) "
            "where (substr(metadata ->> 'customer', 10)::int / 100) % 10 = 2"
        )


async def _timed(run: Callable[[], Any]) -> tuple[float, int]:
    await run()
    times, found = [], 0
    for _ in range(RUNS):
        start = time.perf_counter()
        found = len(await run())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, found


async def build(cq: CairnQ, n: int) -> float:
    start = time.perf_counter()
    for low in range(0, n, BATCH):
        count = min(BATCH, n - low)
        items = [
            {"task": "job", "payload": {"i": low + i},
             "metadata": {"customer": f"customer {(low + i) % CUSTOMERS}"}}
            for i in range(count)
        ]  # fmt: skip
        ids = await cq.submit_many_ids(items)
        rows = []
        for i, task_id in enumerate(ids):
            rows.append([task_id, "#", f"t{(low + i) % TAGS}"])
            rows.append([task_id, "customer", f"customer {(low + i) % CUSTOMERS}"])
        await cq.backend.arun(_record(rows), write=True)
    return time.perf_counter() - start


def _scan(cq: CairnQ, text: str) -> Any:
    """The error search as a database without the error table (x0026) runs it."""
    query = check_query(
        tags=None, where=None, error=text, since=None, until=None, status=None,
        queue=None, name=None, before=None, limit=100, now_ms=0,
    )  # fmt: skip
    return cq.backend.arun(_call("search_tasks", query.params()), write=False)


def _call(statement: str, params: dict[str, Any]) -> Op[Any]:
    rows = yield Call(statement, params)
    return rows


async def searches(cq: CairnQ) -> list[tuple[str, float, int]]:
    s = cq.search
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("tag (1% of tasks)", lambda: s.find(tags="t42")),
        ("declared field (0.01%)", lambda: s.find(where={"customer": "customer 4242"})),
        ("tag + field", lambda: s.find(tags="t42", where={"customer": "customer 4242"})),
        ("tag + status=failed", lambda: s.find(tags="t42", status="failed")),
        ("last hour, no term", lambda: s.find(since="1h")),
        ("error text, index", lambda: s.find(error="customer 4242")),
        ("error text, scan", lambda: _scan(cq, "customer 4242")),
        ("error prefix, index", lambda: s.find(error="custom* 4242")),
        ("error text + tag", lambda: s.find(error="customer 4242", tags="t42")),
    ]
    out = []
    for label, run in cases:
        ms, found = await _timed(run)
        out.append((label, ms, found))
    return out


async def submit_cost(target: str, schema: str) -> tuple[float, float]:
    async with _open(target, schema) as plain:
        await plain.submit("warm")
        start = time.perf_counter()
        for i in range(1000):
            await plain.submit("job", {"i": i}, metadata={"customer": "c"})
        bare = (time.perf_counter() - start) / 1000 * 1000
    async with _open(
        target, schema, extensions=[Search(fields={"customer": "metadata.customer"})]
    ) as cq:
        await cq.submit("warm", tags=["w"])
        start = time.perf_counter()
        for i in range(1000):
            await cq.submit("job", {"i": i}, metadata={"customer": "c"}, tags=["a", "b"])
        tagged = (time.perf_counter() - start) / 1000 * 1000
    return bare, tagged


async def drain_cost(target: str, schema: str, kind: str) -> tuple[float, float]:
    """Drain and purge 2,000 tasks: ``bare`` (no terms), ``tagged`` (3 terms each) or
    ``failing`` (no terms, one attempt that fails)."""
    tagged = kind == "tagged"
    fields = {"customer": "metadata.customer"} if tagged else None
    async with _open(target, schema, extensions=[Search(fields=fields)]) as cq:
        queue = f"drain_{kind}"
        tags = ["a", "b"] if tagged else None
        for i in range(2000):
            await cq.submit(
                "noop", {"i": i}, queue=queue, metadata={"customer": "c"}, tags=tags,
                max_attempts=1,
            )  # fmt: skip
        worker = Worker(cq, queues=[queue], concurrency=50)
        # The failures' log lines (one traceback each) are not what is measured.
        logging.getLogger("cairnq").setLevel(
            logging.CRITICAL if kind == "failing" else logging.WARNING
        )

        @worker.task
        async def noop(ctx: Any, payload: Any) -> None:
            if kind == "failing":
                raise ValueError(f"declined for customer {payload['i']}")

        start = time.perf_counter()
        await worker.run(until_idle=True)
        drained = time.perf_counter() - start
        start = time.perf_counter()
        while await cq.purge(older_than_ms=0, queue=queue, limit=1000):
            pass
        purged = time.perf_counter() - start
    return drained, purged


async def main(backend: str, n: int, keep: bool = False) -> None:
    folder = tempfile.mkdtemp()
    target = os.path.join(folder, "search.db") if backend == "sqlite" else backend
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    label = "sqlite" if backend == "sqlite" else "postgresql"
    try:
        async with _open(
            target, schema, extensions=[Search(fields={"customer": "metadata.customer"})]
        ) as cq:
            built = await build(cq, n)
            print(f"{label}: built {n:,} tasks with 2 terms each in {built:.1f} s")
            start = time.perf_counter()
            _fail_some(cq, backend, schema)
            failed = time.perf_counter() - start
            print(f"{label}: failed {n // 10:,} of them (errors indexed) in {failed:.1f} s")
            if backend != "sqlite":
                import psycopg

                with psycopg.connect(backend, autocommit=True) as conn:
                    conn.execute(f'analyze "{schema}".cairnq_tasks')
                    conn.execute(f'analyze "{schema}".cairnq_search_terms')
            for case, ms, found in await searches(cq):
                print(f"{label}: search {case:<24} {ms:8.2f} ms  ({found} found)")
        bare, tagged = await submit_cost(target, schema)
        print(f"{label}: submit one at a time: {bare:.2f} ms without terms, "
              f"{tagged:.2f} ms with 2 tags and 1 field")  # fmt: skip
        for kind, what in (
            ("bare", "without terms"),
            ("tagged", "with 3 terms each"),
            ("failing", "failing (errors indexed)"),
        ):
            drained, purged = await drain_cost(target, schema, kind)
            print(f"{label}: drain 2,000 tasks {what}: {drained:.2f} s; purge {purged:.2f} s")
    finally:
        if keep:
            print(f"{label}: kept {target if backend == 'sqlite' else schema}")
        elif backend == "sqlite":
            shutil.rmtree(folder, ignore_errors=True)
        else:
            import psycopg

            with psycopg.connect(backend, autocommit=True) as conn:
                conn.execute(f'drop schema if exists "{schema}" cascade')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument(
        "--keep", action="store_true", help="keep the database (its file or schema) to explain"
    )
    args = parser.parse_args()
    asyncio.run(main(args.backend, args.tasks, args.keep))
