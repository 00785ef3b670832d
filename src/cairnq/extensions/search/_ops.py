"""The search extension's operations: a submit's terms recorded in its transaction, a
search, and a task's terms read back."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ... import kernel
from ..._readiness import Readiness
from ...errors import SchemaIncomplete
from ...kernel import NewTask
from ...models import Task
from ...protocol.steps import Call, Op
from ._model import TAG, Field, Query, terms_for

MIGRATION = "x0024_search.sql"


def search_ready() -> Op[bool]:
    """Whether the database has the search table (migration ``x0024_search.sql``)."""
    applied = yield from kernel.applied_migrations()
    return MIGRATION in applied


def _require() -> Op[None]:
    ready = yield from search_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's search table (migration {MIGRATION}); "
            "run `cairnq migrate` to add it",
            missing=(MIGRATION,),
        )


@dataclass(frozen=True)
class Terms:
    """What one submit records for the tasks it inserts: its ``tags`` and the client's
    declared ``fields``; called in the submit's transaction (``_submit_path.also``).
    ``readiness`` is the client's note of the search table: once seen, the ledger is
    not read again."""

    tags: tuple[str, ...]
    fields: tuple[Field, ...]
    readiness: Readiness = field(default_factory=Readiness, compare=False)

    def __call__(self, specs: Sequence[NewTask]) -> Callable[[Sequence[Task]], Op[None]] | None:
        """What to record once ``specs`` are stored: ``None`` when they hold no term."""
        rows = terms_for(specs, self.tags, self.fields)
        if not rows:
            return None

        def record(stored: Sequence[Task]) -> Op[None]:
            return _record(rows, {task.id for task in stored}, self.readiness)

        return record


def _record(rows: list[list[str]], inserted: set[str], readiness: Readiness) -> Op[None]:
    """Record ``rows`` of the tasks ``inserted`` (a task a submit reused under a key, or
    revised, keeps the terms it has)."""
    kept = [row for row in rows if row[0] in inserted]
    if not kept:
        return
    if not readiness.ready:
        yield from _require()
        readiness.note(True)
    yield Call("search_record", {"rows": json.dumps(kept, separators=(",", ":"))})


def error_index_ready() -> Op[bool]:
    """Whether the database has the index of error text (migration
    ``x0026_search_errors.sql``)."""
    rows = yield Call("search_error_index", {})
    return bool(rows[0]["ready"])


def find(query: Query) -> Op[list[Task]]:
    """The tasks matching ``query``, newest task id first. Error text is matched by the
    index of error text where the database has it (its words, ``Query.words``), else
    as a substring by a walk down the tasks.

    Raises:
        SchemaIncomplete: a tag or field searched on a database without the table.
    """
    params = query.params()
    words = None
    if query.words is not None:
        indexed = yield from error_index_ready()
        if indexed:
            words, params["error"] = query.words, None
    if not query.terms:
        if words is None:
            rows = yield Call("search_tasks", params)
        else:
            del params["error"]
            rows = yield Call("search_by_error", {**params, "words": words})
        return [Task.from_row(r) for r in rows]
    params["words"] = words
    yield from _require()
    (field, value), *more = query.terms
    params.update(field=field, value=value, more=json.dumps([list(t) for t in more]))
    rows = yield Call("search_by_term", params)
    return [Task.from_row(r) for r in rows]


@dataclass(frozen=True)
class TaskTerms:
    """A task's tags and declared search fields (``cq.search.of``).

    Attributes:
        tags: Its tags, sorted.
        fields: Each declared field's value (text) the task's submit found.
    """

    tags: tuple[str, ...]
    fields: dict[str, str]


def terms_of(task_id: str) -> Op[TaskTerms]:
    """A task's tags and fields; empty on a database without the table."""
    ready = yield from search_ready()
    if not ready:
        return TaskTerms((), {})
    rows = yield Call("search_terms_of", {"id": task_id})
    tags = tuple(str(r["value"]) for r in rows if r["field"] == TAG)
    fields = {str(r["field"]): str(r["value"]) for r in rows if r["field"] != TAG}
    return TaskTerms(tags, fields)
