"""The routes of the HTTP API: the dashboard's own (queues, tasks and their actions)
and those of cairnq's extensions (attempts, steps, pauses, schedules, limits,
batches), each with the JSON schemas the OpenAPI document shows.

The extensions' routes call only their client namespaces (``cq.schedules``,
``cq.limits``, ``cq.pauses``, ``cq.batches``) and their reads for displays, the
ones their dashboard pages use; an extension outside cairnq adds routes through
its page set (``ApiPart``).
"""

from __future__ import annotations

from typing import Any

from ..extensions.history._ops import attempts_if_ready
from ..extensions.limits import _ops as _limits
from ..extensions.pauses import _ops as _pauses
from ..extensions.steps._ops import steps_if_ready
from ..kernel import views as _reads
from ..models import STATUSES, TERMINAL_STATUSES
from ._api import (
    PURGE_MAX,
    ApiError,
    ApiRequest,
    ApiRoute,
    Param,
    bulk_cancel,
    bulk_retry,
    cancel_task,
    csrf,
    get_task,
    list_tasks,
    load_task,
    purge,
    queue,
    queues,
    retry_task,
    to_json,
)

__all__ = ["ROUTES", "obj", "nullable"]

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
PAUSE = obj(
    {
        "scope": {"type": "string", "enum": ["queue", "name"]},
        "target": STRING,
        "paused_at_ms": INTEGER,
        "paused_by": nullable("string"),
    }
)
SCHEDULE = obj(
    {
        "name": STRING,
        "task": STRING,
        "cron": nullable("string"),
        "every_ms": nullable("integer"),
        "tz": STRING,
        "queue": STRING,
        "paused": {"type": "boolean"},
        "next_ms": nullable("integer"),
        "last_task_id": nullable("string"),
        "last_status": nullable("string"),
    },
    required=["name", "task", "queue", "paused"],
)
BATCH = obj(
    {
        "id": STRING,
        "state": STRING,
        "total": INTEGER,
        "succeeded": INTEGER,
        "failed": INTEGER,
        "canceled": INTEGER,
        "purged": INTEGER,
        "pending": INTEGER,
        "callbacks": {"type": "object", "additionalProperties": STRING},
        "submitted": array(STRING),
        "created_at_ms": INTEGER,
        "closed_at_ms": nullable("integer"),
        "done_at_ms": nullable("integer"),
    }
)
TASK_ID = "the task's id (task_...)"
LIMIT_PARAM = Param(
    "limit", {"type": "integer", "minimum": 1, "maximum": _reads.MAX_PAGE}, "the most rows"
)


# --- the extensions' handlers ----------------------------------------------------------------


async def attempts(request: ApiRequest) -> Any:
    task = await load_task(request)
    found = await request.dash.client._run(attempts_if_ready(task.id), write=False)
    if found is None:
        raise ApiError(503, "the attempt history's migration is not applied to this database")
    shown = []
    for attempt in found:
        row = to_json(attempt)
        row["error"] = (
            None if attempt.error is None else request.redact("error", attempt.error, task)
        )
        shown.append(row)
    return {"attempts": shown}


async def steps(request: ApiRequest) -> Any:
    task = await load_task(request)
    found = await request.dash.client._run(steps_if_ready(task.id), write=False)
    if found is None:
        raise ApiError(503, "the steps' migration is not applied to this database")
    shown = []
    for step in found:
        row = to_json(step)
        row["result"] = request.redact("result", step.result, task)
        shown.append(row)
    return {"steps": shown}


async def pauses(request: ApiRequest) -> Any:
    found = await request.dash.client._run(_pauses.paused_if_ready(), write=False)
    if found is None:
        raise ApiError(503, "the pauses' migration is not applied to this database")
    return {"pauses": to_json(list(found))}


async def pause_queue(request: ApiRequest) -> Any:
    found = await request.dash.client.pauses.pause_queue(request.path["queue"], by="api")
    return to_json(found)


async def resume_queue(request: ApiRequest) -> Any:
    found = await request.dash.client.pauses.resume_queue(request.path["queue"])
    return {"resumed": found is not None}


async def pause_name(request: ApiRequest) -> Any:
    found = await request.dash.client.pauses.pause_task(request.path["name"], by="api")
    return to_json(found)


async def resume_name(request: ApiRequest) -> Any:
    found = await request.dash.client.pauses.resume_task(request.path["name"])
    return {"resumed": found is not None}


def _schedule(found: Any) -> dict[str, Any]:
    # A schedule's payload and metadata are its tasks' to come: the task reads show
    # them, redacted; the dashboard's schedule pages do not.
    shown: dict[str, Any] = to_json(found)
    shown.pop("payload", None)
    shown.pop("metadata", None)
    return shown


async def schedules(request: ApiRequest) -> Any:
    found = await request.dash.client.schedules.list()
    return {"schedules": [_schedule(s) for s in found]}


async def get_schedule(request: ApiRequest) -> Any:
    found = await request.dash.client.schedules.get(request.path["name"])
    if found is None:
        raise ApiError(404, "no schedule has this name")
    history = await request.dash.client.schedules.history(
        found.name, limit=request.integer("limit", 50, 1, _reads.MAX_PAGE)
    )
    return {"schedule": _schedule(found), "history": to_json(list(history))}


async def _schedule_switch(request: ApiRequest, paused: bool) -> Any:
    namespace = request.dash.client.schedules
    name = request.path["name"]
    found = await (namespace.pause(name) if paused else namespace.resume(name))
    if found is None:
        raise ApiError(404, "no schedule has this name")
    return _schedule(found)


