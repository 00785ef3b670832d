"""``python -m benchmarks.limit_keys BACKEND``: per-key limits across four worker processes.

2,000 tasks over 20 keys (``payload.customer``), each limited to 2 running at once,
handlers sleeping a random 5-50 ms, four worker processes of concurrency 8 at the
default ``poll_interval_ms`` (500). Prints the drain time, throughput and mean
running tasks (handler time over wall time): how soon a slot freed in one process is
taken up by another decides the last two. BACKEND: ``sqlite`` or a PostgreSQL URL.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cairnq import CairnQ, Limit, SyncCairnQ, Worker
from cairnq.extensions import Limits

TASKS, KEYS, PROCESSES = 2000, 20, 4
LIMIT = Limit.concurrency(2, queue="limited", key="payload.customer")


def _open(target: str, schema: str) -> Any:
    if target.endswith(".db"):
        from cairnq.backends.sqlite import SQLiteBackend

        return SQLiteBackend(target)
    from cairnq.backends.postgres import PostgresBackend

    return PostgresBackend(target, schema=schema)


def child(target: str, schema: str, log_path: str, stop_path: str) -> None:
    worker = Worker(
        CairnQ(_open(target, schema)),
        queues=["limited"],
        concurrency=8,
        extensions=[Limits([LIMIT])],
        poll_interval_ms=int(os.environ.get("POLL_MS", "500")),
    )

    spans: list[str] = []

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        start = time.time()
        await asyncio.sleep(random.uniform(0.005, 0.05))
        spans.append(f"{start:.6f} {time.time():.6f}\n")

    async def run() -> None:
        async with worker.background():
            while not await asyncio.to_thread(os.path.exists, stop_path):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await worker.client.backend.aclose()

    asyncio.run(run())
    with open(log_path, "a") as log:
        log.write("".join(spans))


def _drop_schema(url: str, schema: str) -> None:
    """Drop the run's schema, so runs leave nothing behind in the database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')


def main(backend: str) -> None:
    folder = tempfile.mkdtemp()
    target = os.path.join(folder, "bench.db") if backend == "sqlite" else backend
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    log, stop = os.path.join(folder, "runs.log"), os.path.join(folder, "stop")
    with SyncCairnQ(_open(target, schema)) as cq:
        cq.limits.set(LIMIT)
        cq.submit_many(
            [
                {"task": "job", "payload": {"customer": f"k{i % KEYS}"}, "queue": "limited"}
                for i in range(TASKS)
            ]
        )
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.limit_keys",
                    "--child",
                    target,
                    schema,
                    log,
                    stop,
                ]
            )
            for _ in range(PROCESSES)
        ]
        while cq.stats("limited").get("limited", {}).get("succeeded", 0) < TASKS:
            time.sleep(0.02)
        elapsed = time.monotonic() - started
        open(stop, "w").close()
        for proc in procs:
            proc.wait(60)
    if target == backend:
        _drop_schema(backend, schema)
    spans = [tuple(map(float, line.split())) for line in Path(log).read_text().splitlines()]
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    busy = sum(e - s for s, e in spans)
    print(
        f"{backend.split('@')[0]}: {TASKS} tasks in {elapsed:.2f} s ({TASKS / elapsed:.0f}/s); "
        f"mean running {busy / (last - first):.1f} of at most {KEYS * 2}"
    )


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(*sys.argv[2:])
    else:
        main(sys.argv[1])
