"""The worker process of the batch crash test.

Usage: ``python -m tests._batch_child SPEC STOP``.

It serves handler ``member``: a short sleep, then a failure for a payload with
``fail`` true, else the payload's ``n``. It stops when the file ``STOP`` exists; the
test kills it with ``kill -9`` instead while members run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from cairnq import CairnQ, Worker

from ._child import open_backend

LEASE_MS = 1_500


def main(spec: dict[str, Any], stop: str) -> None:
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(
        CairnQ(open_backend(spec, **options)),
        lease_ms=LEASE_MS,
        poll_interval_ms=50,
        concurrency=8,
    )

    @worker.task
    async def member(ctx: Any, payload: Any) -> Any:
        await asyncio.sleep(0.005)
        if payload.get("fail"):
            raise RuntimeError(f"member {payload['n']} fails")
        return payload["n"]

    async def run() -> None:
        async with worker.background():
            while not os.path.exists(stop):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(run())


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2])
