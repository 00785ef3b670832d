"""The dashboard's pages: overview, tasks, one task, the task actions and
/metrics (the purge and bulk pages are ``_bulk``'s), and the pages and task-page parts
of the extensions that have some (``Extension.pages``).

The only markup passed to a template as safe is the SVG of ``_charts`` (numbers and
escaped labels) and templates rendered by the dashboard or an extension's page set.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from importlib import import_module
from typing import Any, Protocol, runtime_checkable

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from ..errors import DatabaseError, InvalidArgument
from ..extensions import Extension
from ..kernel import views as _reads
from ..models import STATUSES, QueueActivity, QueueSummary, Task, TaskPage
from ._bulk import BULK_STATUSES, FILTER_LABELS, TASK_FILTERS, Bulk, bulk_notice
from ._charts import activity_chart, sparkline
from ._extensions import page_modules, static_packages, stylesheets
from ._host import PageHost
from ._http import Handler, incoming, redirect, route_path
from ._view import TEMPLATES, View, bare_page, error_state, error_view, now_ms, render

__all__ = [
    "OverviewPart",
    "PageSet",
    "Pages",
    "PartsOnly",
    "QueueHold",
    "TaskCard",
    "TaskParts",
    "View",
    "bare_page",
    "render",
]

log = logging.getLogger("cairnq.dashboard")

LIVE_HEADER = "x-cairnq-live"
ACTIONS = (
    "/task/cancel",
    "/task/retry",
    "/purge",
    "/tasks/retry",
    "/tasks/cancel",
)
"""The paths that take a POST: each checks read-only, origin and CSRF first."""
ACTIVITY_WINDOW_MS = 3_600_000
ACTIVITY_BUCKET_MS = 120_000
# The ``TaskParts`` the task page joins, every extension's in order, in one place each.
PART_KINDS = ("facts", "beside_timeline", "cards")
NOTICES = {
    "canceled": "Task canceled.",
    "cancel_requested": "Cancel requested: the handler stops at its next check.",
    "retried": "Task queued again.",
    "not_cancelable": "Nothing to cancel: the task had already finished.",
    "not_retryable": "Only failed or canceled tasks can be retried.",
}


class PageSet(Protocol):
    """An extension's pages, built by its page module's ``pages(host: Pages)``.

    Attributes:
        nav: ``(key, path, label)`` of its entry in the navigation bar, or ``None``.
        actions: The paths of its POST actions.
    """

    nav: tuple[str, str, str] | None
    actions: tuple[str, ...]

    def routes(self) -> list[tuple[str, Handler]]:
        """Each page by path (the dashboard wraps each in its endpoint)."""
        ...

    async def action(self, request: Request, path: str) -> Response:
        """The POST of one of ``actions``, once read-only, origin and CSRF are checked."""
        ...


@dataclass(frozen=True)
class TaskParts:
    """What an extension adds to the task page, each part the markup of a template it
    rendered (``render``); ``""`` adds nothing. The parts refresh with the page.

    Attributes:
        facts: ``<dt>``/``<dd>`` pairs at the end of the Details card.
        timeline: A card shown instead of the Timeline card the task's row gives (the
            first extension's that gives one).
        beside_timeline: Cards right after the Timeline card.
        cards: Cards at the end of the left column, before the lineage.
        below: A card below both columns, in a live part named by the extension.
    """

    facts: str = ""
    timeline: str = ""
    beside_timeline: str = ""
    cards: str = ""
    below: str = ""


@runtime_checkable
class TaskCard(Protocol):
    """A page set that also adds to the task page: its ``TaskParts``, or the markup of
    a card below the task's own (as ``TaskParts(below=...)``)."""

    async def task_card(self, task: Task, view: View) -> str | TaskParts:
        """What it adds for ``task`` (``""`` or ``TaskParts()`` for nothing)."""


@runtime_checkable
class QueueHold(Protocol):
    """A page set that says why a queued task it holds back has no due time."""

    def held(self, task: Task) -> tuple[str, str] | None:
        """``(what, note)`` of the timeline's line for ``task`` while the extension holds
        it back; ``None`` otherwise."""


@runtime_checkable
class OverviewPart(Protocol):
    """A page set that also adds to the overview: values for its template, read with
    the overview's own reads (and kept as long as they are)."""

    async def overview(self) -> Mapping[str, Any]:
        """The values it gives the overview's template."""


class PartsOnly:
    """A page set with no page, navigation entry or action of its own: the base of one
    that only adds to the dashboard's pages (``TaskCard``, ``QueueHold``, ``OverviewPart``).

    Attributes:
        host: The dashboard's ``Pages``.
    """

    nav: tuple[str, str, str] | None = None
    actions: tuple[str, ...] = ()

    def __init__(self, host: Pages) -> None:
        self.host = host

    def routes(self) -> list[tuple[str, Handler]]:
        return []

    async def action(self, request: Request, path: str) -> Response:
        return await self.host.not_found(request)


