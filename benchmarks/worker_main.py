"""A drain worker process: runs no-op tasks until none is due, then prints its peak RSS."""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from typing import Any

from cairnq import CairnQ, Worker


async def main(url: str, concurrency: int) -> None:
    async with CairnQ.connect(url) as cq:
        worker = Worker(cq, concurrency=concurrency)

        @worker.task
        async def noop(ctx: Any, payload: Any) -> None:
            return None

        await worker.run(until_idle=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mb": rss}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
