"""The dashboard's pages: overview, tasks, one task, workers, the actions, /metrics.

Pages are Jinja2 templates (``templates/``) with autoescaping on: task names,
queues, messages and JSON values are attacker-controlled text and reach the
page only escaped. The only markup passed in as safe is the SVG of
``_charts`` (numbers and escaped labels) and templates rendered here.
"""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from ..durations import format_duration, parse_duration
from ..errors import DatabaseError, InvalidArgument
from ..models import STATUSES, TERMINAL_STATUSES, QueueActivity, QueueSummary, Task, TaskPage
from ..protocol import reads as _reads
from ._charts import activity_chart, sparkline
from ._http import Handler, Incoming, incoming, redirect, route_path

if TYPE_CHECKING:
    from ._app import DashboardApp

log = logging.getLogger("cairnq.dashboard")

Redact = Callable[[str, Any, Task], Any]

LIVE_HEADER = "x-cairnq-live"
PURGE_BATCH = 1000
PURGE_MAX_BATCHES = 100
ACTIVITY_WINDOW_MS = 3_600_000
ACTIVITY_BUCKET_MS = 120_000
TASK_FILTERS = ("status", "queue", "name", "key", "correlation_id", "id_prefix", "root_id")
FILTER_LABELS = {
    "status": "Status",
    "queue": "Queue",
    "name": "Name",
    "key": "Key",
    "correlation_id": "Correlation id",
    "id_prefix": "Id prefix",
    "root_id": "Root",
}
NOTICES = {
    "canceled": "Task canceled.",
    "cancel_requested": "Cancel requested: the handler stops at its next check.",
    "retried": "Task queued again.",
    "not_cancelable": "Nothing to cancel: the task had already finished.",
    "not_retryable": "Only failed or canceled tasks can be retried.",
}


@dataclass(frozen=True)
class View:
    """What every template needs to know about the request it answers."""

    at: Incoming
    read_only: bool
    csrf: str
    refresh_ms: int
    title: str
    label: str
    now_ms: int

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A link under the mount point; empty query values are left out."""
        return self.at.url(path, query)

    def relative(self, ms: int) -> str:
        """``ms`` as an age (``3s ago``) or, in the future, a wait (``in 3s``)."""
        delta = self.now_ms - ms
        return f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso(ms: int | None) -> str:
    """UTC time with milliseconds, e.g. ``2026-01-02 03:04:05.678Z``."""
    if ms is None:
        return ""
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def short_id(task_id: str) -> str:
    return task_id if len(task_id) <= 16 else task_id[:9] + "…" + task_id[-6:]


def envelope(task: Task) -> dict[str, Any]:
    """The task's error as an envelope, whatever shape another writer stored."""
    error: Any = task.error
    if error is None:
        return {}
    if isinstance(error, dict):
        return error
    return {"type": "Error", "code": "", "message": str(error)}


def message_of(task: Task) -> str:
    """The one line a listing shows for a task: its error, cancel state or message."""
    if task.is_failed and task.error:
        error = envelope(task)
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    if task.cancel_requested and task.is_running:
        return "cancel requested" + (f" · {task.message}" if task.message else "")
    return task.message or ""


def to_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def timeline(task: Task, now: int) -> list[tuple[int, str, str]]:
    """``(when, what, note)`` of the task's life so far, oldest first."""
    events: list[tuple[int, str, str]] = [(task.created_at_ms, "created", "")]
    if task.run_at_ms > task.created_at_ms:
        due = "due" if task.run_at_ms <= now else "runs"
        events.append((task.run_at_ms, due, "delayed" if task.attempt == 0 else "retry backoff"))
    if task.cancel_requested_at_ms is not None:
        events.append((task.cancel_requested_at_ms, "cancel requested", ""))
    if task.completed_at_ms is not None:
        events.append((task.completed_at_ms, task.status, ""))
    elif task.updated_at_ms > task.created_at_ms:
        events.append((task.updated_at_ms, "last update", task.status))
    events.sort(key=lambda e: e[0])
    return events


