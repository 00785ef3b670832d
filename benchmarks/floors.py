"""``python -m benchmarks.floors``: what the database allows, next to what cairnq does.

The figures the README's speed notes explain gaps with, each measured here:

- single submits: the protocol's own ``insert_task`` statement run by the bare
  driver, one durable transaction per task, against ``submit`` on the same
  database, awaited (``CairnQ``) and blocking (``SyncCairnQ``), and each one's
  time per task over the bare driver's (the median of each run's ratio) (SQLite:
  ``sqlite3`` with WAL, ``synchronous=FULL`` and ``BEGIN IMMEDIATE``;
  PostgreSQL: an async psycopg connection in autocommit with the statement
  prepared); on SQLite also the same transaction awaited with one
  ``asyncio.to_thread`` hop per task (the least an awaited call that keeps the
  commit's flush off the event loop pays), and through aiosqlite (the
  ``bench`` extra), the usual async driver, as its users write it (begin,
  execute, fetch and commit, each awaited);
- SQLite only, what the protocol's table costs a durable insert: the same loop
  on a table shaped like huey's task queue (an integer key, a blob, one
  index), and the pages each commit of either adds to the WAL (every commit
  writes them, and ``synchronous=FULL`` flushes them to disk);
- draining: the CPU time a drain worker process spends on 10,000 no-op tasks
  (user + system), next to the wall time of the same drain: a worker whose CPU
  time is close to the wall time is bound by its own Python work.

Each figure is the median of ``--runs`` runs (5), each on a fresh database.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pickle
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


def _cairnq_sync_submits(url: str) -> float:
    with SyncCairnQ.connect(url) as cq:
        cq.stats()
        started = time.perf_counter()
        for i in range(SUBMITS):
            cq.submit("noop", {"i": i})
        return SUBMITS / (time.perf_counter() - started)


# huey's task table and index (SqliteStorage), for the cost of a small table's insert.
SMALL_TABLE = [
    "create table task (id integer not null primary key, queue text not null, "
    "data blob not null, priority real not null default 0.0)",
    "create index task_queue_priority_id on task (queue, priority desc, id)",
]
SMALL_INSERT = "insert into task (queue, data, priority) values (?, ?, ?)"


def _sqlite_loop(
    path: str, text: str, params: Any, *, count: int = SUBMITS, autocheckpoint: bool = True
) -> tuple[float, float]:
    """(inserts per second, WAL pages added per commit) of ``count`` durable inserts."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("pragma journal_mode=wal")
        conn.execute("pragma synchronous=full")
        if not autocheckpoint:
            conn.execute("pragma wal_autocheckpoint=0")
        page = int(conn.execute("pragma page_size").fetchone()[0])
        wal_before = _size(f"{path}-wal")
        started = time.perf_counter()
        for _ in range(count):
            conn.execute("begin immediate")
            conn.execute(text, params()).fetchall()
            conn.execute("commit")
        rate = count / (time.perf_counter() - started)
        # A WAL frame is a 24-byte header and one page.
        pages = (_size(f"{path}-wal") - wal_before) / (page + 24) / count
        return rate, pages
    finally:
        conn.close()


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def _sqlite_raw_submits(url: str) -> float:
    with SyncCairnQ.connect(url):
        pass  # creates the schema
    text = statements("sqlite")["insert_task"].text
    path = url.removeprefix("sqlite:///")
    return _sqlite_loop(path, text, lambda: _insert_params(int(time.time() * 1000)))[0]


async def _aiosqlite_submits(url: str) -> float | None:
    """``insert_task`` through aiosqlite, the usual async SQLite driver (a thread per
    connection, like cairnq's writer), one durable transaction per task; ``None``
    without it installed (the ``bench`` extra)."""
    try:
        import aiosqlite
    except ImportError:
        return None
    with SyncCairnQ.connect(url):
        pass  # creates the schema
    text = statements("sqlite")["insert_task"].text
    path = url.removeprefix("sqlite:///")
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("pragma journal_mode=wal")
        await conn.execute("pragma synchronous=full")
        started = time.perf_counter()
        for _ in range(SUBMITS):
            await conn.execute("begin immediate")
            cursor = await conn.execute(text, _insert_params(int(time.time() * 1000)))
            await cursor.fetchall()
            await conn.execute("commit")
        return SUBMITS / (time.perf_counter() - started)


async def _one_hop_submits(url: str) -> float:
    """``insert_task`` in one durable transaction per task, each run on a thread by one
    ``asyncio.to_thread`` call: the least an awaited submit that keeps the flush off the
    event loop can pay (one hop to a thread and one back)."""
    with SyncCairnQ.connect(url):
        pass  # creates the schema
    text = statements("sqlite")["insert_task"].text
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("pragma journal_mode=wal")
        conn.execute("pragma synchronous=full")

        def insert() -> None:
            conn.execute("begin immediate")
            conn.execute(text, _insert_params(int(time.time() * 1000))).fetchall()
            conn.execute("commit")

        started = time.perf_counter()
        for _ in range(SUBMITS):
            await asyncio.to_thread(insert)
        return SUBMITS / (time.perf_counter() - started)
    finally:
        conn.close()


def _small_table(path: str) -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for ddl in SMALL_TABLE:
            conn.execute(ddl)


