"""A worker in a child process for the encryption tests, its key ring from the environment.

Usage: ``python -m tests._encryption_child SPEC`` where SPEC is the JSON of
``Database.spec()`` and ``CAIRNQ_ENCRYPTION_KEYS`` holds the ring. It runs the
``secret.echo`` tasks due until none is left and prints its pid as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from cairnq import CairnQ, Worker
from cairnq.encryption import keys_from_env

from ._child import open_backend


def main(spec: dict[str, Any]) -> None:
    options = {"listen": False} if spec["kind"] == "postgres" else {}
    worker = Worker(CairnQ(open_backend(spec, **options)), codec=keys_from_env())
    worker._owns_client = True

    @worker.task("secret.echo")
    async def echo(ctx: Any, payload: Any) -> Any:
        return {"echo": payload, "pid": os.getpid()}

    async def run() -> None:
        try:
            await worker.run(until_idle=True)
        finally:
            await worker.client.backend.aclose()

    asyncio.run(run())
    print(json.dumps({"pid": os.getpid()}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
