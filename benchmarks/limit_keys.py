"""``python -m benchmarks.limit_keys BACKEND``: per-key limits across four worker processes.

2,000 tasks over 20 keys (``payload.customer``), each limited to 2 running at once,
handlers sleeping a random 5-50 ms, four worker processes of concurrency 8 at the
default ``poll_interval_ms`` (500). Prints the drain time, throughput and mean
running tasks (handler time over wall time): how soon a slot freed in one process is
taken up by another decides the last two. BACKEND: ``sqlite`` or a PostgreSQL URL.

It also prints the CPU the run took per task: the worker processes' own (from the
first handler's start, so not their imports) and, on a PostgreSQL server on this
machine, the server's (the processes serving the run's database and the server's
shared ones); and how busy that kept the machine's cores over the run.
Near every core busy, the mean running is bounded by the CPU, not by the limit.
``--scale K`` makes every handler sleep K times as long (K times less CPU per
second of handler time), which shows what the limit keeps busy when the CPU is not
the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
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


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(target: str, schema: str, log_path: str, stop_path: str, scale: str) -> None:
    worker = Worker(
        CairnQ(_open(target, schema)),
        queues=["limited"],
        concurrency=8,
        extensions=[Limits([LIMIT])],
        poll_interval_ms=int(os.environ.get("POLL_MS", "500")),
    )

    spans: list[str] = []
    factor = float(scale)
    cpu_at_first_start: list[float] = []

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        start = time.time()
        if not cpu_at_first_start:
            cpu_at_first_start.append(_cpu_s())
        await asyncio.sleep(random.uniform(0.005, 0.05) * factor)
        spans.append(f"{start:.6f} {time.time():.6f}\n")

    async def run() -> None:
        async with worker.background():
            while not await asyncio.to_thread(os.path.exists, stop_path):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await worker.client.backend.aclose()

    asyncio.run(run())
    run_cpu = _cpu_s() - (cpu_at_first_start[0] if cpu_at_first_start else _cpu_s())
    with open(log_path, "a") as log:
        log.write("".join(spans) + f"cpu {run_cpu:.6f}\n")


def _drop_schema(url: str, schema: str) -> None:
    """Drop the run's schema, so runs leave nothing behind in the database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')


def _server_cpu(target: str) -> Any:
    """A ``ServerCpu`` for a PostgreSQL server on this machine, started; else ``None``."""
    if target.endswith(".db"):
        return None
    from psycopg.conninfo import conninfo_to_dict

    from .servercpu import ServerCpu

    meter = ServerCpu(str(conninfo_to_dict(target).get("dbname") or "postgres"))
    meter.start()
    return meter


def main(backend: str, scale: float = 1.0) -> None:
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
        meter = _server_cpu(target)
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
                    str(scale),
                ]
            )
            for _ in range(PROCESSES)
        ]
        # Each look counts the run's tasks by status (about a millisecond of the
        # server's CPU on PostgreSQL, in its figure below): every 50 ms is often
        # enough for the drain time and leaves the CPU to the run.
        while cq.stats("limited").get("limited", {}).get("succeeded", 0) < TASKS:
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        open(stop, "w").close()
        for proc in procs:
            proc.wait(60)
        server = meter.stop() if meter is not None else None
    if target == backend:
        _drop_schema(backend, schema)
    lines = Path(log).read_text().splitlines()
    spans = [tuple(map(float, line.split())) for line in lines if not line.startswith("cpu ")]
    workers_cpu = sum(float(line.split()[1]) for line in lines if line.startswith("cpu "))
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    busy = sum(e - s for s, e in spans)
    print(
        f"{backend.split('@')[0]}: {TASKS} tasks in {elapsed:.2f} s ({TASKS / elapsed:.0f}/s); "
        f"mean running {busy / (last - first):.1f} of at most {KEYS * 2}"
        + (f" (handlers {scale:g} times as long)" if scale != 1 else "")
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # The server's processes for this database and its own shared ones (WAL writer,
    # checkpointer): not other databases' clients on the same server.
    server_s = server["database_s"] + server["shared_s"] if server else 0.0
    used = workers_cpu + server_s
    print(
        f"  CPU per task: worker processes {workers_cpu / TASKS * 1000:.2f} ms"
        + (f", server {server_s / TASKS * 1000:.2f} ms" if server else "")
        + f"; {used / ((last - first) * (cores or 1)):.0%} of {cores} cores over the run"
    )


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(*sys.argv[2:])
    else:
        parser = argparse.ArgumentParser(prog="python -m benchmarks.limit_keys")
        parser.add_argument("backend", help="sqlite, or a PostgreSQL URL")
        parser.add_argument("--scale", type=float, default=1.0, help="handler time factor")
        args = parser.parse_args()
        main(args.backend, args.scale)
