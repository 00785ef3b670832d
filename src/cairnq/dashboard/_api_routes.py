"""The dashboard's own routes of the HTTP API (queues, tasks and their actions), with
the JSON schemas the OpenAPI document shows, and the schema helpers the routes of
the extensions' page sets (``ApiPart``) build theirs with.
"""

from __future__ import annotations

from typing import Any

from ..kernel import views as _reads
from ..models import STATUSES, TERMINAL_STATUSES
from ._api import (
    PURGE_MAX,
    ApiRoute,
    Param,
    activity,
    bulk_cancel,
    bulk_retry,
    cancel_task,
    csrf,
    get_task,
    list_tasks,
    purge,
    queue,
    queues,
    retry_task,
)

__all__ = [
    "ANY",
    "INTEGER",
    "ROWS_PARAM",
    "ROUTES",
    "STRING",
    "TASK",
    "array",
    "nullable",
    "obj",
]

# --- schemas ---------------------------------------------------------------------------------


def nullable(kind: str) -> dict[str, Any]:
    """The schema of a value of JSON type ``kind`` or ``null``."""
    return {"type": [kind, "null"]}


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object schema with ``properties``, all required unless ``required`` says."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


def array(items: dict[str, Any]) -> dict[str, Any]:
    """The schema of an array of ``items``."""
    return {"type": "array", "items": items}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
ANY: dict[str, Any] = {}
MAP_OF_INTEGERS = {"type": "object", "additionalProperties": INTEGER}

TASK = obj(
    {
        "id": STRING,
        "name": STRING,
        "queue": STRING,
        "status": {"type": "string", "enum": list(STATUSES)},
        "payload": ANY,
        "result": ANY,
        "metadata": ANY,
        "error": ANY,
        "progress": nullable("number"),
        "message": nullable("string"),
        "attempt": INTEGER,
        "max_attempts": INTEGER,
        "priority": INTEGER,
        "worker_id": nullable("string"),
        "lease_until_ms": nullable("integer"),
        "run_at_ms": INTEGER,
        "cancel_requested_at_ms": nullable("integer"),
        "parent_id": nullable("string"),
        "root_id": nullable("string"),
        "correlation_id": nullable("string"),
        "created_at_ms": INTEGER,
        "updated_at_ms": INTEGER,
        "completed_at_ms": nullable("integer"),
    },
    required=["id", "name", "queue", "status", "attempt", "run_at_ms", "created_at_ms"],
)
QUEUE = obj(
    {
        "queue": STRING,
        "counts": MAP_OF_INTEGERS,
        "due": INTEGER,
        "oldest_due_age_ms": nullable("integer"),
    }
)
TASK_ACTION = obj(
    {
        "outcome": {"type": "string", "enum": ["canceled", "cancel_requested", "retried"]},
        "task": TASK,
    }
)
ROWS_PARAM = Param(
    "limit", {"type": "integer", "minimum": 1, "maximum": _reads.MAX_PAGE}, "the most rows"
)


# --- the table -------------------------------------------------------------------------------

_FILTER_PARAMS = (
    Param("status", {"type": "string", "enum": list(STATUSES)}, "only tasks in this status"),
    Param("queue", STRING, "only tasks of this queue"),
    Param("name", STRING, "only tasks of this task name"),
    Param("key", STRING, "the task this idempotency key points at"),
    Param("root_id", STRING, "only the tasks of this task tree (its root task's id)"),
    Param("correlation_id", STRING, "only tasks with this correlation id"),
    Param("id_prefix", STRING, "only tasks whose id starts with this"),
    Param("cursor", STRING, "next_cursor of the previous page"),
    ROWS_PARAM,
)
_BULK = obj(
    {
        "done": array(STRING),
        "cancel_requested": array(STRING),
        "skipped": INTEGER,
        "more": {"type": "boolean"},
    }
)


