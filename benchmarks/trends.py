"""``python -m benchmarks.trends [--rows N] [--postgres URL]``: how long the trends take
to read from the attempt history.

Builds N tasks (20 names over 4 queues) with one recorded attempt each (about 90 %
succeeded, 8 % failed and queued again, 2 % failed), their ends spread evenly over the
last 7 days and run times of 5 ms to 5 s, through cairnq's own submit and the attempt
history's recording hook (a fake clock moves the ends). Then times, median of 5, the
reads behind ``cairnq stats --by name --since 1d`` and ``--since 7d`` and the Trends
page's chart series. SQLite by default (a file in a temporary folder); PostgreSQL in a
fresh schema with ``--postgres URL``.
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
from cairnq.extensions.history._trends import series, trends
from cairnq.kernel.points import AttemptEnd
from cairnq.models import Lease
from cairnq.testing import FakeClock

DAY_MS = 24 * 3_600_000
BATCH = 1_000
NAMES = [f"job_{i:02d}" for i in range(20)]
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
    args = parser.parse_args()
    clock = FakeClock(1_800_000_000_000)
    with tempfile.TemporaryDirectory() as folder:
        cq = SyncCairnQ(_backend(args.postgres, Path(folder), clock))
        try:
            began = time.perf_counter()
            build(cq, clock, args.rows)
            print(f"built {args.rows} attempts in {time.perf_counter() - began:.1f} s")
            now = clock.now_ms()
            run = cq.backend.run
            for label, op in (
                ("trends by name, 1d", lambda: run(trends("name", "1d", now_ms=now), write=False)),
                ("trends by name, 7d", lambda: run(trends("name", "7d", now_ms=now), write=False)),
                (
                    "trends by queue, 7d",
                    lambda: run(trends("queue", "7d", now_ms=now), write=False),
                ),
                (
                    "series by name, 7d x 28",
                    lambda: run(series("name", "7d", 28, now_ms=now), write=False),
                ),
            ):
                print(f"{label}: {timed(op):.0f} ms (median of 5)")
        finally:
            cq.close()


if __name__ == "__main__":
    main()
