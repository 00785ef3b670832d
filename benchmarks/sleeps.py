"""``python -m benchmarks.sleeps``: many durable sleeps on few worker slots.

Submits ``--tasks`` tasks (1,000) whose handler sleeps ``--sleep`` seconds (2) with
``ctx.sleep``, to one worker of ``--concurrency`` slots (10) on a fresh database,
and reports how long until all succeeded, next to the sleep itself and to what the
same sleeps would take holding their slots (tasks x sleep / concurrency).

A durable sleep parks its task (queued, due at its wake time) and frees the slot, so
every task's first run parks at once, and all wake together about ``--sleep`` after
they began: the total is about the sleep plus the time to drain the tasks twice (a
run that parks, a run that finishes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from cairnq import CairnQ, Worker

from .cairnq_bench import fresh_url


async def measure(url: str, tasks: int, sleep_s: float, concurrency: int) -> dict[str, Any]:
    """Seconds from the first submit until every task succeeded, with the figures to
    compare it with."""
    async with CairnQ(url) as cq:
        worker = Worker(cq, concurrency=concurrency, poll_interval_ms=50)

        @worker.task
        async def nap(ctx: Any) -> None:
            await ctx.sleep(sleep_s)

        started = time.monotonic()
        await cq.submit_many([{"task": "nap"} for _ in range(tasks)])
        async with worker.background():
            while True:
                counts = (await cq.stats()).get("default", {})
                if counts.get("succeeded", 0) >= tasks:
                    break
                await asyncio.sleep(0.05)
        total = time.monotonic() - started
    return {
        "tasks": tasks,
        "sleep_s": sleep_s,
        "concurrency": concurrency,
        "total_s": round(total, 3),
        "past_the_sleep_s": round(total - sleep_s, 3),
        "holding_slots_s": round(tasks * sleep_s / concurrency, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sleeps", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds each task sleeps")
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = fresh_url(args.backend, Path(folder), "sleeps")
        figures = asyncio.run(measure(url, args.tasks, args.sleep, args.concurrency))
    print(json.dumps({"backend": args.backend, **figures}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
