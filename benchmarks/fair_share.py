"""``python -m benchmarks.fair_share BACKEND [--big N] [--small N]``: one big tenant and
nine small ones on one queue, with and without a fair share.

The big tenant's tasks (10,000 by default) are submitted first, then nine small
tenants' (100 each), keyed by ``payload.tenant``. One worker (concurrency 10, handlers
sleeping 10 ms) drains the queue twice on a fresh database each: once in queue order
(no fair share: what a worker that knows none does, a reference SDK's included) and
once with ``FairShare(queue="tenants", key="payload.tenant")``. For each run it prints
when each tenant's last task finished, in seconds from the worker's start and as the
number of tasks the worker had finished by then. BACKEND: ``sqlite`` or a PostgreSQL URL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from typing import Any

from cairnq import CairnQ, Worker
from cairnq.extensions import Limits
from cairnq.limits import FairShare

QUEUE = "tenants"
SMALL_TENANTS = [f"small-{n}" for n in range(1, 10)]
CONCURRENCY = 10
HANDLER_S = 0.010


def _open(target: str, schema: str) -> Any:
    if target.endswith(".db"):
        from cairnq.backends.sqlite import SQLiteBackend

        return SQLiteBackend(target)
    from cairnq.backends.postgres import PostgresBackend

    return PostgresBackend(target, schema=schema)


def _drop_schema(url: str, schema: str) -> None:
    """Drop the run's schema, so runs leave nothing behind in the database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')


async def _run(target: str, schema: str, fair: bool, big: int, small: int) -> dict[str, Any]:
    share = FairShare(queue=QUEUE, key="payload.tenant")
    cq = CairnQ(_open(target, schema))
    worker = Worker(
        cq,
        queues=[QUEUE],
        concurrency=CONCURRENCY,
        poll_interval_ms=50,
        extensions=[Limits(fair=[share])] if fair else [],
    )
    done: dict[str, tuple[float, int]] = {}
    finished = 0
    started = 0.0

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        nonlocal finished
        await asyncio.sleep(HANDLER_S)
        finished += 1
        done[payload["tenant"]] = (time.monotonic() - started, finished)

    tenants = ["big"] * big + [t for t in SMALL_TENANTS for _ in range(small)]
    tasks = [{"task": "job", "payload": {"tenant": t}, "queue": QUEUE} for t in tenants]
    if fair:
        # The share is stored before the tasks, as a worker declaring it would have.
        from cairnq.extensions.limits._fair import put_share

        await cq.backend.arun(put_share(share), write=True)
    for at in range(0, len(tasks), 1000):
        await cq.submit_many_ids(tasks[at : at + 1000])
    started = time.monotonic()
    await worker.run(until_idle=True)
    elapsed = time.monotonic() - started
    await cq.close()
    return {"elapsed": elapsed, "done": done, "total": len(tasks)}


def _report(name: str, result: dict[str, Any]) -> None:
    done = result["done"]
    print(f"  {name}: {result['total']} tasks in {result['elapsed']:.1f} s")
    for tenant in ["big", *SMALL_TENANTS]:
        at, count = done[tenant]
        print(f"    {tenant:<8} finished at {at:6.1f} s, after {count:>6} tasks")
    smalls = [done[t][0] for t in SMALL_TENANTS]
    print(f"    the nine small tenants: last finished at {max(smalls):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backend", help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=100)
    args = parser.parse_args()
    print(
        f"{args.backend.split('@')[-1]}: big {args.big}, nine small of {args.small} each; "
        f"one worker, concurrency {CONCURRENCY}, handlers sleeping {HANDLER_S * 1000:.0f} ms"
    )
    for fair in (False, True):
        folder = tempfile.mkdtemp()
        sqlite = args.backend == "sqlite"
        target = os.path.join(folder, "bench.db") if sqlite else args.backend
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        try:
            result = asyncio.run(_run(target, schema, fair, args.big, args.small))
        finally:
            if not sqlite:
                _drop_schema(args.backend, schema)
        _report("fair share" if fair else "queue order (no fair share)", result)


if __name__ == "__main__":
    main()
