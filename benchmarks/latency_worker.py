"""An idle worker process for the latency benchmark: returns the time its handler started."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from cairnq import CairnQ, Worker


async def main(url: str) -> None:
    async with CairnQ.connect(url) as cq:
        worker = Worker(cq, concurrency=4)

        @worker.task
        async def stamp(ctx: Any, payload: Any) -> float:
            return time.time()

        async with worker.background():
            await asyncio.sleep(0.5)
            print("ready", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
