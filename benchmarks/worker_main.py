"""A drain worker process: no-op tasks until ``count`` have succeeded in the database."""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from typing import Any

from cairnq import CairnQ, Worker


async def main(url: str, concurrency: int, count: int) -> None:
    async with CairnQ.connect(url) as cq:
        worker = Worker(cq, concurrency=concurrency, poll_interval_ms=20)

        @worker.task
        async def noop(ctx: Any, payload: Any) -> None:
            return None

        async with worker.background():
            while True:
                stats = await cq.stats()
                if sum(s["succeeded"] for s in stats.values()) >= count:
                    break
                await asyncio.sleep(0.01)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mb": rss}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