def timeline(
    task: Task, now: int, held: tuple[str, str] | None = None
) -> list[tuple[int, str, str]]:
    """``(when, what, note)`` of what the task's row records, oldest first; ``held`` is
    the line of a queued task an extension holds back (``QueueHold``).

    The row keeps one time per kind of event: created, due (``run_at_ms``), cancel
    requested, finished (``completed_at_ms``) and last written (``updated_at_ms``).
    It keeps no claim time, so a run's start shows at the earliest it can have
    been (its due time), said in the note; earlier attempts are summed up.
    """
    events: list[tuple[int, str, str]] = [(task.created_at_ms, "created", "")]
    # Written since submit: a retryable failure, a retry or a lease recovery.
    requeued = task.is_queued and task.updated_at_ms > task.created_at_ms
    # Whether the latest attempt's run ended the row as it is now (else the task was
    # requeued or canceled while queued after it, and its times are gone).
    canceled_queued = task.is_canceled and task.cancel_requested_at_ms is None
    ran_last = task.attempt > 0 and not task.is_queued and not canceled_queued
    failed_last = requeued and task.error is not None
    earlier = task.attempt - (1 if ran_last or failed_last else 0)
    if earlier > 0:
        runs = "attempt 1" if earlier == 1 else f"attempts 1-{earlier}"
        events.append((task.created_at_ms, "earlier runs", f"{runs}: times not recorded"))
    if task.is_queued:
        if held is not None:
            events.append((task.updated_at_ms, *held))
        elif not requeued:
            if task.run_at_ms > task.created_at_ms:
                due = "scheduled" if task.run_at_ms > now else "due"
                events.append((task.run_at_ms, due, "delayed"))
        else:
            if task.error is not None:
                note = f"attempt {task.attempt}, retryable: queued again"
                events.append((task.updated_at_ms, "failed", note))
            elif task.attempt == 0:
                events.append((task.updated_at_ms, "retried", "attempts reset"))
            else:
                events.append((task.updated_at_ms, "queued again", "retry or lease recovery"))
            if task.run_at_ms > task.updated_at_ms:
                due = "retry scheduled" if task.run_at_ms > now else "retry due"
                events.append((task.run_at_ms, due, f"attempt {task.attempt + 1}"))
    elif ran_last:
        note = f"attempt {task.attempt}, claimed at or after this time (due)"
        events.append((task.run_at_ms, "started", note))
    if task.cancel_requested_at_ms is not None:
        events.append((task.cancel_requested_at_ms, "cancel requested", ""))
    if task.completed_at_ms is not None:
        events.append((task.completed_at_ms, task.status, f"attempt {task.attempt}"))
    elif task.is_running and task.updated_at_ms > task.run_at_ms:
        events.append((task.updated_at_ms, "last update", "claim, heartbeat or progress"))
    events.sort(key=lambda e: e[0])
    return events


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

    def __init__(self, dash: PageHost, extras: Sequence[Extension] = ()) -> None:
        self.dash = dash
        named = [(n, import_module(m).pages(self)) for n, m in page_modules(TEMPLATES, extras)]
        self.extensions: list[PageSet] = [pages for _, pages in named]
        self.cards = [(name, pages) for name, pages in named if isinstance(pages, TaskCard)]
        self.holds = [pages for pages in self.extensions if isinstance(pages, QueueHold)]
        self.bulk = Bulk(self)
        # (name, package) of the extensions' static folders, and the stylesheets in them.
        self.statics = static_packages(extras)
        self.styles = stylesheets(self.statics)

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
                ("/purge", self.bulk.confirm_purge),
                ("/tasks/retry", self.bulk.confirm_bulk_retry),
                ("/tasks/cancel", self.bulk.confirm_bulk_cancel),
                *(route for pages in self.extensions for route in pages.routes()),
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
            redact=dash.safe_redact,
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
            nav=self._nav(),
            styles=self.styles,
            title=title,
            active=active,
            body=Markup(body),
            region=None if region is None else Markup(region),
            live=live or region is not None,
            final=final,
        )
        return self._html(status, text)

    page = _page  # the name extensions' page sets use (``cairnq.dashboard.Pages.page``)

    def _nav(self) -> list[tuple[str, str, str]]:
        """The navigation bar's entries: ``(key, path, label)``."""
        return [
            ("overview", "/", "Overview"),
            ("tasks", "/tasks", "Tasks"),
            *(pages.nav for pages in self.extensions if pages.nav is not None),
        ]

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
                window=timedelta(milliseconds=ACTIVITY_WINDOW_MS),
                bucket=timedelta(milliseconds=ACTIVITY_BUCKET_MS),
            )
            added: dict[str, Any] = {}
            for part in self.extensions:
                if isinstance(part, OverviewPart):
                    added.update(await part.overview())
            return summaries, activity, added

        summaries, activity, added = await self.dash.reads.get("overview", load)
        failed = sum(sum(a.failed) for a in activity)
        ended = sum(sum(a.succeeded) + sum(a.failed) for a in activity)
        live = render(
            "overview.html",
            view,
            queued=sum(s.counts.get("queued", 0) for s in summaries),
            running=sum(s.counts.get("running", 0) for s in summaries),
            finished=sum(a.finished for a in activity),
            rate="-" if ended == 0 else f"{failed * 100 / ended:.1f}%",
            # Numbers and escaped labels only: see _charts.
            chart=Markup(activity_chart(activity)),
            statuses=STATUSES,
            rows=_queue_rows(summaries, activity),
            **added,
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
        elif query.get("bulk") in BULK_STATUSES and query.get("done", "").isdigit():
            message = bulk_notice(query["bulk"], query)
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
            page = await self.dash.lists.get((tuple(sorted(filters.items())), cursor), load)
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
        parts = await self._task_parts(task, view)
        done = incoming(request).query.get("done", "")

        def shown(name: str) -> Any:
            return self.dash.safe_redact(name, getattr(task, name), task)

        error = None if task.error is None else error_view(shown("error"))
        values: dict[str, Any] = {
            "task": task,
            "children": kids,
            "parts": {k: Markup("".join(getattr(p, k) for _, p in parts)) for k in PART_KINDS},
            "own_timeline": next((Markup(p.timeline) for _, p in parts if p.timeline), None),
            "cards": [(name, Markup(p.below)) for name, p in parts],
            "timeline": timeline(task, view.now_ms, self.held(task)),
            "shown": shown,
            "error": error,
            "error_state": None if error is None else error_state(task, view),
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

    async def metrics(self, request: Request) -> Response:
        dash = self.dash
        if dash.metrics is False:
            return PlainTextResponse("not found", 404)
        try:
            from ..telemetry.metrics import CONTENT_TYPE, Metrics
        except ImportError as exc:
            # The message names the extra to install (``_extras.missing_extra``).
            return PlainTextResponse(f"/metrics is not available: {exc}\n", 501)
        if dash.metrics is True:
            dash.metrics = Metrics()
        await dash.metrics.refresh(dash.client)
        return Response(dash.metrics.exposition(), 200, media_type=CONTENT_TYPE)

    async def _task_parts(self, task: Task, view: View) -> list[tuple[str, TaskParts]]:
        """What each extension with a ``TaskCard`` adds to ``task``'s page, by name."""
        found = []
        for name, card in self.cards:
            part = await card.task_card(task, view)
            found.append((name, part if isinstance(part, TaskParts) else TaskParts(below=part)))
        return found

    def held(self, task: Task) -> tuple[str, str] | None:
        """The timeline's line of a queued ``task`` an extension holds back (``QueueHold``),
        or ``None``."""
        if not task.is_queued:
            return None
        return next((line for hold in self.holds if (line := hold.held(task))), None)

    # --- actions ---------------------------------------------------------------------------

    async def _action(self, request: Request) -> Response:
        dash = self.dash
        seen = incoming(request)
        path = route_path(request.scope)
        if dash.read_only:
            return self._forbidden(request, "This dashboard is read-only: actions are disabled.")
        extension = next((p for p in self.extensions if path in p.actions), None)
        if path not in ACTIONS and extension is None:
            return self._error(request, 404, "Not found", path)
        if not dash.security.same_origin(request):
            return self._forbidden(request, "Cross-site request refused.")
        if not dash.security.csrf_ok(seen.form.get("csrf")):
            return self._forbidden(
                request, "The form expired or did not come from this dashboard; reload and retry."
            )
        await dash.ensure_open()
        if extension is not None:
            return await extension.action(request, path)
        if path in ("/purge", "/tasks/retry", "/tasks/cancel"):
            if path == "/purge":
                response = await self.bulk.purge(request)
            else:
                response = await self.bulk.act(request, path.rsplit("/", 1)[-1])
            dash.lists.clear()
            dash.reads.clear()
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
        dash.lists.clear()
        dash.reads.clear()
        log.info("dashboard: %s %s -> %s", path.rsplit("/", 1)[-1], task_id, done)
        return redirect(request, "/task", {"id": task_id, "done": done})

    async def _call(
        self, request: Request, method: Callable[..., Awaitable[Task | None]], *args: Any, **kw: Any
    ) -> Task | Response | None:
        try:
            return await method(*args, **kw)
        except InvalidArgument as exc:
            return self._error(request, 400, "Bad request", str(exc))
