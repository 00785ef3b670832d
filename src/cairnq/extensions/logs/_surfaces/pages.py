"""Attempt logs on the dashboard's task page: a Logs card under the task's cards, one
section per attempt that logged (``templates/logs_card.html``); each line's message
shown through the dashboard's ``redact`` hook (as ``"log"``), as the task's error is.

Its page set also serves the feature's route of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, Param, load_task
from ....dashboard._api_routes import INTEGER, STRING, array, obj
from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import LEVELS, AttemptLog, logs, logs_ready


def shown(found: Sequence[AttemptLog], task: Task, redact: Callable[..., Any]) -> list[AttemptLog]:
    """``found`` with each line's message as ``redact("log", message, task)`` shows it."""
    return [
        dataclasses.replace(
            entry,
            lines=[
                dataclasses.replace(line, message=redact("log", line.message, task))
                for line in entry.lines
            ],
        )
        for entry in found
    ]


class LogPages(PartsOnly):
    """The attempt logs' part of the task page."""

    def api_routes(self) -> Sequence[ApiRoute]:
        """A task's logs in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(logs(task.id), write=False)
        if not found:
            return TaskParts()
        entries = shown(found, task, self.host.dash.safe_redact)
        return TaskParts(below=render("logs_card.html", view, logs=entries))


def pages(host: Pages) -> LogPages:
    """The attempt logs' page set on the dashboard ``host``."""
    return LogPages(host)


# --- the HTTP API --------------------------------------------------------------------------

LINE = obj(
    {
        "at_ms": INTEGER,
        "level": {"type": "string", "enum": [*LEVELS, "cut"]},
        "message": {},
        "source": STRING,
    }
)
ATTEMPT_LOG = obj(
    {
        "claim": INTEGER,
        "attempt": INTEGER,
        "lines": array(LINE),
        "dropped": INTEGER,
        "recorded_at_ms": INTEGER,
    }
)


async def task_logs(request: ApiRequest) -> Any:
    task = await load_task(request)
    attempt = request.integer("attempt", 0, 1, 2**31 - 1)
    client = request.dash.client
    if not await client._run(logs_ready(), write=False):
        raise ApiError(503, "the attempt logs' migration is not applied to this database")
    found = await client._run(logs(task.id), write=False)
    kept = [entry for entry in found if attempt in (0, entry.attempt)]
    return {"logs": [entry.to_dict() for entry in shown(kept, task, request.redact)]}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/tasks/{task_id}/logs",
        task_logs,
        "listTaskLogs",
        "What the task's handler logged, per attempt, in the order the attempts ended "
        "(cq.attempts.logs), each message redacted",
        "tasks",
        params=(
            Param(
                "attempt",
                {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                "only this attempt's log",
            ),
        ),
        response=obj({"logs": array(ATTEMPT_LOG)}),
        statuses=(404,),
    ),
)
