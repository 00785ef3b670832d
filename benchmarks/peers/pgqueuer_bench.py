"""PgQueuer's side of the benchmark, run with the peer venv's python.

    python -m benchmarks.peers.pgqueuer_bench --dsn DSN --tasks N [--samples 100]

Prints one JSON object on stdout with the figures cairnq's side also reports
(``submit_single_per_s``, ``submit_bulk_ids_per_s``, ``submit_bulk_plain_ids_per_s``,
``drain_1p_per_s``, ``latency_p50_ms``, ``latency_p95_ms``, ``latency_p99_ms``),
and exits non-zero with a message on stderr when the work it timed did not all
happen.

Each workload starts from an empty queue: PgQueuer's schema is uninstalled and
installed again with its own ``Queries.install()`` (what ``pgq install`` runs)
in the DSN's database.  The DSN's database is taken over: PgQueuer's objects in
it are dropped, and a table ``pgqueuer_bench_latency`` is made and dropped.

Everything runs with PgQueuer's defaults.  Workers are started the way its README
starts them, ``pgq run module:factory`` (here ``python -m pgqueuer run`` so the
working directory is importable), with no options but ``--mode drain`` for the
drain worker, so: asyncpg driver over one connection, uvloop (the CLI's choice),
``batch_size=10``, no ``max_concurrent_tasks`` (unlimited), ``dequeue_timeout=30s``
(LISTEN/NOTIFY wakes the worker; the timeout is the polling fallback), the
completion log buffered and flushed every ~0.1 s or every ``batch_size`` jobs.
The client side (enqueues, checks) runs on a plain ``asyncio.run`` loop with one
asyncpg connection, as cairnq's client side does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.domain.settings import db_settings
from pgqueuer.models import Job
from pgqueuer.queries import Queries

ROOT = Path(__file__).resolve().parents[2]
LATENCY_TABLE = "pgqueuer_bench_latency"
QUEUE_TABLE = db_settings().queue_table  # "pgqueuer" unless PGQUEUER_PREFIX is set
LOG_TABLE = db_settings().queue_table_log  # "pgqueuer_log"
CHUNK = 1000  # jobs per batch enqueue, as cairnq's bulk submit uses


class BenchmarkError(RuntimeError):
    """A workload did not do the work it claims to have timed."""


def payload(i: int) -> bytes:
    # PgQueuer payloads are bytes; the same small JSON document cairnq's side submits.
    return json.dumps({"i": i}).encode()


# -- the worker processes' factories (``pgq run benchmarks.peers.pgqueuer_bench:...``)


@contextlib.asynccontextmanager
async def drain_worker(args: list[str]) -> AsyncIterator[PgQueuer]:
    """A worker with one no-op entrypoint (``--mode drain``: exits once the queue is empty)."""
    connection = await asyncpg.connect(args[0])
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    try:
        yield pgq
    finally:
        await connection.close()


@contextlib.asynccontextmanager
async def latency_worker(args: list[str]) -> AsyncIterator[PgQueuer]:
    """A continuous worker whose handler records ``time.time()`` at its start in a table."""
    connection = await asyncpg.connect(args[0])
    # A second connection for the stamps, so they do not queue behind the
    # worker's own statements on its connection.
    stamps = await asyncpg.connect(args[0])
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint("stamp")
    async def stamp(job: Job) -> None:
        started = time.time()
        await stamps.execute(
            f"insert into {LATENCY_TABLE} (job_id, started) values ($1, $2)", job.id, started
        )

    try:
        yield pgq
    finally:
        await stamps.close()
        await connection.close()


def start_worker(factory: str, dsn: str, *options: str) -> tuple[subprocess.Popen[bytes], Any]:
    log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the worker's lifetime)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgqueuer",
            "run",
            *options,
            f"benchmarks.peers.pgqueuer_bench:{factory}",
            "--",
            dsn,
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log


def worker_output(log: Any) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-4000:]


# -- the client side


async def connect(dsn: str) -> tuple[asyncpg.Connection, Queries]:
    connection = await asyncpg.connect(dsn)
    return connection, Queries(AsyncpgDriver(connection))


async def reset(dsn: str) -> None:
    """An empty queue: PgQueuer's schema dropped and installed again."""
    connection, queries = await connect(dsn)
    try:
        if await queries.schema_is_installed():
            await queries.uninstall()
        await queries.install()
        await connection.execute(f"drop table if exists {LATENCY_TABLE}")
    finally:
        await connection.close()


