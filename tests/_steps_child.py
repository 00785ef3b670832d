"""The worker process of the durable-step crash test.

Usage: ``python -m tests._steps_child SPEC EFFECTS SIGNAL STOP HANG_AFTER``.

It serves handler ``five_steps``: five durable steps, each appending
``step-N PID`` to ``EFFECTS`` (the effect, counted outside cairnq). With
``HANG_AFTER`` > 0, once step ``HANG_AFTER`` is recorded it creates ``SIGNAL`` and
hangs, for the parent to kill it. It stops when the file ``STOP`` exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from cairnq import CairnQ, Worker

from ._child import open_backend

LEASE_MS = 1_500


def main(spec: dict[str, Any], effects: str, signal: str, stop: str, hang_after: int) -> None:
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(CairnQ(open_backend(spec, **options)), lease_ms=LEASE_MS, poll_interval_ms=50)

    def effect(n: int) -> int:
        with open(effects, "a") as out:
            out.write(f"step-{n} {os.getpid()}\n")
        return n * 10

    @worker.task
    async def five_steps(ctx: Any) -> Any:
        results = []
        for n in range(1, 6):
            results.append(await ctx.step(f"step-{n}", effect, n))
            if n == hang_after:
                Path(signal).touch()
                await asyncio.Event().wait()
        return results

    async def run() -> None:
        async with worker.background():
            while not os.path.exists(stop):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(run())


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