def _bulk_body(statuses: tuple[str, ...], *, reset: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "status": {"type": "string", "enum": list(statuses)},
        "queue": STRING,
        "name": STRING,
        "root_id": STRING,
        "correlation_id": STRING,
        "id_prefix": STRING,
        "limit": {"type": "integer", "minimum": 1, "maximum": PURGE_MAX},
    }
    if reset:
        properties["reset_attempt"] = {"type": "boolean"}
    return obj(properties, required=[])


ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/csrf",
        csrf,
        "getCsrfToken",
        "A CSRF token for actions without a bearer token",
        "security",
        response=obj({"csrf": STRING, "header": STRING}),
    ),
    ApiRoute(
        "GET",
        "/queues",
        queues,
        "listQueues",
        "Every queue: counts per status, the due backlog and the oldest due task's age",
        "queues",
        response=obj({"queues": array(QUEUE)}),
    ),
    ApiRoute(
        "GET",
        "/queues/{queue}",
        queue,
        "getQueue",
        "One queue's counts, due backlog and oldest due age (zeros when it holds no task)",
        "queues",
        response=QUEUE,
    ),
    ApiRoute(
        "GET",
        "/activity",
        activity,
        "getActivity",
        "Tasks finished per queue and time bucket over a window ending now (the overview's chart)",
        "queues",
        params=(
            Param("window", {**STRING, "examples": ["1h"]}, "how far back (default 1h)"),
            Param("bucket", {**STRING, "examples": ["5m"]}, "a bucket's width (default 5m)"),
            Param("queue", STRING, "only this queue"),
        ),
        response=obj(
            {
                "queues": array(
                    obj(
                        {
                            "queue": STRING,
                            "start_ms": INTEGER,
                            "bucket_ms": INTEGER,
                            "succeeded": array(INTEGER),
                            "failed": array(INTEGER),
                            "canceled": array(INTEGER),
                        }
                    )
                )
            }
        ),
    ),
    ApiRoute(
        "GET",
        "/tasks",
        list_tasks,
        "listTasks",
        "A page of tasks, newest first, filtered (payload, result and metadata left out)",
        "tasks",
        params=_FILTER_PARAMS,
        response=obj({"tasks": array(TASK), "next_cursor": nullable("string")}),
    ),
    ApiRoute(
        "GET",
        "/tasks/{task_id}",
        get_task,
        "getTask",
        "One task, redacted",
        "tasks",
        response=TASK,
        statuses=(404,),
    ),
    ApiRoute(
        "POST",
        "/tasks/{task_id}/cancel",
        cancel_task,
        "cancelTask",
        "Cancel a task: a queued one at once, a running one at its next check",
        "tasks",
        response=TASK_ACTION,
        statuses=(404, 409),
    ),
    ApiRoute(
        "POST",
        "/tasks/{task_id}/retry",
        retry_task,
        "retryTask",
        "Queue a failed or canceled task again; with from_step, replay it from that "
        "recorded durable step",
        "tasks",
        body=obj(
            {"reset_attempt": {"type": "boolean"}, "from_step": {"type": "string"}},
            required=[],
        ),
        response=TASK_ACTION,
        statuses=(404, 409),
    ),
    ApiRoute(
        "POST",
        "/purge",
        purge,
        "purgeTasks",
        f"Purge up to {PURGE_MAX} tasks that finished over older_than ago",
        "tasks",
        body=obj(
            {
                "older_than": {"type": "string", "minLength": 1, "examples": ["7d"]},
                "status": {
                    "type": "string",
                    "enum": [s for s in STATUSES if s in TERMINAL_STATUSES],
                },
                "queue": STRING,
                "name": STRING,
                "limit": {"type": "integer", "minimum": 1, "maximum": PURGE_MAX},
            },
            required=["older_than"],
        ),
        response=obj({"purged": INTEGER, "ids": array(STRING), "more": {"type": "boolean"}}),
    ),
    ApiRoute(
        "POST",
        "/tasks/retry",
        bulk_retry,
        "retryTasks",
        f"Retry up to {PURGE_MAX} failed or canceled tasks of the filtered list",
        "tasks",
        body=_bulk_body(("failed", "canceled"), reset=True),
        response=_BULK,
    ),
    ApiRoute(
        "POST",
        "/tasks/cancel",
        bulk_cancel,
        "cancelTasks",
        f"Cancel up to {PURGE_MAX} queued or running tasks of the filtered list",
        "tasks",
        body=_bulk_body(("queued", "running"), reset=False),
        response=_BULK,
    ),
)
