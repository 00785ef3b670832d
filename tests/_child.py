"""Programs the multi-process tests run in real child processes.

Usage: ``python -m tests._child COMMAND SPEC [ARGS...]`` where SPEC is the JSON of
``Database.spec()``. Each command prints what the parent needs as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from cairnq import CairnQ, Worker
from cairnq.backends import Backend, SQLiteBackend


def open_backend(spec: dict[str, Any], **options: Any) -> Backend:
    if spec["kind"] == "sqlite":
        return SQLiteBackend(spec["url"][len("sqlite:///") :], **options)
    from cairnq.backends.postgres import PostgresBackend

    return PostgresBackend(spec["url"], schema=spec["schema"], **options)


def cmd_migrate(spec: dict[str, Any], start_at: str) -> None:
    """Open (and so migrate) the database at a shared start instant; print what it applied."""
    while time.time() < float(start_at):
        time.sleep(0.001)
    backend = open_backend(spec, listen=False) if spec["kind"] == "postgres" else open_backend(spec)
    backend.open()
    print(json.dumps({"applied": backend.migrations_applied, "pid": os.getpid()}))
    backend.close()


def cmd_worker(spec: dict[str, Any], log_path: str, stop_path: str, concurrency: str) -> None:
    """Run tasks named ``job``, logging each execution, until ``stop_path`` exists."""
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(
        CairnQ(open_backend(spec, **options)), concurrency=int(concurrency), poll_interval_ms=50
    )

    @worker.task
    async def job(ctx: Any, payload: Any) -> Any:
        with open(log_path, "a") as log:
            log.write(f"{ctx.task_id} {ctx.attempt} {os.getpid()}\n")
        await asyncio.sleep(0.001)
        return {"n": payload["n"], "pid": os.getpid()}

    async def main() -> None:
        async with worker.background():
            while not os.path.exists(stop_path):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(main())


def cmd_serve(spec: dict[str, Any], marker: str) -> None:
    """``Worker.serve()`` with one slow task handler; writes ``marker`` when a task starts."""
    worker = Worker(open_backend(spec), poll_interval_ms=50, drain_timeout="10s")

    @worker.task
    async def slow(ctx: Any, payload: Any) -> Any:
        with open(marker, "a") as f:
            f.write(f"started {ctx.task_id}\n")
        await asyncio.sleep(payload.get("seconds", 1.0))
        return {"slept": payload.get("seconds", 1.0)}

    worker.serve()
    print(json.dumps({"served": True}))


def cmd_submit_wait(spec: dict[str, Any], count: str) -> None:
    """Submit ``count`` jobs and wait for each; print their results."""

    async def main() -> list[Any]:
        options = {"listen": True} if spec["kind"] == "postgres" else {}
        async with CairnQ(open_backend(spec, **options)) as cq:
            cq._owns_backend = True
            tasks = [await cq.submit("job", {"n": i}) for i in range(int(count))]
            done = [await cq.wait(t.id, timeout_ms=60_000) for t in tasks]
            return [{"id": t.id, "status": t.status, "result": t.result} for t in done]

    print(json.dumps(asyncio.run(main())))


def cmd_submit(spec: dict[str, Any], count: str, start: str) -> None:
    """Submit ``count`` jobs numbered from ``start``; print their ids."""

    async def main() -> list[str]:
        async with CairnQ(open_backend(spec)) as cq:
            cq._owns_backend = True
            return [(await cq.submit("job", {"n": int(start) + i})).id for i in range(int(count))]

    print(json.dumps(asyncio.run(main())))


def cmd_doomed(spec: dict[str, Any], marker: str) -> None:
    """Serve queue ``doomed`` with a short lease; the handler never returns (kill me)."""
    worker = Worker(
        CairnQ(open_backend(spec)), queues=["doomed"], lease_ms=1000, poll_interval_ms=50
    )

    @worker.task
    async def stuck(ctx: Any, payload: Any) -> None:
        # Written whole then renamed: the test polls for the file and reads it at once.
        with open(marker + ".part", "w") as f:
            f.write(ctx.task_id)
        os.replace(marker + ".part", marker)
        await asyncio.Event().wait()

    worker.serve()


def cmd_scheduler(spec: dict[str, Any], worker_id: str, stop_path: str) -> None:
    """A worker named ``worker_id`` evaluating the schedules and running ``job`` tasks,
    until ``stop_path`` exists."""
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(
        CairnQ(open_backend(spec, **options)),
        worker_id=worker_id,
        concurrency=2,
        lease_ms=2000,
        poll_interval_ms=50,
    )

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        await asyncio.sleep(0.001)

    async def main() -> None:
        async with worker.background():
            while not os.path.exists(stop_path):
                await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(main())


COMMANDS = {
    "doomed": cmd_doomed,
    "scheduler": cmd_scheduler,
    "migrate": cmd_migrate,
    "worker": cmd_worker,
    "serve": cmd_serve,
    "submit_wait": cmd_submit_wait,
    "submit": cmd_submit,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]), *sys.argv[3:])
