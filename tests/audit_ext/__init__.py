# audit_ext/__init__.py
"""An audit log: one row for every attempt a settlement ends, written in the
settlement's own transaction, in the extension's own table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import ClassVar

from cairnq import InvalidArgument
from cairnq.extensions import (
    NOW,
    AttemptEnd,
    Call,
    ClientView,
    Extension,
    Hooks,
    Op,
    Option,
    Recovered,
    Row,
    SyncClientView,
    TaskRows,
    WorkerView,
)


class AuditLog:
    """``cq.extension(Audit)`` on a ``CairnQ``: the log, read through the client."""

    def __init__(self, client: ClientView) -> None:
        self.client = client

    async def recent(self, task_id: str | None = None, limit: int = 50) -> list[Row]:
        """The newest ``limit`` rows of the log (of ``task_id`` alone, if given)."""
        return await self.client.backend.arun(entries(task_id, limit), write=False)


class SyncAuditLog:
    """``cq.extension(Audit)`` on a ``SyncCairnQ``: the same, blocking."""

    def __init__(self, client: SyncClientView) -> None:
        self.client = client

    def recent(self, task_id: str | None = None, limit: int = 50) -> list[Row]:
        """The newest ``limit`` rows of the log (of ``task_id`` alone, if given)."""
        return self.client.backend.run(entries(task_id, limit), write=False)


def flag(value: object) -> bool:
    """The check of the ``audit`` option (``Audit(audit=...)``): ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"audit must be True or False, got {value!r}")
    return value


class Audit(Extension):
    """The audit log's declaration: its SQL, its table, its hook, its worker option,
    its client namespace and its surfaces."""

    name = "audit"
    package = __name__  # migrations/, sql/ and templates/ are beside this file
    migrations = ("x_audit_0001_log.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_audit_log": "trigger"}
    options: ClassVar[Mapping[str, Option]] = {"audit": Option(True, flag)}
    namespace = AuditLog
    sync_namespace = SyncAuditLog
    cli = f"{__name__}._cli"
    pages = f"{__name__}._pages"

    def hooks(self, worker: WorkerView) -> Hooks:
        on = bool(worker.options["audit"])  # Audit(audit=False) records nothing
        return Hooks(attempt_end=record, in_use=lambda: on)


def record(ended: Sequence[AttemptEnd], recovered: Recovered | None) -> Op[None]:
    """The ``attempt_end`` hook: one row per attempt a settlement (or a recovery of
    expired leases) ended, inside that transaction."""
    rows = [[e.lease.id, e.lease.attempt, e.outcome, e.worker_id] for e in ended]
    if recovered is not None:
        rows += [[str(r["id"]), None, "lost", None] for r in recovered.rows]
    if rows:
        yield Call("audit_record", {"rows": json.dumps(rows), "now_ms": NOW})


def entries(task_id: str | None = None, limit: int = 50) -> Op[list[Row]]:
    """The newest ``limit`` rows of the log (of ``task_id`` alone, if given)."""
    rows = yield Call("audit_list", {"task_id": task_id, "limit": limit})
    return list(rows)