async def count(connection: asyncpg.Connection, sql: str) -> int:
    return int(await connection.fetchval(sql))


async def queued(connection: asyncpg.Connection) -> int:
    return await count(connection, f"select count(*) from {QUEUE_TABLE} where status = 'queued'")


async def enqueue_bulk(queries: Queries, tasks: int) -> None:
    for start in range(0, tasks, CHUNK):
        n = min(CHUNK, tasks - start)
        await queries.enqueue(["noop"] * n, [payload(i) for i in range(start, start + n)], [0] * n)


async def submit_single(dsn: str, tasks: int) -> dict[str, float]:
    await reset(dsn)
    connection, queries = await connect(dsn)
    try:
        await queries.queued_work(["noop"])  # warm the connection, as cairnq's side does
        started = time.perf_counter()
        for i in range(tasks):
            await queries.enqueue("noop", payload(i))
        elapsed = time.perf_counter() - started
        if (n := await queued(connection)) != tasks:
            raise BenchmarkError(f"single enqueues: {n} of {tasks} jobs queued")
    finally:
        await connection.close()
    return {"submit_single_per_s": tasks / elapsed}


async def enqueue_bulk_keyed(queries: Queries, tasks: int) -> None:
    """Batches as cairnq's keyed workload: a key, priority ``i % 3``, 1 ms delay on one in ten."""
    for start in range(0, tasks, CHUNK):
        span = range(start, min(tasks, start + CHUNK))
        await queries.enqueue(
            ["noop"] * len(span),
            [payload(i) for i in span],
            [i % 3 for i in span],
            [timedelta(0) if i % 10 else timedelta(milliseconds=1) for i in span],
            [f"bulk-{i}" for i in span],
        )


async def submit_bulk(dsn: str, tasks: int, *, keyed: bool) -> dict[str, float]:
    """PgQueuer's batch API: ``Queries.enqueue`` with lists, ``CHUNK`` jobs per call.

    Plain: no key, priority 0, no delay. Keyed: as ``enqueue_bulk_keyed``.
    """
    await reset(dsn)
    connection, queries = await connect(dsn)
    try:
        await queries.queued_work(["noop"])
        started = time.perf_counter()
        if keyed:
            await enqueue_bulk_keyed(queries, tasks)
        else:
            await enqueue_bulk(queries, tasks)
        elapsed = time.perf_counter() - started
        if (n := await queued(connection)) != tasks:
            raise BenchmarkError(f"batch enqueues: {n} of {tasks} jobs queued")
    finally:
        await connection.close()
    name = "submit_bulk_ids_per_s" if keyed else "submit_bulk_plain_ids_per_s"
    return {name: tasks / elapsed}


async def drain(dsn: str, tasks: int) -> dict[str, float]:
    """``tasks`` queued, then one ``pgq run --mode drain`` process, timed from start to exit."""
    await reset(dsn)
    connection, queries = await connect(dsn)
    try:
        await enqueue_bulk(queries, tasks)
        if (n := await queued(connection)) != tasks:
            raise BenchmarkError(f"drain: {n} of {tasks} jobs queued before the worker started")
    finally:
        await connection.close()

    started = time.perf_counter()
    proc, log = start_worker("drain_worker", dsn, "--mode", "drain")
    try:
        code = await asyncio.to_thread(proc.wait, 600)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchmarkError(
            f"drain worker still running after 600 s\n{worker_output(log)}"
        ) from None
    elapsed = time.perf_counter() - started
    if code != 0:
        raise BenchmarkError(f"drain worker exited with {code}\n{worker_output(log)}")

    # PgQueuer deletes a finished job from its queue table and logs its final
    # status in pgqueuer_log: all ``tasks`` jobs must be there as successful.
    connection = await asyncpg.connect(dsn)
    try:
        left = await count(connection, f"select count(*) from {QUEUE_TABLE}")
        done = await count(
            connection,
            f"select count(distinct job_id) from {LOG_TABLE} where status = 'successful'",
        )
        other = await count(
            connection,
            f"select count(*) from {LOG_TABLE} "
            "where status not in ('queued', 'picked', 'successful')",
        )
    finally:
        await connection.close()
    if left or done != tasks or other:
        raise BenchmarkError(
            f"drain: {done} of {tasks} jobs logged successful, {left} left in the queue, "
            f"{other} other final statuses\n{worker_output(log)}"
        )
    return {"drain_1p_per_s": tasks / elapsed}


