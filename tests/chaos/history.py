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
from cairnq.models import Lease, parse_holder
from cairnq.protocol.steps import Op

SETTLE_OPS = {"complete", "succeed", "fail", "release"}
GROUP_SETTLE_OPS = {"complete_many"}
# ``ctx.gather``'s write: it parks (settles) the attempt when a child is still running.
GATHER_OP = "gather"
# A durable wait's write (``ctx.wait_for``, ``ctx.sleep``): it parks (settles) the attempt
# when the run must wait; ``wait_passed`` when the run went past the wait, writing no
# settlement.
WAIT_OPS = {"event_wait", "sleep"}
WAITS_MODULE = "cairnq.extensions.waits._ops"
# The task policies' claim hook: the claimed rows it leaves out it handed back unrun
# (expired), a settlement of each of their claims.
CLAIMED_OP = "claimed"


class Recorder:
    """Appends events to ``path`` (one file per process)."""

    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def close(self) -> None:
        self._file.close()

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "pid": self.pid, "t": time.monotonic(), **fields})
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def nonce_of(lease: Any) -> int | None:
    """The nonce a lease's claim wrote into ``worker_id`` (``None`` for a bare claim)."""
    if lease is None or getattr(lease, "bare", False):
        return None
    return getattr(lease, "token", None)


def _claim_of(lease: Any, worker: Any) -> dict[str, Any]:
    """The fields naming the claim a settlement writes for (its nonce when it has one)."""
    return {
        "task": getattr(lease, "id", None),
        "attempt": getattr(lease, "attempt", None),
        "token": nonce_of(lease),
        "worker": worker,
    }


def _worker_of(op: Op[Any]) -> Any:
    frame = getattr(op, "gi_frame", None)
    return frame.f_locals.get("worker_id") if frame is not None else None


def _module_of(op: Op[Any]) -> Any:
    frame = getattr(op, "gi_frame", None)
    return frame.f_globals.get("__name__") if frame is not None else None


def _lease_of(op: Op[Any]) -> dict[str, Any]:
    frame = getattr(op, "gi_frame", None)
    local = frame.f_locals if frame is not None else {}
    return _claim_of(local.get("lease"), local.get("worker_id"))