async def pause_schedule(request: ApiRequest) -> Any:
    return await _schedule_switch(request, True)


async def resume_schedule(request: ApiRequest) -> Any:
    return await _schedule_switch(request, False)


async def limits(request: ApiRequest) -> Any:
    found = await request.dash.client._run(_limits.usage(), write=False)
    return {"limits": to_json(list(found))}


async def batch(request: ApiRequest) -> Any:
    found = await request.dash.client.batches.status(request.path["batch_id"])
    if found is None:
        raise ApiError(404, "no batch has this id")
    members = await request.dash.client.batches.members(
        found.id, limit=request.integer("limit", 100, 1, _reads.MAX_PAGE)
    )
    return {"batch": to_json(found), "members": to_json(list(members))}


# --- the table -------------------------------------------------------------------------------

_FILTER_PARAMS = (
    Param("status", {"type": "string", "enum": list(STATUSES)}, "only tasks in this status"),
    Param("queue", STRING, "only tasks of this queue"),
    Param("name", STRING, "only tasks of this task name"),
    Param("key", STRING, "the task this idempotency key points at"),
    Param("root_id", STRING, "only the tasks of this workflow or task tree"),
    Param("correlation_id", STRING, "only tasks with this correlation id"),
    Param("id_prefix", STRING, "only tasks whose id starts with this"),
    Param("cursor", STRING, "next_cursor of the previous page"),
    LIMIT_PARAM,
)
_BY_NAME = obj({"resumed": {"type": "boolean"}})
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


_HISTORY = array(
    obj(
        {
            "schedule": STRING,
            "slot_ms": INTEGER,
            "outcome": STRING,
            "task_id": nullable("string"),
        },
        required=["schedule", "slot_ms", "outcome"],
    )
)

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
        "GET",
        "/tasks/{task_id}/attempts",
        attempts,
        "listAttempts",
        "The task's recorded attempts",
        "tasks",
        response=obj({"attempts": array({"type": "object"})}),
        statuses=(404,),
    ),
    ApiRoute(
        "GET",
        "/tasks/{task_id}/steps",
        steps,
        "listSteps",
        "The task's recorded durable steps",
        "tasks",
        response=obj({"steps": array({"type": "object"})}),
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
        "Queue a failed or canceled task again",
        "tasks",
        body=obj({"reset_attempt": {"type": "boolean"}}, required=[]),
        response=TASK_ACTION,
        statuses=(404, 409),
    ),
    ApiRoute(
        "POST",
        "/purge",
        purge,
        "purgeTasks",
        f"Delete up to {PURGE_MAX} finished tasks that finished over older_than ago",
        "tasks",
        body=obj(
            {
                "older_than": {"type": "string", "minLength": 1, "examples": ["7d"]},
                "status": {"type": "string", "enum": list(TERMINAL_STATUSES)},
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
    ApiRoute(
        "GET",
        "/pauses",
        pauses,
        "listPauses",
        "The paused queues and task names",
        "pauses",
        response=obj({"pauses": array(PAUSE)}),
    ),
    ApiRoute(
        "POST",
        "/queues/{queue}/pause",
        pause_queue,
        "pauseQueue",
        "Pause a queue: workers claim none of its tasks until resumed",
        "pauses",
        response=PAUSE,
    ),
    ApiRoute(
        "POST",
        "/queues/{queue}/resume",
        resume_queue,
        "resumeQueue",
        "Resume a queue",
        "pauses",
        response=_BY_NAME,
    ),
    ApiRoute(
        "POST",
        "/task-names/{name}/pause",
        pause_name,
        "pauseTaskName",
        "Pause a task name on every queue",
        "pauses",
        response=PAUSE,
    ),
    ApiRoute(
        "POST",
        "/task-names/{name}/resume",
        resume_name,
        "resumeTaskName",
        "Resume a task name",
        "pauses",
        response=_BY_NAME,
    ),
    ApiRoute(
        "GET",
        "/schedules",
        schedules,
        "listSchedules",
        "Every schedule",
        "schedules",
        response=obj({"schedules": array(SCHEDULE)}),
    ),
    ApiRoute(
        "GET",
        "/schedules/{name}",
        get_schedule,
        "getSchedule",
        "A schedule and its latest slots",
        "schedules",
        params=(LIMIT_PARAM,),
        response=obj({"schedule": SCHEDULE, "history": _HISTORY}),
        statuses=(404,),
    ),
    ApiRoute(
        "POST",
        "/schedules/{name}/pause",
        pause_schedule,
        "pauseSchedule",
        "Pause a schedule: no slot submits a task until resumed",
        "schedules",
        response=SCHEDULE,
        statuses=(404,),
    ),
    ApiRoute(
        "POST",
        "/schedules/{name}/resume",
        resume_schedule,
        "resumeSchedule",
        "Resume a schedule",
        "schedules",
        response=SCHEDULE,
        statuses=(404,),
    ),
    ApiRoute(
        "GET",
        "/limits",
        limits,
        "listLimits",
        "Every concurrency and rate limit with its use now",
        "limits",
        response=obj({"limits": array({"type": "object"})}),
    ),
    ApiRoute(
        "GET",
        "/batches/{batch_id}",
        batch,
        "getBatch",
        "A batch's state, counts and callbacks, and its first members",
        "batches",
        params=(LIMIT_PARAM,),
        response=obj({"batch": BATCH, "members": array({"type": "object"})}),
        statuses=(404,),
    ),
)
