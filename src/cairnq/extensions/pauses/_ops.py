"""Operations of pausing (extension table ``cairnq_pauses``, migration ``x0007_flow.sql``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A pause is a row of ``cairnq_pauses``: cairnq workers leave the queue or task
name it names unclaimed while it exists (``_filter``). ``x0007_flow.sql`` creates
the snoozes' table too; the snooze extension needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ... import kernel
from ..._checks import check_text
from ...errors import InvalidArgument, SchemaIncomplete
from ...protocol.steps import NOW, Call, Op, Row

FLOW_MIGRATION = "x0007_flow.sql"

Scope = Literal["queue", "name"]
SCOPES: tuple[Scope, ...] = ("queue", "name")


@dataclass(frozen=True)
class Pause:
    """A paused queue (``scope="queue"``) or task name (``scope="name"``).

    Attributes:
        scope: ``"queue"`` or ``"name"``.
        target: The queue or the task name.
        paused_at_ms: When it was paused (epoch ms).
        paused_by: Who paused it, as given (``None`` when not said).
    """

    scope: Scope
    target: str
    paused_at_ms: int
    paused_by: str | None

    @classmethod
    def from_row(cls, row: Row) -> Pause:
        scope = str(row["scope"])
        return cls(
            "queue" if scope == "queue" else "name",
            str(row["target"]),
            int(row["paused_at_ms"]),
            None if row["paused_by"] is None else str(row["paused_by"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "target": self.target,
            "paused_at_ms": self.paused_at_ms,
            "paused_by": self.paused_by,
        }


PauseList = list[Pause]
"""What ``paused`` returns (the clients' annotation: their ``list`` method shadows the builtin)."""


def _scope(scope: Any) -> Scope:
    if scope not in SCOPES:
        raise InvalidArgument(f"pause scope must be 'queue' or 'name', got {scope!r}")
    return "queue" if scope == "queue" else "name"


# --- readiness ---------------------------------------------------------------------------


def pauses_ready() -> Op[bool]:
    """Whether the database has the pauses' table (migration ``x0007_flow.sql``)."""
    applied = yield from kernel.applied_migrations()
    return FLOW_MIGRATION in applied


def _require() -> Op[None]:
    ready = yield from pauses_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's flow control (migration {FLOW_MIGRATION}); "
            "run `cairnq migrate` to add it",
            missing=(FLOW_MIGRATION,),
        )


# --- pause and resume --------------------------------------------------------------------


def pause(scope: Any, target: Any, paused_by: Any = None) -> Op[tuple[Pause, bool]]:
    """Pause a queue or task name; returns the pause and whether this call created it.

    Pausing what is paused already changes nothing (its first pause is returned).

    Raises:
        InvalidArgument: a bad scope, target or ``paused_by``.
        SchemaIncomplete: the database lacks ``x0007_flow.sql``.
    """
    checked = _scope(scope)
    what = "queue" if checked == "queue" else "task name"
    return _pause(
        checked,
        check_text(target, what) or "",
        check_text(paused_by, "paused_by", optional=True),
    )


def _pause(scope: Scope, target: str, paused_by: str | None) -> Op[tuple[Pause, bool]]:
    yield from _require()
    rows = yield Call(
        "pauses_put", {"scope": scope, "target": target, "now_ms": NOW, "paused_by": paused_by}
    )
    if rows:
        return Pause.from_row(rows[0]), True
    listed = yield from _list()
    existing = next(p for p in listed if p.scope == scope and p.target == target)
    return existing, False


def resume(scope: Any, target: Any) -> Op[Pause | None]:
    """Resume a queue or task name; returns the pause ended, ``None`` when it was not paused.

    Raises:
        InvalidArgument: a bad scope or target.
        SchemaIncomplete: the database lacks ``x0007_flow.sql``.
    """
    checked = _scope(scope)
    what = "queue" if checked == "queue" else "task name"
    return _resume(checked, check_text(target, what) or "")


def _resume(scope: Scope, target: str) -> Op[Pause | None]:
    yield from _require()
    rows = yield Call("pauses_delete", {"scope": scope, "target": target})
    return Pause.from_row(rows[0]) if rows else None


def paused() -> Op[list[Pause]]:
    """Every pause, queues first, each scope by target.

    Raises:
        SchemaIncomplete: the database lacks ``x0007_flow.sql``.
    """
    yield from _require()
    return (yield from _list())


def _list() -> Op[list[Pause]]:
    rows = yield Call("pauses_list", {})
    return [Pause.from_row(r) for r in rows]


def paused_if_ready() -> Op[list[Pause] | None]:
    """Every pause, or ``None`` on a database without the flow tables (workers, displays)."""
    ready = yield from pauses_ready()
    if not ready:
        return None
    return (yield from _list())
