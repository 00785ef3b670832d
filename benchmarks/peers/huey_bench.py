"""huey's side of the benchmark (SqliteHuey), run with the peer venv's python.

    python -m benchmarks.peers.huey_bench --path FILE --tasks N [--single N] [--samples 100]

Prints one JSON object on stdout with the figures cairnq's side also reports
(``submit_single_per_s``, ``drain_1p_per_s``, ``latency_p50_ms``,
``latency_p95_ms``, ``latency_p99_ms``), and exits non-zero with a message on
stderr when the work it timed did not all happen.  There is no
``submit_bulk_per_s``: huey has no batch enqueue (``task.map()`` enqueues the
items one by one).

Each workload starts on a fresh SQLite file at ``FILE`` (removed with its
``-wal``/``-shm`` before and after).  Everything runs with huey's defaults:
``SqliteHuey(name, filename=FILE)`` (WAL journal, SQLite's default
``synchronous``, reported as ``submit_synchronous``, results stored), and the
consumer started the way huey's docs start it, ``huey_consumer path.to.huey``
(here ``python -m huey.bin.huey_consumer``) with no options, so ONE worker of
type THREAD that polls the queue: every 0.1 s at first, backing off by x1.15 per empty poll up to
10 s, back to 0.1 s after each task; the consumer logs each task at INFO to
stderr (sent to a temporary file here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.huey_tasks import make_huey

ROOT = Path(__file__).resolve().parents[2]


class BenchmarkError(RuntimeError):
    """A workload did not do the work it claims to have timed."""


def remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


@contextlib.contextmanager
def fresh_huey(path: str) -> Any:
    remove(path)
    huey = make_huey(path)
    try:
        yield huey
    finally:
        huey.storage.close()
        remove(path)


class Consumer:
    """``huey_consumer benchmarks.peers.huey_tasks.huey`` in a subprocess, default options."""

    def __init__(self, path: str) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "huey.bin.huey_consumer", "benchmarks.peers.huey_tasks.huey"],
            cwd=ROOT,
            env={**os.environ, "BENCH_HUEY_PATH": path},
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise BenchmarkError(
                f"the huey consumer exited with {self.proc.returncode}\n{self.output()}"
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # huey's graceful shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def submit_single(path: str, tasks: int) -> dict[str, float]:
    """``tasks`` enqueues, one at a time; also the ``synchronous`` level they ran with.

    huey's enqueue blocks until its transaction commits, so the one figure fills
    both rows, the awaited and the blocking one, of cairnq's table.
    """
    with fresh_huey(path) as huey:
        noop = huey.bench_tasks["noop"]
        huey.pending_count()  # open the connection, as cairnq's side does before timing
        # huey leaves it at SQLite's compiled-in default unless given fsync=...
        synchronous = huey.storage.conn.execute("pragma synchronous").fetchone()[0]
        started = time.perf_counter()
        for i in range(tasks):
            noop(i)
        elapsed = time.perf_counter() - started
        if (n := huey.pending_count()) != tasks:
            raise BenchmarkError(f"single enqueues: {n} of {tasks} tasks queued")
    rate = tasks / elapsed
    return {
        "submit_single_per_s": rate,
        "submit_single_sync_per_s": rate,
        "submit_synchronous": synchronous,
    }


def drain(path: str, tasks: int) -> dict[str, float]:
    """``tasks`` queued, then one consumer, timed from its start until huey's result
    store holds all ``tasks`` results (checked every 10 ms)."""
    with fresh_huey(path) as huey:
        noop = huey.bench_tasks["noop"]
        for i in range(tasks):
            noop(i)
        if (n := huey.pending_count()) != tasks:
            raise BenchmarkError(f"drain: {n} of {tasks} tasks queued before the consumer started")

        started = time.perf_counter()
        consumer = Consumer(path)
        try:
            deadline = time.monotonic() + 600
            while huey.result_count() < tasks:
                consumer.check_alive()
                if time.monotonic() > deadline:
                    raise BenchmarkError(
                        f"drain: {huey.result_count()} of {tasks} results after 600 s\n"
                        f"{consumer.output()}"
                    )
                time.sleep(0.01)
            elapsed = time.perf_counter() - started
        finally:
            consumer.stop()

        # Every task's own result, each exactly once, and nothing left queued.
        results = sorted(huey.serializer.deserialize(v) for v in huey.all_results().values())
        if results != list(range(tasks)) or huey.pending_count():
            raise BenchmarkError(
                f"drain: {len(results)} results, {len(set(results) & set(range(tasks)))} of the "
                f"{tasks} tasks, {huey.pending_count()} still queued"
            )
    return {"drain_1p_per_s": tasks / elapsed}


def wait_result(result: Any, consumer: Consumer, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while True:
        value = result.get()  # non-blocking: None until the result is stored
        if value is not None:
            return float(value)
        consumer.check_alive()
        if time.monotonic() > deadline:
            raise BenchmarkError(f"latency: task {result.id} did not run within {timeout} s")
        time.sleep(0.005)


def latency(path: str, samples: int) -> dict[str, float]:
    """An idle consumer; one task at a time, enqueue to the time its function started."""
    with fresh_huey(path) as huey:
        stamp = huey.bench_tasks["stamp"]
        consumer = Consumer(path)
        try:
            # Ready when a first task has run.
            try:
                wait_result(stamp(), consumer, 60)
            except BenchmarkError as e:
                raise BenchmarkError(
                    f"the huey consumer did not start: {e}\n{consumer.output()}"
                ) from e
            gaps = []
            for _ in range(samples):
                time.sleep(0.02)
                sent = time.time()
                result = stamp()
                gaps.append((wait_result(result, consumer, 30) - sent) * 1000)
        finally:
            consumer.stop()
    gaps.sort()
    return {
        "latency_p50_ms": statistics.median(gaps),
        "latency_p95_ms": gaps[int(len(gaps) * 0.95) - 1],
        "latency_p99_ms": gaps[int(len(gaps) * 0.99) - 1],
    }


WORKLOADS = ("submit_single", "drain", "latency")


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.huey_bench")
    parser.add_argument("--path", required=True, help="SQLite file to create (and remove)")
    parser.add_argument("--tasks", type=int, required=True, help="tasks per throughput workload")
    parser.add_argument(
        "--single", type=int, help="enqueues one at a time (default: --tasks), as cairnq's side"
    )
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
    path = str(Path(args.path).resolve())
    figures: dict[str, float] = {}
    try:
        if "submit_single" in only:
            figures |= submit_single(path, args.single or args.tasks)
        if "drain" in only:
            figures |= drain(path, args.tasks)
        if "latency" in only:
            figures |= latency(path, args.samples)
    except BenchmarkError as e:
        print(f"huey_bench: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(figures))


if __name__ == "__main__":
    cli()
