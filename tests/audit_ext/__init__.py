# audit_ext/__init__.py
"""An audit log: one row for every attempt a settlement ends, written in the
settlement's own transaction, in the extension's own table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import ClassVar

from cairnq.extensions import (
    NOW,
    AttemptEnd,
    Call,
    Extension,
    Hooks,
    Op,
    Recovered,
    Row,
    TaskRows,
    WorkerView,
)


class Audit(Extension):
    """The audit log's declaration: its SQL, its table, its hook and its surfaces."""

    name = "audit"
    package = __name__  # migrations/, sql/ and templates/ are beside this file
    migrations = ("x_audit_0001_log.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_audit_log": "trigger"}
    cli = f"{__name__}._cli"
    pages = f"{__name__}._pages"

    def hooks(self, worker: WorkerView) -> Hooks:
        return Hooks(attempt_end=record)


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
