"""A submitting process for ``python -m benchmarks.scaling``.

Usage: ``python -m benchmarks.submitter_main URL COUNT MODE``: submits COUNT
no-op tasks, ``single`` (one ``submit`` at a time, each awaited before the
next) or ``many`` (``submit_many`` in batches of up to 1,000 plain tasks).
It connects, prints ``ready``, waits for a line on stdin, submits, and prints
one JSON line: the CPU time (user + system) and wall-clock times of the
submitting alone; then it waits for another line before it disconnects.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from cairnq import CairnQ

from .worker_main import cpu_seconds

BATCH = 1000


async def main(url: str, count: int, mode: str) -> None:
    if mode not in ("single", "many"):
        raise SystemExit(f"unknown mode {mode!r}; single or many")
    async with CairnQ.connect(url) as cq:
        await cq.stats()
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        started, cpu = time.time(), cpu_seconds()
        if mode == "single":
            for i in range(count):
                await cq.submit("noop", {"i": i})
        else:
            for start in range(0, count, BATCH):
                await cq.submit_many([("noop", {}) for _ in range(min(BATCH, count - start))])
        ended, cpu = time.time(), cpu_seconds() - cpu
        print(json.dumps({"cpu_s": cpu, "started": started, "ended": ended}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
