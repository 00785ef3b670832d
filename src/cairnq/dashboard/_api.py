"""The dashboard's HTTP API: JSON under ``/api``, described by ``/api/openapi.json``.

The API answers for the same application as the pages, behind the same guard
(``_http.Guard``): the token (``Authorization: Bearer``, or the session cookie), the
host check, the limits on query strings and bodies. Its refusals are JSON too
(``{"error": {"status": ..., "message": ...}}``).

Actions (``POST``) follow the pages' rules: refused with 403 on a read-only
dashboard, and when the browser says the request is cross-site. A request that
authenticates with ``Authorization: Bearer`` carries no ambient credential, so it
needs nothing more; any other (the session cookie, or a dashboard without a token)
must send the ``X-CSRF-Token`` header with a token from ``GET /api/csrf`` (a header
a cross-site form cannot send, and a cross-site script cannot set without a CORS
preflight this API never grants).

Each route is an ``ApiRoute``: the dashboard's own (``_api_routes``), then those of
the page sets of extensions that serve some (``ApiPart``), cairnq's own (each in its
``_surfaces/pages.py``) and any other's. The OpenAPI document is built from them
(``_openapi``).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from ..durations import parse_duration
from ..errors import DatabaseError, InvalidArgument, SchemaIncomplete
from ..kernel import views as _reads
from ..models import STATUSES, TERMINAL_STATUSES, QueueSummary, Task
from ._host import PageHost
from ._http import API_PREFIX, incoming

__all__ = [
    "API_PREFIX",
    "Api",
    "ApiError",
    "ApiPart",
    "ApiRequest",
    "ApiRoute",
    "Param",
    "api_error",
    "to_json",
]

log = logging.getLogger("cairnq.dashboard")

CSRF_HEADER = "x-csrf-token"
# The most tasks one purge call of the API deletes.
PURGE_MAX = 1000
TASK_FILTERS = ("status", "queue", "name", "key", "root_id", "correlation_id", "id_prefix")


class ApiError(Exception):
    """An answer other than 200, as JSON: ``{"error": {"status": ..., "message": ...}}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def api_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """The JSON answer of a refusal; ``message`` never carries an internal detail."""
    body = {"error": {"status": status, "message": message}}
    return JSONResponse(body, status, headers=dict(headers or {}))


@dataclass(frozen=True)
class Param:
    """A query parameter of a route, for the OpenAPI document (and checked as declared).

    Attributes:
        name: Its name in the query string.
        schema: Its JSON schema: ``{"type": "string"}`` or ``{"type": "integer", ...}``.
        description: What it does.
        required: Whether a request without it is refused.
    """

    name: str
    schema: Mapping[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class ApiRoute:
    """One operation of the API.

    Attributes:
        method: ``"GET"`` (a read) or ``"POST"`` (an action: read-only, origin and
            CSRF checked before its handler runs).
        path: Below ``/api``, with ``{name}`` path parameters (``/batches/{batch_id}``).
        handler: ``await handler(request)`` returns what is answered as JSON (200), or
            raises ``ApiError`` (or ``InvalidArgument``: 400).
        operation_id: The operation's name in the OpenAPI document.
        summary: Its one-line description there.
        tag: The group it is listed under.
        params: Its query parameters; any other is refused (400).
        body: The JSON schema of its request body (a JSON object), or ``None``
            for no body.
        response: The JSON schema of its 200 answer.
        statuses: The error statuses it answers besides the guard's (404, 409...).
    """

    method: Literal["GET", "POST"]
    path: str
    handler: Callable[[ApiRequest], Awaitable[Any]]
    operation_id: str
    summary: str
    tag: str
    params: Sequence[Param] = ()
    body: Mapping[str, Any] | None = None
    response: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    statuses: Sequence[int] = ()


@runtime_checkable
class ApiPart(Protocol):
    """A page set (``Extension.pages``) that also serves routes of the HTTP API."""

    def api_routes(self) -> Sequence[ApiRoute]:
        """Its operations, each below ``/api``."""


@dataclass
class ApiRequest:
    """What a route's handler reads: the request's path parameters, its query (as
    declared by the route's ``params``), its JSON body and the dashboard."""

    request: Request
    dash: PageHost
    path: dict[str, str]
    query: dict[str, str]
    body: dict[str, Any]

    def text(self, name: str) -> str | None:
        """A query parameter, stripped; ``None`` when absent or empty."""
        value = self.query.get(name, "").strip()
        return value or None

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number query parameter between ``low`` and ``high``.

        Raises:
            ApiError: 400 for anything else.
        """
        value = self.query.get(name)
        if value is None:
            return default
        if not value.isascii() or not value.isdigit() or not low <= int(value) <= high:
            raise ApiError(400, f"{name} must be a whole number from {low} to {high}")
        return int(value)

    def redact(self, field_name: str, value: Any, task: Task) -> Any:
        """``value`` as the dashboard's ``redact`` hook lets it be shown."""
        return self.dash.safe_redact(field_name, value, task)


def to_json(value: Any) -> Any:
    """A read model (dataclasses, tuples, mappings) as JSON values, leaving out callables."""
    if is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name))
            for f in fields(value)
            if f.repr and not callable(getattr(value, f.name))
        }
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def task_json(task: Task, request: ApiRequest, *, light: bool = False) -> dict[str, Any]:
    """A task as the API shows it: its payload, result, metadata and error redacted
    (the dashboard's ``redact`` hook); ``light`` leaves out payload, result and metadata."""
    shown: dict[str, Any] = {
        f.name: getattr(task, f.name)
        for f in fields(task)
        if f.name not in ("payload", "result", "metadata", "error")
    }
    shown["error"] = None if task.error is None else request.redact("error", task.error, task)
    if not light:
        for name in ("payload", "result", "metadata"):
            shown[name] = request.redact(name, getattr(task, name), task)
    return shown