class RecordingBackend:
    """Wraps a backend; records claims and settlements (a gather's park among them) with
    their outcome.

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
        if hasattr(inner, "arun_around_write"):
            self.arun_around_write = self._arun_around_write

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

    async def _arun_around_write(self, before: Op[bool], write: Any, after: Any) -> Any:
        """``succeed_in``'s settlement (PostgreSQL: the hold, the write, the completion),
        recorded like any other."""
        claim = _lease_of(before)
        self._record("settle_invoke", op="complete_in", **claim)
        try:
            row = await self._inner.arun_around_write(before, write, after)
        except errors.LostLease:
            self._record("settle_lost", op="complete_in", **claim)
            raise
        except BaseException as exc:
            self._record("settle_info", op="complete_in", error=type(exc).__name__, **claim)
            raise
        self._record("settle_ok", op="complete_in", status=row["status"], **claim)
        return row

    async def arun(self, op: Op[Any], *, write: bool) -> Any:
        return await self._observe(op, self._inner.arun(op, write=write))

    async def _observe(self, op: Op[Any], pending: Any) -> Any:
        name = getattr(op, "__name__", "")
        if name in GROUP_SETTLE_OPS:
            return await self._observe_group(op, pending)
        if name == GATHER_OP:
            return await self._observe_gather(op, pending)
        if name == CLAIMED_OP:
            return await self._observe_claimed(op, pending)
        if name in WAIT_OPS and _module_of(op) == WAITS_MODULE:
            return await self._observe_wait(op, name, pending)
        if name not in SETTLE_OPS and name != "claim":
            return await pending
        claim = _lease_of(op) if name in SETTLE_OPS else {}
        if name in SETTLE_OPS:
            self._record("settle_invoke", op=name, **claim)
        try:
            result = await pending
        except errors.LostLease:
            self._record("settle_lost", op=name, **claim)
            raise
        except BaseException as exc:
            if name in SETTLE_OPS:
                self._record("settle_info", op=name, error=type(exc).__name__, **claim)
            elif isinstance(exc, Exception):
                # One claim transaction that failed: the events that bound error loops.
                self._record("claim_error", worker=_worker_of(op), error=type(exc).__name__)
            raise
        if name == "claim":
            for row in result:
                worker, nonce = parse_holder(row["worker_id"])
                self._record(
                    "claim_ok", task=row["id"], attempt=row["attempt"], token=nonce, worker=worker
                )
        else:
            self._record("settle_ok", op=name, status=result["status"], **claim)
        return result

    async def _observe_claimed(self, op: Op[Any], pending: Any) -> Any:
        """The policies' claim hook: a release for each claimed row it did not keep."""
        frame = getattr(op, "gi_frame", None)
        local = frame.f_locals if frame is not None else {}
        rows = list(local.get("rows", []))
        worker = local.get("worker_id")
        kept = await pending
        left = {str(r["id"]) for r in kept}
        for row in rows:
            if str(row["id"]) in left:
                continue
            claim = _claim_of(Lease.of(row), worker)
            self._record("settle_invoke", op="release", **claim)
            self._record("settle_ok", op="release", status="queued", **claim)
        return kept

    async def _observe_gather(self, op: Op[Any], pending: Any) -> Any:
        """``ctx.gather``: a settlement when it parks the attempt (``settle_ok`` with the
        parked row's status); ``gather_ready`` when every child had ended and nothing was
        written."""
        claim = _lease_of(op)
        self._record("settle_invoke", op=GATHER_OP, **claim)
        try:
            gathered = await pending
        except errors.LostLease:
            self._record("settle_lost", op=GATHER_OP, **claim)
            raise
        except BaseException as exc:
            self._record("settle_info", op=GATHER_OP, error=type(exc).__name__, **claim)
            raise
        if gathered.parked is None:
            self._record("gather_ready", **claim)
        else:
            self._record("settle_ok", op=GATHER_OP, status=gathered.parked["status"], **claim)
        return gathered

    async def _observe_wait(self, op: Op[Any], name: str, pending: Any) -> Any:
        """A durable wait: a settlement when it parks the attempt (``settle_ok`` with the
        parked row's status); ``wait_passed`` when the run went on past it."""
        claim = _lease_of(op)
        self._record("settle_invoke", op=name, **claim)
        try:
            outcome = await pending
        except errors.LostLease:
            self._record("settle_lost", op=name, **claim)
            raise
        except BaseException as exc:
            self._record("settle_info", op=name, error=type(exc).__name__, **claim)
            raise
        if outcome.row is None:
            self._record("wait_passed", state=outcome.state, **claim)
        else:
            self._record("settle_ok", op=name, status=outcome.row["status"], **claim)
        return outcome

    async def _observe_group(self, op: Op[Any], pending: Any) -> Any:
        """A group settlement: one settle event per attempt in it."""
        frame = getattr(op, "gi_frame", None)
        local = frame.f_locals if frame is not None else {}
        leases = list(local.get("leases", []))
        worker = local.get("worker_id")
        for lease in leases:
            self._record("settle_invoke", op="complete", **_claim_of(lease, worker))
        try:
            rows = await pending
        except BaseException as exc:
            for lease in leases:
                self._record(
                    "settle_info",
                    op="complete",
                    error=type(exc).__name__,
                    **_claim_of(lease, worker),
                )
            raise
        for lease in leases:
            row = rows.get(lease.id)
            if row is None:
                self._record("settle_lost", op="complete", **_claim_of(lease, worker))
            else:
                self._record(
                    "settle_ok", op="complete", status=row["status"], **_claim_of(lease, worker)
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
