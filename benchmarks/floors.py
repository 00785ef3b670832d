"""``python -m benchmarks.floors``: what the database allows, next to what cairnq does.

The figures the README's speed notes explain gaps with, each measured here:

- single submits: the protocol's own ``insert_task`` statement run by the bare
  driver, one durable transaction per task, against ``submit`` on the same
  database (SQLite: ``sqlite3`` with WAL, ``synchronous=FULL`` and ``BEGIN
  IMMEDIATE``; PostgreSQL: an async psycopg connection in autocommit with the
  statement prepared);
- draining: the CPU time a drain worker process spends on 10,000 no-op tasks
  (user + system), next to the wall time of the same drain: a worker whose CPU
  time is close to the wall time is bound by its own Python work.

Each figure is the median of ``--runs`` runs (5), each on a fresh database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ
from cairnq._ids import task_id
from cairnq.protocol.statements import statements

from .cairnq_bench import ROOT, BenchmarkError, fresh_url

SUBMITS = 2_000
DRAIN = 10_000


def _insert_params(now_ms: int | None) -> dict[str, Any]:
    made = task_id()
    return {
        "id": made,
        "name": "noop",
        "queue": "default",
        "payload": json.dumps({"i": 1}),
        "metadata": "{}",
        "max_attempts": 3,
        "priority": 0,
        "delay_ms": 0,
        "parent_id": None,
        "root_id": made,
        "correlation_id": None,
        "now_ms": now_ms,
    }


async def _cairnq_submits(url: str) -> float:
    async with CairnQ.connect(url) as cq:
        await cq.stats()
        started = time.perf_counter()
        for i in range(SUBMITS):
            await cq.submit("noop", {"i": i})
        return SUBMITS / (time.perf_counter() - started)


def _sqlite_raw_submits(url: str) -> float:
    with SyncCairnQ.connect(url):
        pass  # creates the schema
    text = statements("sqlite")["insert_task"].text
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        conn.execute("pragma journal_mode=wal")
        conn.execute("pragma synchronous=full")
        started = time.perf_counter()
        for _ in range(SUBMITS):
            conn.execute("begin immediate")
            conn.execute(text, _insert_params(int(time.time() * 1000))).fetchall()
            conn.execute("commit")
        return SUBMITS / (time.perf_counter() - started)
    finally:
        conn.close()


async def _postgres_raw_submits(url: str) -> float:
    import psycopg

    with SyncCairnQ.connect(url):
        pass  # creates the schema
    text = statements("postgres")["insert_task"].text
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for _ in range(SUBMITS):
            await conn.execute(text.encode(), _insert_params(None), prepare=True)
        return SUBMITS / (time.perf_counter() - started)


def _drain_cpu(url: str) -> tuple[float, float]:
    """(worker CPU seconds, wall seconds) for one drain of ``DRAIN`` no-op tasks."""
    with SyncCairnQ.connect(url) as cq:
        for _ in range(0, DRAIN, 1000):
            cq.submit_many([("noop", {}) for _ in range(1000)])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "benchmarks.worker_main", url, "100"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with SyncCairnQ.connect(url) as cq:
        if sum(s["succeeded"] for s in cq.stats().values()) != DRAIN:
            raise BenchmarkError("the drain did not finish every task")
    return cpu, wall


def measure(backend: str, runs: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="cairnq-floors-"))
    raw, ours, cpu, wall = [], [], [], []
    for run in range(runs):
        if backend == "sqlite":
            raw.append(_sqlite_raw_submits(fresh_url(backend, folder, f"raw{run}")))
        else:
            raw.append(asyncio.run(_postgres_raw_submits(fresh_url(backend, folder, f"raw{run}"))))
        ours.append(asyncio.run(_cairnq_submits(fresh_url(backend, folder, f"ours{run}"))))
        spent, took = _drain_cpu(fresh_url(backend, folder, f"drain{run}"))
        cpu.append(spent)
        wall.append(took)
    return {
        "raw_insert_per_s": statistics.median(raw),
        "submit_per_s": statistics.median(ours),
        "drain_worker_cpu_s": statistics.median(cpu),
        "drain_wall_s": statistics.median(wall),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floors", description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    print(f"| figure ({SUBMITS:,} submits; drain of {DRAIN:,}) | " + " | ".join(backends) + " |")
    print("|---|" + "---|" * len(backends))
    figures = {backend: measure(backend, args.runs) for backend in backends}
    rows = [
        ("insert_task by the bare driver (tasks/s)", "raw_insert_per_s", "{:.0f}"),
        ("cairnq submit, one at a time (tasks/s)", "submit_per_s", "{:.0f}"),
        ("drain worker CPU, user + system (s)", "drain_worker_cpu_s", "{:.2f}"),
        ("drain wall time, start-up included (s)", "drain_wall_s", "{:.2f}"),
    ]
    for label, key, fmt in rows:
        print(f"| {label} | " + " | ".join(fmt.format(figures[b][key]) for b in backends) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
