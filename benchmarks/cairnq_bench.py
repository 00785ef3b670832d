"""cairnq's side of the benchmark: each workload timed, and checked in the database.

Run through ``python -m benchmarks`` (see ``benchmarks/__main__.py``); each
function returns a dict of figures and raises ``BenchmarkError`` when the work
it timed did not all happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ, kernel
from cairnq.backends import SQLiteBackend

ROOT = Path(__file__).resolve().parents[1]
# SQLite's numbers for PRAGMA synchronous, as huey's side reads it from its connection.
SYNCHRONOUS_LEVELS = {"off": 0, "normal": 1, "full": 2, "extra": 3}


class BenchmarkError(RuntimeError):
    """A workload did not do the work it claims to have timed."""


def _count(url: str, status: str, **options: Any) -> int:
    with SyncCairnQ.connect(url, **options) as cq:
        return sum(s[status] for s in cq.stats().values())


async def submit_single(url: str, count: int) -> dict[str, Any]:
    async with CairnQ.connect(url) as cq:
        await cq.stats()
        started = time.perf_counter()
        for i in range(count):
            await cq.submit("noop", {"i": i})
        elapsed = time.perf_counter() - started
    if _count(url, "queued") < count:
        raise BenchmarkError("single submits missing")
    return {"submit_single_per_s": count / elapsed}


def submit_single_sync(url: str, count: int) -> dict[str, Any]:
    """``submit_single`` through the blocking client; also the ``synchronous`` level used."""
    with SyncCairnQ.connect(url) as cq:
        cq.stats()
        started = time.perf_counter()
        for i in range(count):
            cq.submit("noop", {"i": i})
        elapsed = time.perf_counter() - started
        figures: dict[str, Any] = {"submit_single_sync_per_s": count / elapsed}
        if isinstance(cq.backend, SQLiteBackend):
            figures["submit_synchronous"] = SYNCHRONOUS_LEVELS[cq.backend.synchronous]
    if _count(url, "queued") < count:
        raise BenchmarkError("single blocking submits missing")
    return figures


async def submit_concurrent(url: str, count: int, width: int = 100) -> dict[str, Any]:
    async with CairnQ.connect(url) as cq:
        await cq.stats()
        started = time.perf_counter()
        for start in range(0, count, width):
            await asyncio.gather(
                *(cq.submit("noop", {"i": i}) for i in range(start, min(count, start + width)))
            )
        elapsed = time.perf_counter() - started
    return {"submit_concurrent_per_s": count / elapsed}


def bulk_items(count: int, *, keyed: bool) -> list[Any]:
    """The batch workloads' tasks: keyed ones carry a key, a priority and, one in ten,
    a delay of 1 ms; plain ones are ``(name, payload)`` pairs and nothing else."""
    if not keyed:
        return [("noop", {"i": i}) for i in range(count)]
    return [
        {
            "task": "noop",
            "payload": {"i": i},
            "key": f"bulk-{i}",
            "priority": i % 3,
            "delay_ms": 0 if i % 10 else 1,
        }
        for i in range(count)
    ]


async def submit_bulk(
    url: str, count: int, chunk: int = 1000, *, keyed: bool = True, ids_only: bool = False
) -> dict[str, Any]:
    """``count`` tasks in batches of ``chunk``: ``submit_many``, or ``submit_many_ids``."""
    items = bulk_items(count, keyed=keyed)
    async with CairnQ.connect(url) as cq:
        await cq.stats()
        submit = cq.submit_many_ids if ids_only else cq.submit_many
        started = time.perf_counter()
        for start in range(0, count, chunk):
            await submit(items[start : start + chunk])
        elapsed = time.perf_counter() - started
    if (queued := _count(url, "queued")) != count:
        raise BenchmarkError(f"batch submits: {queued} of {count} tasks queued")
    name = "submit_bulk" + ("" if keyed else "_plain") + ("_ids" if ids_only else "")
    return {f"{name}_per_s": count / elapsed}


def drain(url: str, count: int, processes: int, concurrency: int = 100) -> dict[str, Any]:
    """``count`` queued no-op tasks, then ``processes`` worker processes until all succeeded.

    Each worker runs with ``until_idle`` and exits once nothing is due; timed
    from starting the processes until the last one exits (start-up included),
    then the database must show every task succeeded.
    """
    with SyncCairnQ.connect(url) as cq:
        for start in range(0, count, 1000):
            cq.submit_many([("noop", {}) for _ in range(min(1000, count - start))])
    started = time.perf_counter()
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.worker_main", url, str(concurrency)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outputs = [proc.communicate(timeout=600)[0] for proc in workers]
    elapsed = time.perf_counter() - started
    if any(proc.returncode != 0 for proc in workers):
        raise BenchmarkError(f"a drain worker failed ({[p.returncode for p in workers]})")
    done = _count(url, "succeeded")
    if done != count:
        raise BenchmarkError(f"drain finished {done} of {count} tasks")
    rss = [json.loads(out)["max_rss_mb"] for out in outputs]
    return {f"drain_{processes}p_per_s": count / elapsed, f"drain_{processes}p_rss_mb": max(rss)}


def drain_limited(url: str, count: int, limits: str, keys: int = 100) -> dict[str, Any]:
    """``drain`` by one worker process of tasks over ``keys`` keys (``payload.k``), with
    the worker's ``limits`` (``none``, ``loose``: a limit that never binds, ``one``: at
    most 1 running per key); timed as ``drain``, every task checked succeeded."""
    with SyncCairnQ.connect(url) as cq:
        for start in range(0, count, 1000):
            cq.submit_many(
                [("noop", {"k": f"k{(start + i) % keys}"}) for i in range(min(1000, count - start))]
            )
    started = time.perf_counter()
    worker = subprocess.run(
        [sys.executable, "-m", "benchmarks.worker_main", url, "100", limits],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - started
    if worker.returncode != 0:
        raise BenchmarkError(f"a limited drain worker failed: {worker.stderr[-2000:]}")
    done = _count(url, "succeeded")
    if done != count:
        raise BenchmarkError(f"limited drain finished {done} of {count} tasks")
    return {f"drain_limits_{limits}_per_s": count / elapsed}


def latency(url: str, samples: int) -> dict[str, Any]:
    """Submit here, handler start in an idle worker process: p50/p95/p99 in ms."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.latency_worker", url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    if worker.stdout.readline().strip() != "ready":
        raise BenchmarkError("latency worker did not start")
    gaps = []
    with SyncCairnQ.connect(url) as cq:
        for _ in range(samples):
            time.sleep(0.02)
            sent = time.time()
            task = cq.submit("stamp", {"sent": sent})
            done = cq.wait(task.id, timeout_ms=10_000, poll_ms=5, max_poll_ms=20)
            if done.status != "succeeded":
                raise BenchmarkError("a latency task did not succeed")
            gaps.append((done.result - sent) * 1000)
    worker.terminate()
    worker.wait(timeout=30)
    gaps.sort()
    return {
        "latency_p50_ms": statistics.median(gaps),
        "latency_p95_ms": gaps[int(len(gaps) * 0.95) - 1],
        "latency_p99_ms": gaps[int(len(gaps) * 0.99) - 1],
    }