async def load_task(request: ApiRequest) -> Task:
    """The task of the path's ``task_id``.

    Raises:
        ApiError: 404 when no task has that id.
    """
    task_id = request.path["task_id"]
    task = await request.dash.client.get(task_id)
    if task is None:
        raise ApiError(404, "no task has this id")
    return task


def _body_text(request: ApiRequest, name: str) -> str | None:
    value = request.body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string")
    return value.strip() or None


# --- the dashboard's own routes --------------------------------------------------------------


async def csrf(request: ApiRequest) -> Any:
    return {"csrf": request.dash.csrf_token(), "header": "X-CSRF-Token"}


def _queue_json(summary: QueueSummary) -> dict[str, Any]:
    return {
        "queue": summary.queue,
        "counts": summary.counts,
        "due": summary.due,
        "oldest_due_age_ms": summary.oldest_queued_age_ms,
    }


async def _overview(request: ApiRequest) -> list[QueueSummary]:
    """The queues' summaries, shared with equal reads within the refresh interval."""
    found: list[QueueSummary] = await request.dash.reads.get(
        "api-queues", request.dash.client.overview
    )
    return found


async def queues(request: ApiRequest) -> Any:
    summaries = await _overview(request)
    return {"queues": [_queue_json(s) for s in summaries]}


async def queue(request: ApiRequest) -> Any:
    # A queue holding no task answers zeros, not 404: an autoscaler polling it reads 0.
    name = request.path["queue"]
    summaries = await _overview(request)
    found = next((s for s in summaries if s.queue == name), None)
    return _queue_json(found or QueueSummary(name, dict.fromkeys(STATUSES, 0), None))


async def list_tasks(request: ApiRequest) -> Any:
    status = request.text("status")
    if status is not None and status not in STATUSES:
        raise ApiError(400, f"status must be one of {', '.join(STATUSES)}")
    page = await request.dash.client.list_page(
        **{name: request.text(name) for name in TASK_FILTERS},
        cursor=request.text("cursor"),
        limit=request.integer("limit", request.dash.page_size, 1, _reads.MAX_PAGE),
    )
    return {
        "tasks": [task_json(t, request, light=True) for t in page.tasks],
        "next_cursor": page.next_cursor,
    }


async def get_task(request: ApiRequest) -> Any:
    return task_json(await load_task(request), request)


async def cancel_task(request: ApiRequest) -> Any:
    await load_task(request)
    task = await request.dash.client.cancel(request.path["task_id"])
    if task is None:
        raise ApiError(409, "nothing to cancel: the task had already finished")
    outcome = "canceled" if task.is_canceled else "cancel_requested"
    log.info("dashboard api: cancel %s -> %s", task.id, outcome)
    return {"outcome": outcome, "task": task_json(task, request)}