def _sqlite_small_inserts(folder: Path, name: str) -> float:
    path = str(folder / f"{name}.db")
    _small_table(path)
    data = pickle.dumps(("noop", (1,), {}))
    return _sqlite_loop(path, SMALL_INSERT, lambda: ("bench", data, 0))[0]


def _wal_pages(folder: Path) -> tuple[float, float]:
    """WAL pages per commit: ``insert_task``, then the small table, no checkpoint between."""
    path = str(folder / "wal-tasks.db")
    with SyncCairnQ.connect(f"sqlite:///{path}") as cq:
        cq.submit_many([("noop", {"i": i}) for i in range(1000)])  # past the first pages
    text = statements("sqlite")["insert_task"].text
    params = lambda: _insert_params(int(time.time() * 1000))  # noqa: E731
    ours = _sqlite_loop(path, text, params, count=1000, autocheckpoint=False)[1]
    small = str(folder / "wal-small.db")
    _small_table(small)
    data = pickle.dumps(("noop", (1,), {}))
    _sqlite_loop(small, SMALL_INSERT, lambda: ("bench", data, 0), count=1000)
    theirs = _sqlite_loop(
        small, SMALL_INSERT, lambda: ("bench", data, 0), count=1000, autocheckpoint=False
    )[1]
    return ours, theirs


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


def _median_ratio(floor: list[float], ours: list[float]) -> float:
    """The median over runs of ours' time per task over the floor's (rates given)."""
    return statistics.median(f / o for f, o in zip(floor, ours, strict=True))


def measure(backend: str, runs: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="cairnq-floors-"))
    raw, ours, blocking, small, cpu, wall = [], [], [], [], [], []
    awaited_raw: list[float] = []
    one_hop: list[float] = []
    for run in range(runs):
        if backend == "sqlite":
            raw.append(_sqlite_raw_submits(fresh_url(backend, folder, f"raw{run}")))
            small.append(_sqlite_small_inserts(folder, f"small{run}"))
            one_hop.append(asyncio.run(_one_hop_submits(fresh_url(backend, folder, f"hop{run}"))))
            rate = asyncio.run(_aiosqlite_submits(fresh_url(backend, folder, f"aio{run}")))
            if rate is not None:
                awaited_raw.append(rate)
        else:
            raw.append(asyncio.run(_postgres_raw_submits(fresh_url(backend, folder, f"raw{run}"))))
        ours.append(asyncio.run(_cairnq_submits(fresh_url(backend, folder, f"ours{run}"))))
        blocking.append(_cairnq_sync_submits(fresh_url(backend, folder, f"sync{run}")))
        spent, took = _drain_cpu(fresh_url(backend, folder, f"drain{run}"))
        cpu.append(spent)
        wall.append(took)
    figures = {
        "raw_insert_per_s": statistics.median(raw),
        "submit_per_s": statistics.median(ours),
        "sync_submit_per_s": statistics.median(blocking),
        "drain_worker_cpu_s": statistics.median(cpu),
        "drain_wall_s": statistics.median(wall),
    }
    # Each run's submits against that run's floor (time per task over the floor's), the
    # median of those: a floor and the submits it is set against ran minutes apart at most.
    figures["sync_submit_vs_raw"] = _median_ratio(raw, blocking)
    figures["submit_vs_raw"] = _median_ratio(raw, ours)
    if one_hop:
        figures["one_hop_insert_per_s"] = statistics.median(one_hop)
        figures["submit_vs_one_hop"] = _median_ratio(one_hop, ours)
    if awaited_raw:
        figures["aiosqlite_insert_per_s"] = statistics.median(awaited_raw)
    if backend == "sqlite":
        figures["small_insert_per_s"] = statistics.median(small)
        figures["wal_pages_ours"], figures["wal_pages_small"] = _wal_pages(folder)
    return figures


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
        ("insert_task, one asyncio.to_thread per task (tasks/s)", "one_hop_insert_per_s", "{:.0f}"),
        (
            "insert_task by aiosqlite, four awaited calls per task (tasks/s)",
            "aiosqlite_insert_per_s",
            "{:.0f}",
        ),
        ("cairnq submit, one at a time, awaited (tasks/s)", "submit_per_s", "{:.0f}"),
        ("cairnq submit, one at a time, blocking client (tasks/s)", "sync_submit_per_s", "{:.0f}"),
        (
            "blocking submit's time over the bare driver's (goal: at most 1.30)",
            "sync_submit_vs_raw",
            "{:.2f}",
        ),
        ("awaited submit's time over the bare driver's", "submit_vs_raw", "{:.2f}"),
        (
            "awaited submit's time over one to_thread hop's (SQLite's awaited floor)",
            "submit_vs_one_hop",
            "{:.2f}",
        ),
        (
            "a huey-shaped table's insert by the bare driver (rows/s)",
            "small_insert_per_s",
            "{:.0f}",
        ),
        ("WAL pages per commit, insert_task", "wal_pages_ours", "{:.1f}"),
        ("WAL pages per commit, huey-shaped table", "wal_pages_small", "{:.1f}"),
        ("drain worker CPU, user + system (s)", "drain_worker_cpu_s", "{:.2f}"),
        ("drain wall time, start-up included (s)", "drain_wall_s", "{:.2f}"),
    ]
    for label, key, fmt in rows:
        if any(key in figures[b] for b in backends):
            cells = [fmt.format(figures[b][key]) if key in figures[b] else "-" for b in backends]
            print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
