"""Histories: what each process did, one JSON line per event, flushed as it happens.

A process killed with SIGKILL keeps every line it wrote (the kernel has them);
only the event in progress is missing, which is what "indeterminate" means.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from cairnq import errors
from cairnq._steps import Op

SETTLE_OPS = {"complete", "succeed", "fail", "release"}
GROUP_SETTLE_OPS = {"complete_many"}


class Recorder:
    """Appends events to ``path`` (one file per process)."""

    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "pid": self.pid, "t": time.monotonic(), **fields})
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def _lease_of(op: Op[Any]) -> tuple[str | None, int | None, str | None]:
    frame = getattr(op, "gi_frame", None)
    local = frame.f_locals if frame is not None else {}
    lease = local.get("lease")
    return (
        getattr(lease, "id", None),
        getattr(lease, "attempt", None),
        local.get("worker_id"),
    )


class RecordingBackend:
    """Wraps a backend; records claims and settlements with their outcome.

    ``claim_ok`` is one row claimed; ``claim_error`` (with the error's type) is
    one claim transaction that failed. ``settle_ok`` means committed;
    ``settle_lost`` means the database refused it (``LostLease``); ``settle_info``
    means the outcome is unknown (an error that may have happened after commit).
    """

    def __init__(self, inner: Any, record: Recorder) -> None:
        self._inner = inner
        self._record = record
        self.dialect = inner.dialect
        self.hub = inner.hub

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def open(self) -> None:
        self._inner.open()

    async def aopen(self) -> None:
        await self._inner.aopen()

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def run(self, op: Op[Any], *, write: bool) -> Any:
        return self._inner.run(op, write=write)

    async def arun_reserved(self, op: Op[Any], *, write: bool) -> Any:
        runner = getattr(self._inner, "arun_reserved", self._inner.arun)
        return await self._observe(op, runner(op, write=write))

    async def arun(self, op: Op[Any], *, write: bool) -> Any:
        return await self._observe(op, self._inner.arun(op, write=write))

    async def _observe(self, op: Op[Any], pending: Any) -> Any:
        name = getattr(op, "__name__", "")
        if name in GROUP_SETTLE_OPS:
            return await self._observe_group(op, pending)
        if name not in SETTLE_OPS and name != "claim":
            return await pending
        task_id, attempt, worker_id = _lease_of(op)
        if name in SETTLE_OPS:
            self._record("settle_invoke", op=name, task=task_id, attempt=attempt, worker=worker_id)
        try:
            result = await pending
        except errors.LostLease:
            self._record("settle_lost", op=name, task=task_id, attempt=attempt, worker=worker_id)
            raise
        except BaseException as exc:
            if name in SETTLE_OPS:
                self._record(
                    "settle_info",
                    op=name,
                    task=task_id,
                    attempt=attempt,
                    worker=worker_id,
                    error=type(exc).__name__,
                )
            elif isinstance(exc, Exception):
                # One claim transaction that failed: the events that bound error loops.
                self._record("claim_error", worker=worker_id, error=type(exc).__name__)
            raise
        if name == "claim":
            for row in result:
                self._record(
                    "claim_ok", task=row["id"], attempt=row["attempt"], worker=row["worker_id"]
                )
        else:
            self._record(
                "settle_ok",
                op=name,
                task=task_id,
                attempt=attempt,
                worker=worker_id,
                status=result["status"],
            )
        return result

    async def _observe_group(self, op: Op[Any], pending: Any) -> Any:
        """A group settlement: one settle event per attempt in it."""
        frame = getattr(op, "gi_frame", None)
        local = frame.f_locals if frame is not None else {}
        leases = list(local.get("leases", []))
        worker = local.get("worker_id")
        for lease in leases:
            self._record(
                "settle_invoke", op="complete", task=lease.id, attempt=lease.attempt, worker=worker
            )
        try:
            rows = await pending
        except BaseException as exc:
            for lease in leases:
                self._record(
                    "settle_info",
                    op="complete",
                    task=lease.id,
                    attempt=lease.attempt,
                    worker=worker,
                    error=type(exc).__name__,
                )
            raise
        for lease in leases:
            row = rows.get(lease.id)
            if row is None:
                self._record(
                    "settle_lost",
                    op="complete",
                    task=lease.id,
                    attempt=lease.attempt,
                    worker=worker,
                )
            else:
                self._record(
                    "settle_ok",
                    op="complete",
                    task=lease.id,
                    attempt=lease.attempt,
                    worker=worker,
                    status=row["status"],
                )
        return rows


def load(paths: list[Path]) -> list[dict[str, Any]]:
    """Every event of every history file (a torn last line from a kill is skipped)."""
    events = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events
