"""Operations of pausing (extension tables ``cairnq_pauses``, migration ``x0007_flow.sql``,
and ``cairnq_pause_ends``, ``x0021_pauses_until.sql``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A pause is a row of ``cairnq_pauses``: cairnq workers leave the queue or task
name it names unclaimed while it exists (``_filter``) and, for a timed pause, until
its end (a row of ``cairnq_pause_ends``) has passed: from then on every read
leaves it out, and the next pause or resume deletes it. ``x0007_flow.sql`` creates
the snoozes' table too; the snooze extension needs it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Literal

from ... import kernel
from ..._checks import MAX_DELAY_MS, check_text
from ...durations import duration_ms, point_ms
from ...errors import InvalidArgument, SchemaIncomplete
from ...protocol.steps import NOW, Call, Op, Row

FLOW_MIGRATION = "x0007_flow.sql"
UNTIL_MIGRATION = "x0021_pauses_until.sql"

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
        resume_at_ms: When it ends by itself (epoch ms), ``None`` for a pause that
            lasts until it is resumed.
    """

    scope: Scope
    target: str
    paused_at_ms: int
    paused_by: str | None
    resume_at_ms: int | None = None

    @classmethod
    def from_row(cls, row: Row) -> Pause:
        scope = str(row["scope"])
        return cls(
            "queue" if scope == "queue" else "name",
            str(row["target"]),
            int(row["paused_at_ms"]),
            None if row["paused_by"] is None else str(row["paused_by"]),
            None if row["resume_at_ms"] is None else int(row["resume_at_ms"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "target": self.target,
            "paused_at_ms": self.paused_at_ms,
            "paused_by": self.paused_by,
            "resume_at_ms": self.resume_at_ms,
        }


PauseList = list[Pause]
"""What ``paused`` returns (the clients' annotation: their ``list`` method shadows the builtin)."""


def _scope(scope: Any) -> Scope:
    if scope not in SCOPES:
        raise InvalidArgument(f"pause scope must be 'queue' or 'name', got {scope!r}")
    return "queue" if scope == "queue" else "name"


# --- readiness ---------------------------------------------------------------------------


def pauses_ready() -> Op[bool]:
    """Whether the database has the pauses' tables (migrations ``x0007_flow.sql`` and
    ``x0021_pauses_until.sql``)."""
    applied = yield from kernel.applied_migrations()
    return FLOW_MIGRATION in applied and UNTIL_MIGRATION in applied


def _require() -> Op[None]:
    applied = yield from kernel.applied_migrations()
    missing = tuple(m for m in (FLOW_MIGRATION, UNTIL_MIGRATION) if m not in applied)
    if missing:
        raise SchemaIncomplete(
            f"this database lacks cairnq's flow control (migration {', '.join(missing)}); "
            "run `cairnq migrate` to add it",
            missing=missing,
        )


# --- when a pause ends -------------------------------------------------------------------


def pause_end(until: Any) -> tuple[int | None, int | None]:
    """``until`` as ``(at_ms, for_ms)``: an aware ``datetime`` is the instant the pause
    ends; a duration (``timedelta``, ``"10m"``, a number of seconds) is a length from
    now, by the database's clock; ``None`` is neither (the pause lasts until resumed).

    Raises:
        InvalidArgument: another type, a naive ``datetime``, a duration shorter than
            1 s or longer than the longest delay, or a ``bool``.
    """
    if until is None:
        return None, None
    if isinstance(until, datetime.datetime):
        return point_ms(until, "until"), None
    if isinstance(until, datetime.date):
        raise InvalidArgument(
            f"until must be an aware datetime or a duration (timedelta, '10m', seconds); "
            f"got the date {until!r}"
        )
    return None, duration_ms(until, "until", low_ms=1_000, high_ms=MAX_DELAY_MS)


# --- pause and resume --------------------------------------------------------------------


def pause(
    scope: Any, target: Any, paused_by: Any = None, until: Any = None
) -> Op[tuple[Pause, bool]]:
    """Pause a queue or task name; returns the pause and whether this call created it.

    Pausing what is paused already keeps its first pause (when and by whom); the
    latest call says when it ends (``until``, ``None`` for until resumed). A timed
    pause whose end has passed is gone: pausing again starts a new pause.

    Raises:
        InvalidArgument: a bad scope, target, ``paused_by`` or ``until`` (see ``pause_end``).
        SchemaIncomplete: the database lacks ``x0007_flow.sql`` or ``x0021_pauses_until.sql``.
    """
    checked = _scope(scope)
    what = "queue" if checked == "queue" else "task name"
    return _pause(
        checked,
        check_text(target, what) or "",
        check_text(paused_by, "paused_by", optional=True),
        pause_end(until),
    )


def _pause(
    scope: Scope, target: str, paused_by: str | None, end: tuple[int | None, int | None]
) -> Op[tuple[Pause, bool]]:
    yield from _require()
    yield Call("pauses_expire", {"now_ms": NOW})
    rows = yield Call(
        "pauses_put", {"scope": scope, "target": target, "now_ms": NOW, "paused_by": paused_by}
    )
    at_ms, for_ms = end
    key = {"scope": scope, "target": target}
    if at_ms is None and for_ms is None:
        yield Call("pauses_end_clear", key)
    else:
        yield Call("pauses_end_put", {**key, "at_ms": at_ms, "for_ms": for_ms, "now_ms": NOW})
    listed = yield from _list(include_ended=True)
    found = next(p for p in listed if p.scope == scope and p.target == target)
    return found, bool(rows)


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
    yield Call("pauses_expire", {"now_ms": NOW})
    listed = yield from _list()
    found = next((p for p in listed if p.scope == scope and p.target == target), None)
    if found is None:
        return None
    yield Call("pauses_delete", {"scope": scope, "target": target})
    return found


def paused() -> Op[list[Pause]]:
    """Every pause, queues first, each scope by target.

    Raises:
        SchemaIncomplete: the database lacks ``x0007_flow.sql``.
    """
    yield from _require()
    return (yield from _list())


def _list(*, include_ended: bool = False) -> Op[list[Pause]]:
    """The pauses in force now (every row, ended or not, with ``include_ended``: a
    pause just made with an end already passed is still returned to its caller).

    ``include_ended`` reads as of epoch ms -1, before any end a pause can have."""
    rows = yield Call("pauses_list", {"now_ms": -1 if include_ended else NOW})
    return [Pause.from_row(r) for r in rows]


def paused_with_tables() -> Op[list[Pause]]:
    """Every pause in force, on a database known to have the flow tables (no ledger read)."""
    return (yield from _list())


def paused_if_ready() -> Op[list[Pause] | None]:
    """Every pause, or ``None`` on a database without the flow tables (workers, displays)."""
    ready = yield from pauses_ready()
    if not ready:
        return None
    return (yield from _list())