async def wait_stamp(connection: asyncpg.Connection, job_id: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while True:
        started = await connection.fetchval(
            f"select started from {LATENCY_TABLE} where job_id = $1", job_id
        )
        if started is not None:
            return float(started)
        if time.monotonic() > deadline:
            raise BenchmarkError(f"latency: job {job_id} did not start within {timeout} s")
        await asyncio.sleep(0.005)


async def latency(dsn: str, samples: int) -> dict[str, float]:
    """An idle ``pgq run`` worker; one job at a time, enqueue to handler start."""
    await reset(dsn)
    connection, queries = await connect(dsn)
    await connection.execute(
        f"create table {LATENCY_TABLE} (job_id bigint primary key, started double precision)"
    )
    proc, log = start_worker("latency_worker", dsn)
    try:
        # Ready when a first job has run (the worker is then listening and idle).
        (warm,) = await queries.enqueue("stamp", None)
        try:
            await wait_stamp(connection, warm, 60)
        except BenchmarkError as e:
            raise BenchmarkError(f"latency worker did not start: {e}\n{worker_output(log)}") from e
        gaps = []
        for _ in range(samples):
            await asyncio.sleep(0.02)
            sent = time.time()
            (job_id,) = await queries.enqueue("stamp", None)
            gaps.append((await wait_stamp(connection, job_id, 10) - sent) * 1000)
    finally:
        proc.terminate()  # SIGTERM: pgq's graceful shutdown
        try:
            await asyncio.to_thread(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        await connection.close()
    gaps.sort()
    return {
        "latency_p50_ms": statistics.median(gaps),
        "latency_p95_ms": gaps[int(len(gaps) * 0.95) - 1],
        "latency_p99_ms": gaps[int(len(gaps) * 0.99) - 1],
    }


WORKLOADS = ("submit_single", "submit_bulk", "drain", "latency")


async def main(dsn: str, tasks: int, samples: int, only: list[str]) -> dict[str, float]:
    figures: dict[str, float] = {}
    if "submit_single" in only:
        figures |= await submit_single(dsn, tasks)
    if "submit_bulk" in only:
        figures |= await submit_bulk(dsn, tasks, keyed=True)
        figures |= await submit_bulk(dsn, tasks, keyed=False)
    if "drain" in only:
        figures |= await drain(dsn, tasks)
    if "latency" in only:
        figures |= await latency(dsn, samples)
    await reset(dsn)  # leave an empty queue behind
    return figures


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.pgqueuer_bench")
    parser.add_argument("--dsn", required=True, help="PostgreSQL DSN of a scratch database")
    parser.add_argument("--tasks", type=int, required=True, help="jobs per throughput workload")
    parser.add_argument(
        "--samples",
        "--latency",
        dest="samples",
        type=int,
        default=100,
        help="latency samples (default 100)",
    )
    parser.add_argument(
        "--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {WORKLOADS}"
    )
    args = parser.parse_args()
    only = [w for w in args.only.split(",") if w]
    if unknown := set(only) - set(WORKLOADS):
        parser.error(f"unknown workloads: {sorted(unknown)}")
    try:
        figures = asyncio.run(main(args.dsn, args.tasks, args.samples, only))
    except BenchmarkError as e:
        print(f"pgqueuer_bench: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(figures))


if __name__ == "__main__":
    cli()
