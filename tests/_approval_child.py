"""The worker process of the approval crash test.

Usage: ``python -m tests._approval_child SPEC EFFECTS STOP``.

It serves handler ``approve``: a durable step (appending ``asked PID`` to
``EFFECTS``, the effect counted outside cairnq), then a wait for the event
``approval:<payload id>``, then the answer returned. It stops when the file ``STOP``
exists.
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


def main(spec: dict[str, Any], effects: str, stop: str) -> None:
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(CairnQ(open_backend(spec, **options)), lease_ms=LEASE_MS, poll_interval_ms=50)

    def ask(order: str) -> str:
        with open(effects, "a") as out:
            out.write(f"asked {os.getpid()}\n")
        return order

    @worker.task
    async def approve(ctx: Any, payload: Any) -> Any:
        order = await ctx.step("ask", ask, payload["order"])
        answer = await ctx.wait_for(f"approval:{order}")
        return {"order": order, "answer": answer, "pid": os.getpid()}

    async def run() -> None:
        async with worker.background():
            while not os.path.exists(stop):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(run())


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])
