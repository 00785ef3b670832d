"""``python -m benchmarks.trends [--rows N] [--postgres URL]``: how long the trends take
to read from the attempt history.

Builds N tasks (20 names over 4 queues) with one recorded attempt each (about 90 %
succeeded, 8 % failed and queued again, 2 % failed), their ends spread evenly over the
last 7 days and run times of 5 ms to 5 s, through cairnq's own submit and the attempt
history's recording hook (a fake clock moves the ends). Then times, median of 5, the
reads behind ``cairnq stats --by name --since 1d`` and ``--since 7d`` and the Trends
page's chart series, first from the attempts alone (as on a database without the hourly
rollups; ``--raw`` stops there, ``--rolled`` skips it), then after rolling the hours up
once as the worker's periodic job does (the rollup's own time is printed). SQLite by
default (a file in a temporary folder); PostgreSQL in a fresh schema with ``--postgres URL``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairnq import SyncCairnQ
from cairnq.extensions.history._hooks import record
from cairnq.extensions.history._rollups import chunks, first_ended, roll, rolled_until
from cairnq.extensions.history._trends import raw_series, raw_trends, series, trends
from cairnq.kernel.points import AttemptEnd
from cairnq.models import Lease
from cairnq.testing import FakeClock

DAY_MS = 24 * 3_600_000
BATCH = 1_000
NAMES = [f"job_{i:02d}" for i in range(20)]
REDO = 3
QUEUES = ["default", "emails", "reports", "billing"]


def _backend(target: str | None, folder: Path, clock: FakeClock) -> Any:
    if target is None:
        from cairnq.backends.sqlite import SQLiteBackend

        return SQLiteBackend(folder / "trends.db", clock=clock)
    from cairnq.backends.postgres import PostgresBackend

    return PostgresBackend(
        target, schema=f"bench_{uuid.uuid4().hex[:8]}", clock=clock, listen=False
    )


def build(cq: SyncCairnQ, clock: FakeClock, rows: int) -> None:
    """``rows`` tasks, each with one attempt, ending evenly over the 7 days before now."""
    rng = random.Random(7)
    step = 7 * DAY_MS // max(1, rows // BATCH)
    for start in range(0, rows, BATCH):
        size = min(BATCH, rows - start)
        specs = []
        for i in range(size):
            n = (start + i) % len(NAMES)
            specs.append({"task": NAMES[n], "queue": QUEUES[n % len(QUEUES)]})
        ids = cq.submit_many_ids(specs)
        now = clock.now_ms()
        ends = []
        for j, task_id in enumerate(ids):
            roll = rng.random()
            outcome = "succeeded" if roll < 0.90 else "retry" if roll < 0.98 else "failed"
            run_ms = int(rng.lognormvariate(5, 1.2)) % 5_000 + 5
            ends.append(
                AttemptEnd(Lease(task_id, 1, start + j + 1), "bench", now - run_ms, outcome)
            )
        cq.backend.run(record(ends, None), write=True)
        clock.advance(step)


def roll_all(cq: SyncCairnQ, now_ms: int) -> int:
    """One turn of the rollup job at ``now_ms`` (every hour over, from the first attempt's);
    returns the rollup rows written."""
    run = cq.backend.run
    mark = run(rolled_until(), write=False)
    first = None if mark is not None else run(first_ended(), write=False)
    return sum(run(roll(a, b), write=True) for a, b in chunks(mark, first, now_ms))


def read(cq: SyncCairnQ, op: Any) -> object:
    """``op`` run again: a generator runs once, so each run builds it anew."""
    return cq.backend.run(op(), write=False)


def timed(fn: Callable[[], object], runs: int = 5) -> float:
    """The median wall time of ``fn()`` over ``runs``, in milliseconds."""
    spent = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        spent.append((time.perf_counter() - began) * 1000)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--postgres", metavar="URL")
    parser.add_argument("--raw", action="store_true", help="time the attempts alone")
    parser.add_argument("--rolled", action="store_true", help="time the rolled reads alone")
    args = parser.parse_args()
    clock = FakeClock(1_800_000_000_000)
    with tempfile.TemporaryDirectory() as folder:
        cq = SyncCairnQ(_backend(args.postgres, Path(folder), clock))
        try:
            began = time.perf_counter()
            build(cq, clock, args.rows)
            print(f"built {args.rows} attempts in {time.perf_counter() - began:.1f} s")
            now = clock.now_ms()
            for kind, trend, chart in (("raw", raw_trends, raw_series), ("rolled", trends, series)):
                if kind == "raw" and args.rolled:
                    continue
                if kind == "rolled":
                    if args.raw:
                        break
                    began = time.perf_counter()
                    written = roll_all(cq, now)
                    spent = time.perf_counter() - began
                    print(f"rollup of {args.rows} attempts: {spent:.1f} s, {written} rows")
                    began = time.perf_counter()
                    roll_all(cq, now)
                    spent = (time.perf_counter() - began) * 1000
                    print(f"next turn (the last {REDO} hours again): {spent:.0f} ms")
                for label, make in (
                    ("trends by name, 1d", lambda t=trend: t("name", "1d", now_ms=now)),
                    ("trends by name, 7d", lambda t=trend: t("name", "7d", now_ms=now)),
                    ("trends by queue, 7d", lambda t=trend: t("queue", "7d", now_ms=now)),
                    ("series by name, 7d x 28", lambda c=chart: c("name", "7d", 28, now_ms=now)),
                    ("series by name, 1d x 24", lambda c=chart: c("name", "1d", 24, now_ms=now)),
                ):
                    spent = timed(lambda make=make: read(cq, make))
                    print(f"{kind} {label}: {spent:.0f} ms (median of 5)")
        finally:
            cq.close()


if __name__ == "__main__":
    main()