def backlog(url: str, due: int, not_due: int, rounds: int = 5) -> dict[str, Any]:
    """Draining ``due`` tasks behind ``not_due`` delayed ones, against the same with no backlog.

    A drain of 1,000 tasks is short next to a worker process's start-up, so each
    side is the median of ``rounds`` drains.
    """

    def drain_rate() -> float:
        rate: float = drain(url, due, 1)["drain_1p_per_s"]
        with SyncCairnQ.connect(url) as cq:
            cq.purge(older_than_ms=0, status="succeeded", limit=due)
        return rate

    empty = statistics.median(drain_rate() for _ in range(rounds))
    with SyncCairnQ.connect(url) as cq:
        for _start in range(0, not_due, 1000):
            cq.submit_many(
                [{"task": "noop", "payload": {}, "delay_ms": 3_600_000} for _ in range(1000)]
            )
    behind = statistics.median(drain_rate() for _ in range(rounds))
    return {"backlog_drain_ratio": behind / empty}


def probe_cost(url: str, retries: int, rounds: int = 200) -> dict[str, Any]:
    """Cost of an idle worker's probe with ``retries`` tasks backing off (none due)."""
    with SyncCairnQ.connect(url) as cq:
        for _start in range(0, retries, 1000):
            cq.submit_many(
                [{"task": "noop", "payload": {}, "delay_ms": 3_600_000} for _ in range(1000)]
            )
        started = time.perf_counter()
        for _ in range(rounds):
            if cq.backend.run(kernel.probe(["default"], ["noop"]), write=False):
                raise BenchmarkError("the probe found work where none is due")
        elapsed = time.perf_counter() - started
    return {"idle_probe_us": elapsed / rounds * 1e6}


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fresh_url(backend: str, folder: Path, name: str) -> str:
    if backend == "sqlite":
        path = folder / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{path}{suffix}")
        return f"sqlite:///{path}"
    import psycopg

    admin = os.environ.get("CAIRNQ_BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
    # One database per benchmark process and workload, so runs side by side (two
    # trees, two people) never drop each other's; those of processes gone are dropped.
    database = f"bench_{os.getpid()}_{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        names = conn.execute("select datname from pg_database where datname like 'bench\\_%'")
        for (old,) in names.fetchall():
            owner = old.split("_")[1]
            if old == database or (owner.isdigit() and not _alive(int(owner))):
                conn.execute(f'drop database if exists "{old}" with (force)')
        conn.execute(f'create database "{database}"')
    base = admin.rsplit("/", 1)[0]
    return f"{base}/{database}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
