"""The worker process the limit tests run: ``python -m tests._limit_child SPEC MODE LOG STOP``.

MODE ``keys``: tasks named ``job`` in queue ``limited``, at most 2 running at once per
``payload.customer``, each sleeping a random 5-50 ms. MODE ``rate``: tasks named ``tick``
in queue ``rated``, at most 20 per second with a burst of 5, each sleeping 5 ms. Every
handler appends ``start end key pid claimed`` to LOG: wall-clock seconds for start and end,
and the claim's time on the database clock (the clock the rate buckets refill by, in
seconds); the worker runs until STOP exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

from cairnq import CairnQ, Limit, Worker
from cairnq.extensions import Limits

from ._child import open_backend

KEY_LIMIT = Limit.concurrency(2, queue="limited", key="payload.customer")
RATE_LIMIT = Limit.rate(20, per="1s", burst=5, queue="rated")


def main(spec: dict[str, Any], mode: str, log_path: str, stop_path: str) -> None:
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    queue, limit = ("limited", KEY_LIMIT) if mode == "keys" else ("rated", RATE_LIMIT)
    worker = Worker(
        CairnQ(open_backend(spec, **options)),
        queues=[queue],
        concurrency=8,
        poll_interval_ms=20,
        extensions=[Limits([limit])],
    )

    async def record(ctx: Any, key: str, seconds: float) -> None:
        start = time.time()
        await asyncio.sleep(seconds)
        end = time.time()
        claimed = ctx.claimed_at_ms / 1000
        with open(log_path, "a") as log:
            log.write(f"{start:.6f} {end:.6f} {key} {os.getpid()} {claimed:.3f}\n")

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        await record(ctx, payload["customer"], random.uniform(0.005, 0.05))

    @worker.task
    async def tick(ctx: Any, payload: Any) -> None:
        await record(ctx, "-", 0.005)

    async def run() -> None:
        async with worker.background():
            while not os.path.exists(stop_path):
                await asyncio.sleep(0.02)
        await worker.client.backend.aclose()

    asyncio.run(run())


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), *sys.argv[2:])