async def retry_task(request: ApiRequest) -> Any:
    reset = request.body.get("reset_attempt", False)
    if not isinstance(reset, bool):
        raise ApiError(400, "reset_attempt must be true or false")
    from_step = request.body.get("from_step")
    if from_step is not None and not isinstance(from_step, str):
        raise ApiError(400, "from_step must be the name of a step the task recorded")
    found = await load_task(request)
    if from_step is not None and found.status not in ("failed", "canceled"):
        raise ApiError(409, "only a failed or canceled task can be retried")
    task = await request.dash.client.retry(found.id, reset_attempt=reset, from_step=from_step)
    if task is None:
        raise ApiError(409, "only a failed or canceled task can be retried")
    log.info("dashboard api: retry %s%s", task.id, "" if from_step is None else " from a step")
    return {"outcome": "retried", "task": task_json(task, request)}


async def activity(request: ApiRequest) -> Any:
    found = await request.dash.client.activity(
        window=request.text("window") or "1h",
        bucket=request.text("bucket") or "5m",
        queue=request.text("queue"),
    )
    return {"queues": [to_json(a) for a in found]}


async def purge(request: ApiRequest) -> Any:
    older = _body_text(request, "older_than")
    if older is None:
        raise ApiError(400, "older_than is required: how long ago the tasks finished, e.g. 7d")
    status = _body_text(request, "status")
    if status is not None and status not in TERMINAL_STATUSES:
        raise ApiError(400, "status must be succeeded, failed or canceled")
    limit = request.body.get("limit", PURGE_MAX)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PURGE_MAX:
        raise ApiError(400, f"limit must be a whole number from 1 to {PURGE_MAX}")
    ids = await request.dash.client.purge(
        older_than_ms=parse_duration(older),
        status=status,
        queue=_body_text(request, "queue"),
        name=_body_text(request, "name"),
        limit=limit,
    )
    log.info("dashboard api: purged %d tasks", len(ids))
    return {"purged": len(ids), "ids": list(ids), "more": len(ids) == limit}


# Bulk actions: the statuses each applies to.
BULK_STATUSES = {"retry": ("failed", "canceled"), "cancel": ("queued", "running")}


async def _bulk(request: ApiRequest, action: str) -> Any:
    """Retry or cancel, one task at a time, up to ``limit`` tasks of the filtered list
    the action applies to, newest first within each status."""
    filters = {name: _body_text(request, name) for name in TASK_FILTERS if name != "key"}
    wanted = filters.pop("status")
    if wanted is not None and wanted not in BULK_STATUSES[action]:
        raise ApiError(400, f"status must be {' or '.join(BULK_STATUSES[action])} to {action}")
    limit = request.body.get("limit", PURGE_MAX)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PURGE_MAX:
        raise ApiError(400, f"limit must be a whole number from 1 to {PURGE_MAX}")
    reset = request.body.get("reset_attempt", False)
    if not isinstance(reset, bool) or (reset and action == "cancel"):
        raise ApiError(400, "reset_attempt must be true or false, and only to retry")
    client = request.dash.client
    found: list[Task] = []
    for status in (s for s in BULK_STATUSES[action] if wanted in (None, s)):
        cursor: str | None = None
        while len(found) <= limit:
            page = await client.list_page(
                status=status, **filters, cursor=cursor, limit=min(_reads.MAX_PAGE, limit + 1)
            )
            found += page.tasks
            cursor = page.next_cursor
            if cursor is None:
                break
    chosen = found[:limit]
    done: list[str] = []
    requested: list[str] = []
    skipped = 0
    for task in chosen:
        if action == "retry":
            after = await client.retry(task.id, reset_attempt=reset)
        else:
            after = await client.cancel(task.id)
        # None: the task left the status the action applies to since it was listed.
        if after is None:
            skipped += 1
        elif after.is_running:
            requested.append(after.id)
        else:
            done.append(after.id)
    log.info("dashboard api: bulk %s: %d done, %d skipped", action, len(done), skipped)
    return {
        "done": done,
        "cancel_requested": requested,
        "skipped": skipped,
        "more": len(found) > limit,
    }


async def bulk_retry(request: ApiRequest) -> Any:
    return await _bulk(request, "retry")


async def bulk_cancel(request: ApiRequest) -> Any:
    return await _bulk(request, "cancel")


# --- the router ------------------------------------------------------------------------------


