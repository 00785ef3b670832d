"""The worker process of the durable-waits chaos runs, and the waits' mutants.

``python -m tests.chaos.waits_program SPEC HISTORY STOP [MUTANT]``: a worker serving
``approve`` (waits for an event on its payload's key; fails its first attempt after
the wait when the payload says so) and ``nap`` (sleeps its payload's milliseconds),
recording each run past a wait (``waited``, ``slept``) to ``HISTORY`` (JSON lines),
until the file ``STOP`` exists.

A mutant (``MUTANTS``) is a deliberately broken build of the waits, applied in the
process that runs the broken part: a worker (``wait_for``, ``sleep``), or the
sending client (``mutated_statements``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from cairnq import CairnQ, Worker
from cairnq.protocol import statements as _protocol

from .history import Recorder
from .programs import open_backend

# (statement, old, new) per dialect.
SQL_MUTANTS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    # A one-receiver event is never seen as taken: each wait on its key takes it again.
    "event_taken_twice": {
        "sqlite": [("waits_take", "(m.fanout = 0 and m.taken_by is null)", "(m.fanout = 0)")],
        "postgres": [("waits_take", "(not m.fanout and m.taken_by is null)", "(not m.fanout)")],
    },
    # A send finds no wait waiting: the event is kept while its waiters stay parked.
    "send_misses_waiters": {
        "sqlite": [("waits_waiting", "w.state = 'waiting'", "w.state = 'never'")],
        "postgres": [("waits_waiting", "w.state = 'waiting'", "w.state = 'never'")],
    },
    # A send's id is never found, and the put replaces the remembered send: a send
    # retried with its id delivers its event again.
    "send_id_forgotten": {
        "sqlite": [
            ("waits_send_find", "send_id = :send_id and", "send_id = :send_id || '?' and"),
            ("waits_send_put", "where cairnq_waits_sends.expires_at_ms <=", "where 0 <="),
        ],
        "postgres": [
            (
                "waits_send_find",
                "send_id = :send_id::text and",
                "send_id = :send_id::text || '?' and",
            ),
            ("waits_send_put", "where cairnq_waits_sends.expires_at_ms <=", "where 0 <="),
        ],
    },
}
EARLY_MS = 400


def _sleep_wakes_early() -> None:
    """A sleep parks its task until ``EARLY_MS`` before its wake time, and the run then
    goes past it without looking at the wake time again."""
    from cairnq.extensions.waits import _ops

    def sleep(
        lease: Any, worker_id: str, name: str, wake_at_ms: Any, delay_ms: int, ending: Any
    ) -> Any:
        yield from _ops.require()
        found = yield _ops.Call("waits_get", {"id": lease.id, "name": name})
        if found and found[0]["state"] != "waiting":
            return _ops._ended(found[0])
        now_ms = yield from _ops._now()
        if found:
            yield from _ops._write(lease, worker_id, now_ms, name, "sleep", None, "slept")
            return _ops.Outcome("slept")
        wake = wake_at_ms if wake_at_ms is not None else now_ms + delay_ms
        yield from _ops._write(
            lease, worker_id, now_ms, name, "sleep", None, "waiting",
            wake_at_ms=wake, parked_run_at_ms=wake - EARLY_MS,
        )  # fmt: skip
        row = yield from _ops._park(lease, worker_id, wake - EARLY_MS, ending)
        return _ops.Outcome("parked", row=row, wake_at_ms=wake)

    _ops.sleep = sleep


PATCHES: dict[str, Callable[[], None]] = {"sleep_wakes_early": _sleep_wakes_early}
MUTANTS = (*SQL_MUTANTS, *PATCHES)


@contextlib.contextmanager
def mutated_statements(name: str | None, dialect: str) -> Iterator[None]:
    """This process's statements broken as SQL mutant ``name`` says, for the block.

    Raises:
        AssertionError: a substitution's text is not found exactly once.
    """
    loaded = _protocol.statements(dialect)  # type: ignore[arg-type]
    saved = dict(loaded)
    for statement, old, new in SQL_MUTANTS.get(name or "", {}).get(dialect, []):
        current = loaded[statement]
        assert current.source.count(old) == 1, f"mutant {name}: {old!r} not once in {statement}"
        loaded[statement] = _protocol._load_statement(
            current.dialect, statement, current.source.replace(old, new)
        )
    try:
        yield
    finally:
        loaded.clear()
        loaded.update(saved)


def main(spec: dict[str, Any], history: str, stop: str, mutant: str | None) -> None:
    if mutant in PATCHES:
        PATCHES[mutant]()
    record = Recorder(history)
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    worker = Worker(
        CairnQ(open_backend(spec, **options)),
        concurrency=4,
        lease_ms=1_000,
        poll_interval_ms=50,
    )

    @worker.task
    async def approve(ctx: Any, payload: Any) -> Any:
        answer = await ctx.wait_for(payload["key"])
        name = f"event:{payload['key']}"
        record("waited", task=ctx.task_id, attempt=ctx.attempt, name=name, payload=answer)
        if payload.get("fail_once") and ctx.attempt == 1:
            raise RuntimeError("fails once after its wait")
        return answer

    @worker.task
    async def nap(ctx: Any, payload: Any) -> Any:
        await ctx.sleep(payload["ms"] / 1000)
        record("slept", task=ctx.task_id, attempt=ctx.attempt)
        return "rested"

    async def run() -> None:
        with mutated_statements(mutant, spec["kind"]):
            async with worker.background():
                while not os.path.exists(stop):
                    await asyncio.sleep(0.05)
        await worker.client.backend.aclose()

    asyncio.run(run())
    record.close()


if __name__ == "__main__":
    main(
        json.loads(sys.argv[1]),
        sys.argv[2],
        sys.argv[3],
        sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None,
    )