def _escape(value: Any) -> Any:
    """Every printed value, escaped as ``html.escape`` does (``&quot;``, ``&#x27;``)."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


TEMPLATES = Environment(
    loader=PackageLoader("cairnq.dashboard", "templates"),
    autoescape=True,
    finalize=_escape,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.globals.update(
    envelope=envelope,
    format_duration=format_duration,
    iso=iso,
    message_of=message_of,
    short_id=short_id,
    to_json=to_json,
)


def render(name: str, view: View | None = None, **values: Any) -> str:
    """The template ``name`` filled in with ``values`` (and ``view``, for pages)."""
    if view is not None:
        values["view"] = view
    return TEMPLATES.get_template(name).render(**values)


def bare_page(title: str, message: str) -> str:
    """A page for requests refused before any view exists (no token): no links, no data."""
    return render("bare.html", title=title, message=message)


@dataclass(frozen=True)
class QueueRow:
    queue: str
    counts: list[tuple[str, int]]
    oldest: int | None
    spark: Markup
    done: int
    failure: float | None


def _queue_rows(
    summaries: Sequence[QueueSummary], activity: Sequence[QueueActivity]
) -> list[QueueRow]:
    by_queue = {a.queue: a for a in activity}
    rows = []
    for summary in summaries:
        series = by_queue.get(summary.queue)
        rows.append(
            QueueRow(
                queue=summary.queue,
                counts=[(s, summary.counts.get(s, 0)) for s in STATUSES],
                oldest=summary.oldest_queued_age_ms,
                # Numbers and escaped labels only: see _charts.
                spark=Markup(sparkline(series) if series else ""),
                done=series.finished if series else 0,
                failure=series.failure_rate if series else None,
            )
        )
    return rows


class Pages:
    """The controllers, reading through the dashboard's client and throttles."""

    def __init__(self, dash: DashboardApp) -> None:
        self.dash = dash

    # --- plumbing --------------------------------------------------------------------------

    def endpoint(self, page: Handler) -> Handler:
        """``page`` for GET; POST goes to the actions. Database errors answer 503."""

        async def handle(request: Request) -> Response:
            try:
                if request.method == "POST":
                    return await self._action(request)
                await self.dash.ensure_open()
                return await page(request)
            except DatabaseError as exc:
                log.warning("dashboard: database error: %s: %s", type(exc).__name__, exc)
                return self._error(
                    request,
                    503,
                    "Database unavailable",
                    f"{type(exc).__name__}; the details were logged.",
                )
            except Exception:
                log.exception("dashboard: request failed")
                return self._error(request, 500, "Something went wrong", "The error was logged.")

        return handle

    def routes(self) -> list[tuple[str, Handler]]:
        """Every page by path, ready to route; each also takes the POST of its action."""
        return [
            (path, self.endpoint(handler))
            for path, handler in (
                ("/", self.overview),
                ("/tasks", self.tasks),
                ("/task", self.task),
                ("/task/cancel", self.confirm_cancel),
                ("/task/retry", self.confirm_retry),
                ("/purge", self.confirm_purge),
                ("/workers", self.workers),
                ("/metrics", self.metrics),
            )
        ]

    def view(self, request: Request) -> View:
        dash = self.dash
        return View(
            at=incoming(request),
            read_only=dash.read_only,
            csrf=dash.csrf_token(),
            refresh_ms=dash.refresh_ms,
            title=dash.title,
            label=dash.label,
            now_ms=now_ms(),
        )

    def _html(self, status: int, text: str) -> Response:
        return HTMLResponse(text, status)

    def _page(
        self,
        request: Request,
        *,
        title: str,
        active: str,
        body: str,
        status: int = 200,
        region: str | None = None,
        live: bool = False,
        final: bool = False,
    ) -> Response:
        """A whole page: ``body`` (template output), then the live ``region`` if any.

        With a region or ``live``, the script refreshes the page's live parts in place
        until ``final`` (nothing shown will change by itself); a refresh of a page with
        a region gets the region alone.
        """
        if region is not None and self._live(request):
            return self._html(status, render("region.html", region=Markup(region)))
        text = render(
            "page.html",
            self.view(request),
            title=title,
            active=active,
            body=Markup(body),
            region=None if region is None else Markup(region),
            live=live or region is not None,
            final=final,
        )
        return self._html(status, text)

    def _error(self, request: Request, status: int, title: str, message: str) -> Response:
        body = render("error.html", self.view(request), title=title, message=message)
        return self._page(request, title=title, active="", body=body, status=status)

    def _forbidden(self, request: Request, message: str) -> Response:
        return self._error(request, 403, "Forbidden", message)

    def _live(self, request: Request) -> bool:
        return request.headers.get(LIVE_HEADER) == "1"

    async def not_found(self, request: Request) -> Response:
        return self._error(request, 404, "Not found", route_path(request.scope))

    # --- pages -----------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        view = self.view(request)
        client = self.dash.client

        async def load() -> Any:
            summaries = await client.overview()
            activity = await client.activity(
                window_ms=ACTIVITY_WINDOW_MS, bucket_ms=ACTIVITY_BUCKET_MS
            )
            unserved = await client.unserved(within_ms=self.dash.worker_window_ms)
            return summaries, activity, await self.load_workers(), unserved

        summaries, activity, workers, unserved = await self.dash._reads.get("overview", load)
        failed = sum(sum(a.failed) for a in activity)
        ended = sum(sum(a.succeeded) + sum(a.failed) for a in activity)
        live = render(
            "overview.html",
            view,
            queued=sum(s.counts.get("queued", 0) for s in summaries),
            running=sum(s.counts.get("running", 0) for s in summaries),
            finished=sum(a.finished for a in activity),
            rate="-" if ended == 0 else f"{failed * 100 / ended:.1f}%",
            workers=len(workers),
            # Numbers and escaped labels only: see _charts.
            chart=Markup(activity_chart(activity)),
            statuses=STATUSES,
            rows=_queue_rows(summaries, activity),
            unserved=unserved,
        )
        return self._page(request, title="Overview", active="overview", body="", region=live)

    async def tasks(self, request: Request) -> Response:
        view = self.view(request)
        query = incoming(request).query
        filters = {k: query[k].strip() for k in TASK_FILTERS if query.get(k, "").strip()}
        cursor = query.get("cursor") or None
        message = ""
        if "purged" in query and query["purged"].isdigit():
            count = int(query["purged"])
            more = " More remain: purge again." if query.get("more") == "1" else ""
            message = f"Purged {count} task{'' if count == 1 else 's'}.{more}"
        body = render(
            "filters.html",
            view,
            message=message,
            filters=filters,
            statuses=STATUSES,
            labels=FILTER_LABELS,
        )
        client = self.dash.client

        def load() -> Awaitable[TaskPage]:
            return client.list_page(
                status=filters.get("status"),
                queue=filters.get("queue"),
                name=filters.get("name"),
                key=filters.get("key"),
                root_id=filters.get("root_id"),
                correlation_id=filters.get("correlation_id"),
                id_prefix=filters.get("id_prefix"),
                cursor=cursor,
                limit=self.dash.page_size,
            )

        try:
            page = await self.dash._lists.get((tuple(sorted(filters.items())), cursor), load)
        except InvalidArgument as exc:
            live = render("tasks.html", view, error=str(exc))
            return self._page(
                request, title="Tasks", active="tasks", body=body, region=live, status=400
            )
        live = render("tasks.html", view, error="", page=page, filters=filters, cursor=cursor)
        return self._page(request, title="Tasks", active="tasks", body=body, region=live)

    async def _load_task(self, request: Request, *, light: bool = False) -> Task | Response:
        """The task named by ``?id=``, or the error page; ``light`` leaves out payload,
        result and metadata unless the task has finished (its result is then shown)."""
        task_id = incoming(request).query.get("id", "")
        client = self.dash.client
        try:
            if light:
                task = await client._run(_reads.get_light(task_id), write=False)
                if task is not None and task.is_terminal:
                    task = await client.get(task_id)
            else:
                task = await client.get(task_id)
        except InvalidArgument as exc:
            return self._error(request, 400, "Bad task id", str(exc))
        if task is None:
            return self._error(request, 404, "No such task", f"No task has the id {task_id!r}.")
        return task

    async def task(self, request: Request) -> Response:
        # A refresh reads no payload: a running task is polled every refresh_ms.
        live = self._live(request)
        found = await self._load_task(request, light=live)
        if isinstance(found, Response):
            return found
        task = found
        view = self.view(request)
        run = self.dash.client._run
        kids = await run(_reads.children(task), write=False)
        done = incoming(request).query.get("done", "")

        def shown(name: str) -> Any:
            return self.dash.safe_redact(name, getattr(task, name), task)

        values: dict[str, Any] = {
            "task": task,
            "children": kids,
            "timeline": timeline(task, view.now_ms),
            "shown": shown,
        }
        if live:
            # A finished task carries a mark that stops the refreshing: it will not change
            # by itself.
            return self._html(200, render("task.html", view, parts_only=True, **values))
        key = await run(_reads.task_key(task.id), write=False)
        body = render(
            "task.html", view, parts_only=False, key=key, done=NOTICES.get(done, ""), **values
        )
        title = f"{task.name} {task.id}"
        return self._page(
            request, title=title, active="tasks", body=body, live=True, final=task.is_terminal
        )

    async def confirm_cancel(self, request: Request) -> Response:
        return await self._confirm_task(request, "cancel")

    async def confirm_retry(self, request: Request) -> Response:
        return await self._confirm_task(request, "retry")

    async def _confirm_task(self, request: Request, action: str) -> Response:
        if self.dash.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        found = await self._load_task(request)
        if isinstance(found, Response):
            return found
        body = render("confirm_task.html", self.view(request), task=found, action=action)
        return self._page(request, title=f"{action} task", active="tasks", body=body)

    async def confirm_purge(self, request: Request) -> Response:
        if self.dash.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        query = incoming(request).query
        filters = {k: query[k] for k in ("status", "queue", "name", "older_than") if query.get(k)}
        if filters.get("status") not in TERMINAL_STATUSES:
            filters.pop("status", None)
        return self._purge_page(request, filters, None, 200)

    def _purge_page(
        self, request: Request, filters: Mapping[str, str], error: str | None, status: int
    ) -> Response:
        body = render("confirm_purge.html", self.view(request), filters=filters, error=error)
        return self._page(request, title="Purge", active="tasks", body=body, status=status)

    async def workers(self, request: Request) -> Response:
        view = self.view(request)
        workers = await self.dash._reads.get("workers", self.load_workers)
        live = render("workers.html", view, workers=workers, window_ms=self.dash.worker_window_ms)
        return self._page(request, title="Workers", active="workers", body="", region=live)

    async def load_workers(self) -> Any:
        return await self.dash.client.workers(within_ms=self.dash.worker_window_ms)

    async def metrics(self, request: Request) -> Response:
        dash = self.dash
        if dash.metrics is False:
            return PlainTextResponse("not found", 404)
        try:
            from ..telemetry.metrics import CONTENT_TYPE, Metrics
        except ImportError as exc:
            return PlainTextResponse(f"{exc}\n", 404)
        if dash.metrics is True:
            dash.metrics = Metrics()
        await dash.metrics.refresh(dash.client)
        return Response(dash.metrics.exposition(), 200, media_type=CONTENT_TYPE)

    # --- actions ---------------------------------------------------------------------------

    async def _action(self, request: Request) -> Response:
        dash = self.dash
        seen = incoming(request)
        path = route_path(request.scope)
        if dash.read_only:
            return self._forbidden(request, "This dashboard is read-only: actions are disabled.")
        if path not in ("/task/cancel", "/task/retry", "/purge"):
            return self._error(request, 404, "Not found", path)
        if not dash.security.same_origin(request):
            return self._forbidden(request, "Cross-site request refused.")
        if not dash.security.csrf_ok(seen.form.get("csrf")):
            return self._forbidden(
                request, "The form expired or did not come from this dashboard; reload and retry."
            )
        await dash.ensure_open()
        if path == "/purge":
            response = await self._purge(request)
            dash._lists.clear()
            dash._reads.clear()
            return response
        task_id = seen.query.get("id") or seen.form.get("id", "")
        if path == "/task/cancel":
            task = await self._call(request, dash.client.cancel, task_id)
            if isinstance(task, Response):
                return task
            if task is None:
                done = "not_cancelable"
            else:
                done = "canceled" if task.is_canceled else "cancel_requested"
        else:
            reset = seen.form.get("reset_attempt") == "1"
            task = await self._call(request, dash.client.retry, task_id, reset_attempt=reset)
            if isinstance(task, Response):
                return task
            done = "retried" if task is not None else "not_retryable"
        dash._lists.clear()
        dash._reads.clear()
        log.info("dashboard: %s %s -> %s", path.rsplit("/", 1)[-1], task_id, done)
        return redirect(request, "/task", {"id": task_id, "done": done})

    async def _call(
        self, request: Request, method: Callable[..., Awaitable[Task | None]], *args: Any, **kw: Any
    ) -> Task | Response | None:
        try:
            return await method(*args, **kw)
        except InvalidArgument as exc:
            return self._error(request, 400, "Bad request", str(exc))

    async def _purge(self, request: Request) -> Response:
        form = incoming(request).form
        filters = {k: form.get(k, "").strip() for k in ("status", "queue", "name", "older_than")}
        client = self.dash.client
        try:
            older = parse_duration(filters["older_than"] or "0s")
            status = filters["status"] or None
            if status is not None and status not in TERMINAL_STATUSES:
                raise InvalidArgument("status must be succeeded, failed or canceled")
            total = 0
            more = False
            for batch in range(PURGE_MAX_BATCHES):
                ids = await client.purge(
                    older_than_ms=older,
                    status=status,
                    queue=filters["queue"] or None,
                    name=filters["name"] or None,
                    limit=PURGE_BATCH,
                )
                total += len(ids)
                if len(ids) < PURGE_BATCH:
                    break
                more = batch == PURGE_MAX_BATCHES - 1
        except InvalidArgument as exc:
            shown = {k: v for k, v in filters.items() if v}
            return self._purge_page(request, shown, str(exc), 400)
        log.info("dashboard: purged %d tasks", total)
        query: dict[str, Any] = {"purged": total}
        if more:
            query["more"] = 1
        return redirect(request, "/tasks", query)
