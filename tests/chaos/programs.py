"""The processes a chaos run starts: workers and clients that record what they do.

``python -m tests.chaos.programs worker CONFIG`` / ``... client CONFIG`` where
CONFIG is JSON. Handlers record ``handler_start`` / ``handler_end``; the backend
wrapper records claims and settlements (``history.RecordingBackend``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

from cairnq import CairnQ, TaskContext, Worker, _ops, _protocol, errors
from cairnq.backends import Backend, SQLiteBackend

from .history import Recorder, RecordingBackend

# Mutants: deliberately broken builds the checker must catch. Each is a list of
# (statement, old text, new text) substitutions applied to this process's statements.
_OWNED = ("complete", "succeed", "fail", "progress", "heartbeat", "release")
_CLAIMS = ("claim", "claim_one_queue", "claim_one_name", "claim_one_queue_one_name")
MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    # Owned writes fenced on the worker id alone, as the reference does.
    "no_fence": [
        *[
            (n, "and attempt = :attempt::integer", "and :attempt::integer is not null")
            for n in _OWNED
        ],
        *[(n, "and attempt = :attempt", "and :attempt is not null") for n in _OWNED],
        (
            "heartbeat_batch",
            "and cairnq_tasks.attempt = held.held_attempt",
            "and held.held_attempt is not null",
        ),
        ("heartbeat_batch", "and p.attempt = t.attempt", "and p.attempt is not null"),
        (
            "complete_many",
            "and cairnq_tasks.attempt = settled.settled_attempt",
            "and settled.settled_attempt is not null",
        ),
        ("complete_many", "and t.attempt = s.attempt", "and s.attempt is not null"),
    ],
    # Recovery that requeues (or fails) a task whose cancel was requested.
    "recover_ignores_cancel": [
        ("recover_leases", "when cancel_requested_at_ms is not null then", "when 1 = 0 then"),
    ],
    # Claims that neither skip locked rows nor re-check the row once they hold it.
    "claim_without_fence": [
        *[(n, "for update skip locked", "") for n in _CLAIMS],
        *[(n, "  and status = 'queued'\nreturning", "returning") for n in _CLAIMS],
    ],
}


def apply_mutant(name: str | None, dialect: str) -> None:
    """Swap statement text in this process; refuses a mutant that changes nothing."""
    if not name:
        return
    if name == "deferred":
        # SQLite write transactions opened deferred instead of immediate.
        SQLiteBackend.begin_write = "begin deferred"
        return
    if name == "no_fence":
        # ... and the worker trusts a lease until the database says otherwise (no local
        # deadline), as an implementation fenced on the worker id alone does.
        from cairnq.worker import _context

        _context.TaskContext.lease_deadline = property(  # type: ignore[assignment]
            lambda self: float("inf"), lambda self, value: None
        )
    loaded = _protocol.statements(dialect)  # type: ignore[arg-type]
    changed = 0
    for statement, old, new in MUTANTS[name]:
        current = loaded[statement]
        if old in current.source:
            source = current.source.replace(old, new)
            loaded[statement] = _protocol._load_statement(current.dialect, statement, source)
            changed += 1
    if not changed:
        raise SystemExit(f"mutant {name} matched nothing in the {dialect} statements")


def open_backend(spec: dict[str, Any], **options: Any) -> Backend:
    if spec["kind"] == "sqlite":
        options.pop("listen", None)
        if spec.get("busy_ms") is not None:
            options["busy_timeout_ms"] = spec["busy_ms"]
        return SQLiteBackend(spec["url"][len("sqlite:///") :], **options)
    from cairnq.backends.postgres import PostgresBackend

    if spec.get("op_timeout_s") is not None:
        options["op_timeout_s"] = spec["op_timeout_s"]
    return PostgresBackend(spec["url"], schema=spec["schema"], **options)


def run_worker(config: dict[str, Any]) -> None:
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    options = {"listen": True} if spec["kind"] == "postgres" else {}
    backend = RecordingBackend(open_backend(spec, **options), record)
    worker = Worker(
        CairnQ(backend),  # type: ignore[arg-type]
        queues=config.get("queues", ["default"]),
        concurrency=config.get("concurrency", 4),
        lease_ms=config.get("lease_ms", 1000),
        heartbeat_interval_ms=config.get("heartbeat_ms"),
        poll_interval_ms=config.get("poll_ms", 100),
        retry_backoff_ms=config.get("backoff_ms", 50),
        retry_backoff_max_ms=config.get("backoff_max_ms", 200),
        recovery_interval_ms=config.get("recovery_ms", 200),
        worker_id=config.get("worker_id"),
        drain_timeout_ms=config.get("drain_ms", 2000),
    )
    rng = random.Random(config.get("seed", 0) * 1000 + os.getpid())

    @worker.task
    async def job(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        record("handler_start", task=ctx.task_id, attempt=ctx.attempt, worker=ctx.worker_id)
        mode = payload.get("mode", "ok")
        low, high = payload.get("sleep_ms", [5, 50])
        if mode == "block":
            time.sleep(payload.get("block_s", 2.0))
        else:
            await asyncio.sleep(rng.uniform(low, high) / 1000)
        if mode == "crash":
            os._exit(137)
        if mode == "fail" and ctx.attempt < payload.get("fail_until", 2):
            record("handler_end", task=ctx.task_id, attempt=ctx.attempt, outcome="raise")
            raise ConnectionError("scripted failure")
        if mode == "permanent":
            record("handler_end", task=ctx.task_id, attempt=ctx.attempt, outcome="raise")
            raise errors.TaskError("scripted permanent failure")
        if mode == "watch_cancel":
            for _ in range(200):
                if await ctx.canceled():
                    break
                await asyncio.sleep(0.01)
        record("handler_end", task=ctx.task_id, attempt=ctx.attempt, outcome="return")
        return {"n": payload.get("n"), "attempt": ctx.attempt}

    worker.serve()


async def _client(config: dict[str, Any]) -> None:
    spec = config["db"]
    record = Recorder(config["history"])
    rng = random.Random(config.get("seed", 0) * 7919 + os.getpid())
    async with CairnQ(open_backend(spec)) as cq:
        cq._owns_backend = True
        submitted: list[str] = []
        for n in range(config["count"]):
            mode = rng.choices(
                ["ok", "fail", "permanent", "watch_cancel"], weights=config.get("mix", [8, 1, 1, 1])
            )[0]
            request = f"{os.getpid()}-{n}"
            payload = {
                "n": n,
                "mode": mode,
                "sleep_ms": config.get("sleep_ms", [5, 50]),
                "req": request,
            }
            key = f"k{rng.randrange(config.get('keys', 0))}" if config.get("keys") else None
            conflict = rng.choice(["reuse", "replace", "reject"]) if key else "reuse"
            record("submit_invoke", req=request, key=key)
            try:
                task = await cq.submit(
                    "job",
                    payload,
                    key=key,
                    conflict=conflict,
                    max_attempts=config.get("max_attempts", 3),
                )
            except errors.AlreadyExists:
                record("submit_fail", req=request, error="AlreadyExists")
                continue
            except errors.CairnQError as exc:
                record("submit_info", req=request, error=type(exc).__name__)
                continue
            record("submit_ok", req=request, task=task.id, key=key)
            submitted.append(task.id)
            if mode == "watch_cancel" and rng.random() < 0.7:
                await asyncio.sleep(rng.uniform(0, 0.05))
                try:
                    await cq.cancel(task.id)
                    record("cancel_ok", task=task.id)
                except errors.CairnQError as exc:
                    record("cancel_info", task=task.id, error=type(exc).__name__)
            await asyncio.sleep(config.get("gap_ms", 2) / 1000)


def run_client(config: dict[str, Any]) -> None:
    asyncio.run(_client(config))


async def _wait_until(instant: float) -> None:
    await asyncio.sleep(max(0.0, instant - time.time()))


async def _claimers(config: dict[str, Any]) -> None:
    """Round after round, ``per_process`` claims fired at once at one shared instant."""
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    per = config["per_process"]
    options = {"max_size": per, "min_size": per} if spec["kind"] == "postgres" else {}
    backend = RecordingBackend(open_backend(spec, **options), record)
    await backend.aopen()
    for r in range(config["rounds"]):
        await _wait_until(config["start_at"] + r * config["interval_s"])
        draws = [_ops.Draw(None, 1)]
        claims = [
            backend.arun(
                _ops.claim([f"storm{r}"], f"w{os.getpid()}-{i}", config["lease_ms"], draws, 100),
                write=True,
            )
            for i in range(per)
        ]
        for outcome in await asyncio.gather(*claims, return_exceptions=True):
            if isinstance(outcome, BaseException):
                record("claim_error", error=type(outcome).__name__)
    await backend.aclose()


def run_claimers(config: dict[str, Any]) -> None:
    asyncio.run(_claimers(config))


async def _keyed(config: dict[str, Any]) -> None:
    """Every process submits the same keys under one conflict strategy, all at once."""
    spec = config["db"]
    apply_mutant(config.get("mutant"), spec["kind"])
    record = Recorder(config["history"])
    async with CairnQ(open_backend(spec)) as cq:
        cq._owns_backend = True
        await cq.stats()
        await _wait_until(config["start_at"])

        async def one(key: str, i: int) -> None:
            request = f"{os.getpid()}-{key}-{i}"
            record("submit_invoke", req=request, key=key)
            try:
                task = await cq.submit("job", {"i": i}, key=key, conflict=config["conflict"])
            except errors.AlreadyExists:
                record("submit_fail", req=request, key=key, error="AlreadyExists")
                return
            except errors.CairnQError as exc:
                record("submit_info", req=request, key=key, error=type(exc).__name__)
                return
            record("submit_ok", req=request, task=task.id, key=key)

        await asyncio.gather(
            *(one(f"key{k}", i) for k in range(config["keys"]) for i in range(config["per_key"]))
        )


def run_keyed(config: dict[str, Any]) -> None:
    asyncio.run(_keyed(config))


if __name__ == "__main__":
    role, raw = sys.argv[1], sys.argv[2]
    roles = {
        "worker": run_worker,
        "client": run_client,
        "claimers": run_claimers,
        "keyed": run_keyed,
    }
    roles[role](json.loads(raw))