class Api:
    """The ``/api`` application: each route's checks, then its handler, answered as JSON."""

    def __init__(self, dash: PageHost, routes: Sequence[ApiRoute]) -> None:
        self.dash = dash
        self.routes = list(routes)
        by_path: dict[str, dict[str, ApiRoute]] = {}
        for route in self.routes:
            by_path.setdefault(route.path, {})[route.method] = route
        # Literal paths first: ``/tasks/retry`` is not the task ``retry``.
        ordered = sorted(by_path.items(), key=lambda item: "{" in item[0])
        table = [
            Route(path, self._endpoint(methods), methods=["GET", "HEAD", "POST"])
            for path, methods in ordered
        ]
        self.router = Router(table, redirect_slashes=False, default=self._not_found)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.router(scope, receive, send)

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        await api_error(404, "no such API path")(scope, receive, send)

    def _endpoint(
        self, methods: Mapping[str, ApiRoute]
    ) -> Callable[[Request], Awaitable[Response]]:
        allow = ", ".join(sorted(methods))

        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            route = methods.get(method)
            if route is None:
                return api_error(405, f"this path takes {allow}", {"allow": allow})
            try:
                return await self._run(route, request)
            except ApiError as exc:
                return api_error(exc.status, exc.message)
            except SchemaIncomplete as exc:
                log.warning("dashboard api: %s", exc)
                return api_error(503, "the database lacks the migrations this feature needs")
            except InvalidArgument as exc:
                return api_error(400, str(exc))
            except DatabaseError as exc:
                log.warning("dashboard api: database error: %s: %s", type(exc).__name__, exc)
                return api_error(503, f"database unavailable ({type(exc).__name__})")
            except Exception:
                log.exception("dashboard api: request failed")
                return api_error(500, "internal error; it was logged")

        return endpoint

    async def _run(self, route: ApiRoute, request: Request) -> Response:
        seen = incoming(request)
        known = {p.name for p in route.params}
        unknown = sorted(set(seen.query) - known)
        if unknown:
            shown = unknown[0] if unknown[0].isidentifier() and len(unknown[0]) <= 40 else "?"
            raise ApiError(400, f"unknown query parameter {shown!r} for this path")
        missing = [p.name for p in route.params if p.required and not seen.query.get(p.name)]
        if missing:
            raise ApiError(400, f"the query parameter {missing[0]!r} is required")
        body: dict[str, Any] = {}
        if route.method == "POST":
            self._check_action(request)
            body = _json_body(request, seen.body, route.body is not None)
        await self.dash.ensure_open()
        call = ApiRequest(
            request=request,
            dash=self.dash,
            path={k: str(v) for k, v in request.path_params.items()},
            query=dict(seen.query),
            body=body,
        )
        answer = await route.handler(call)
        if route.method == "POST":
            # The pages' shared reads are stale after an action, as after their own.
            self.dash.lists.clear()
            self.dash.reads.clear()
        return _Json(answer)

    def _check_action(self, request: Request) -> None:
        dash = self.dash
        if dash.read_only:
            raise ApiError(403, "this dashboard is read-only: actions are refused")
        if not dash.security.same_origin(request):
            raise ApiError(403, "cross-site request refused")
        if self._bearer(request):
            return
        if not dash.security.csrf_ok(request.headers.get(CSRF_HEADER)):
            raise ApiError(
                403,
                "an action needs Authorization: Bearer, or an X-CSRF-Token header "
                "from GET /api/csrf",
            )

    def _bearer(self, request: Request) -> bool:
        """Whether the request authenticated with the token in its ``Authorization``
        header (never an ambient credential a browser adds by itself)."""
        token = self.dash.security.token
        auth = request.headers.get("authorization", "")
        return (
            token is not None
            and auth[:7].lower() == "bearer "
            and hmac.compare_digest(auth[7:].strip().encode(), token.encode())
        )


class _Json(JSONResponse):
    """A JSON answer; a value JSON has no type for (a ``redact`` hook's object) is its
    text, so no hook's return can fail the answer."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def _json_body(request: Request, raw: bytes, takes_body: bool) -> dict[str, Any]:
    """The request's body as a JSON object (``{}`` for none).

    Raises:
        ApiError: 415 for a body that is not ``application/json``, 400 for one that
            does not parse as a JSON object, or any body where the route takes none.
    """
    if not raw.strip():
        return {}
    if not takes_body:
        raise ApiError(400, "this action takes no request body")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError(415, "the request body must be application/json")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return value


def build_api(dash: PageHost, routes: Sequence[ApiRoute]) -> ASGIApp:
    """The ``/api`` application serving ``routes``."""
    return Api(dash, routes)
