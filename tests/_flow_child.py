"""The worker process of the flow-control process tests.

Usage: ``python -m tests._flow_child SPEC LOG STOP``.

It serves queue ``default`` with handlers ``tick`` and ``tock`` (concurrency 4);
each call appends ``START_TIME NAME TASK_ID`` (wall clock, seconds) to ``LOG``,
then sleeps 50 ms. It stops when the file ``STOP`` exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from cairnq import CairnQ, Worker

from ._child import open_backend


def main(spec: dict[str, Any], log_path: str, stop_path: str) -> None:
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(CairnQ(open_backend(spec, **options)), concurrency=4, poll_interval_ms=50)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    async def record(ctx: Any) -> None:
        log.write(f"{time.time():.6f} {ctx.name} {ctx.task_id}\n")
        await asyncio.sleep(0.05)

    worker.register("tick", record)
    worker.register("tock", record)

    async def run() -> None:
        async with worker.background():
            while not os.path.exists(stop_path):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(run())
    log.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])
