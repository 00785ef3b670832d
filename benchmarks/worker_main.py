"""A drain worker process: runs no-op tasks until none is due, then prints its figures.

Usage: ``python -m benchmarks.worker_main URL CONCURRENCY [MODE]``. MODE is
``none`` (the default), ``loose`` (a concurrency limit per ``payload.k`` no run
comes near), ``one`` (at most 1 running per ``payload.k``), ``schedule`` (the
worker also declares an every-second schedule, whose ``tick`` tasks go to the
queue ``ticks`` that no worker serves, so the drain pays for evaluating and
submitting its slots and for nothing else), ``unrecorded`` (as ``none``, with
``History(record=False)``: no attempt history)
``kernel`` (as ``none``, opened with ``migrate=False`` on a database that has
only the protocol's and the kernel's migrations, so every built-in extension
steps aside) or ``bare`` (as ``none`` on a database with every migration, the
worker running no extension at all: with ``kernel``, it tells the extensions'
tables from their worker parts).

With ``CAIRNQ_BENCH_HANDSHAKE=1`` in the environment, the process connects,
prints ``ready`` and waits for a line on stdin before it starts draining, so a
timer can leave out the interpreter's start-up; after its figures it waits for
another line before it disconnects. It prints one JSON line at the end: peak
RSS, and the CPU time (user + system) and wall-clock times of the drain itself
(from the line on stdin, or from connecting without the handshake).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

from cairnq import CairnQ, Limit, Worker
from cairnq.extensions import History, Limits

LIMITS = {
    "loose": [Limit.concurrency(1_000_000, queue="default", key="payload.k")],
    "one": [Limit.concurrency(1, queue="default", key="payload.k")],
}
MODES = ("none", "loose", "one", "schedule", "unrecorded", "kernel", "bare")


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main(url: str, concurrency: int, mode: str = "none") -> None:
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    async with CairnQ.connect(url, **({"migrate": False} if mode == "kernel" else {})) as cq:
        if mode == "bare":
            # The worker's registry of built-ins, emptied: it runs the kernel alone.
            from cairnq.extensions import _registry

            _registry.builtins = list  # type: ignore[assignment]
            worker = Worker(cq, concurrency=concurrency)
        else:
            worker = Worker(
                cq,
                concurrency=concurrency,
                extensions=[Limits(LIMITS.get(mode)), History(record=mode != "unrecorded")],
            )

        @worker.task
        async def noop(ctx: Any, payload: Any) -> None:
            return None

        if mode == "schedule":
            worker.schedule("bench-tick", "tick", every="1s", queue="ticks")
        if os.environ.get("CAIRNQ_BENCH_HANDSHAKE") == "1":
            await cq.stats()
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        started, cpu = time.time(), cpu_seconds()
        await worker.run(until_idle=True)
        ended, cpu = time.time(), cpu_seconds() - cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        figures = {"max_rss_mb": rss, "cpu_s": cpu, "started": started, "ended": ended}
        print(json.dumps(figures), flush=True)
        if os.environ.get("CAIRNQ_BENCH_HANDSHAKE") == "1":
            # Connected until told, so the server's processes can be read before they exit.
            await asyncio.to_thread(sys.stdin.readline)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:]))
