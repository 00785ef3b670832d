"""A drain worker process: runs no-op tasks until none is due, then prints its peak RSS.

Usage: ``python -m benchmarks.worker_main URL CONCURRENCY [LIMITS]``; LIMITS is
``loose`` (a concurrency limit per ``payload.k`` no run comes near) or ``one``
(at most 1 running per ``payload.k``).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from typing import Any

from cairnq import CairnQ, Limit, Worker

LIMITS = {
    "loose": [Limit.concurrency(1_000_000, queue="default", key="payload.k")],
    "one": [Limit.concurrency(1, queue="default", key="payload.k")],
}


async def main(url: str, concurrency: int, limits: str = "none") -> None:
    async with CairnQ.connect(url) as cq:
        worker = Worker(cq, concurrency=concurrency, limits=LIMITS.get(limits))

        @worker.task
        async def noop(ctx: Any, payload: Any) -> None:
            return None

        await worker.run(until_idle=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mb": rss}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:]))
