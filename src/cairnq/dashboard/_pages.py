"""The dashboard's pages: overview, tasks, one task, workers, the actions, /metrics, and
the pages and task-page cards of the extensions that have some (``Extension.pages``).

Pages are Jinja2 templates (``templates/``) with autoescaping on: task names,
queues, messages and JSON values are attacker-controlled text and reach the
page only escaped. The only markup passed in as safe is the SVG of
``_charts`` (numbers and escaped labels) and templates rendered here.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import import_module
from typing import Any, Protocol, runtime_checkable

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from .._clock import SYSTEM_CLOCK
from ..backends import clock_of
from ..durations import format_duration, parse_duration
from ..errors import DatabaseError, InvalidArgument
from ..extensions import Extension
from ..extensions.history._ops import history_if_ready
from ..extensions.history._panel import Event, attempt_timeline
from ..extensions.snooze import _ops as _snooze
from ..extensions.workflows import _ops as _workflows
from ..kernel import views as _reads
from ..models import STATUSES, TERMINAL_STATUSES, QueueActivity, QueueSummary, Task, TaskPage
from ._charts import activity_chart, sparkline
from ._extensions import EXTENSION_TEMPLATES, page_modules
from ._host import PageHost, Redact
from ._http import Handler, Incoming, incoming, redirect, route_path

log = logging.getLogger("cairnq.dashboard")

LIVE_HEADER = "x-cairnq-live"
PURGE_BATCH = 1000
PURGE_MAX_BATCHES = 100
# The most one purge from the dashboard deletes; the page counts one more to say "over".
PURGE_MAX = PURGE_BATCH * PURGE_MAX_BATCHES
PURGE_FIELDS = ("status", "queue", "name", "older_than")
# What the purge page proposes: tasks finished a week ago or more.
PURGE_DEFAULT_AGE = "7d"
# Bulk retry and cancel: the most tasks one confirmation acts on, and how many
# single-task operations run at once.
BULK_MAX = 1000
BULK_CHUNK = 50
ACTIONS = (
    "/task/cancel",
    "/task/retry",
    "/purge",
    "/tasks/retry",
    "/tasks/cancel",
)
"""The paths that take a POST: each checks read-only, origin and CSRF first."""
# The statuses each bulk action applies to, as the protocol allows them.
BULK_STATUSES = {"retry": ("failed", "canceled"), "cancel": ("queued", "running")}
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


@runtime_checkable
class TaskCard(Protocol):
    """A page set that also puts a card on the task page, below the task's own."""

    async def task_card(self, task: Task, view: View) -> str:
        """Its card for ``task`` (``""`` for none), in a live part named by the extension."""


@runtime_checkable
class OverviewPart(Protocol):
    """A page set that also adds to the overview: values for its template, read with
    the overview's own reads (and kept as long as they are)."""

    async def overview(self) -> Mapping[str, Any]:
        """The values it gives the overview's template."""


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
    # The dashboard's redact hook, never raising (``PageHost.safe_redact``).
    redact: Redact

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A link under the mount point; empty query values are left out."""
        return self.at.url(path, query)

    def relative(self, ms: int) -> str:
        """``ms`` as an age (``3s ago``) or, in the future, a wait (``in 3s``)."""
        delta = self.now_ms - ms
        return f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"

    def message(self, task: Task) -> str:
        """The one line a listing shows for ``task`` (``message_of``), its error redacted."""
        if task.is_failed and task.error:
            return message_of(task, self.redact("error", task.error, task))
        return message_of(task)


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


def envelope(error: Any) -> dict[str, Any]:
    """An error as an envelope, whatever shape another writer (or a redact hook) left it in."""
    if error is None:
        return {}
    if isinstance(error, dict):
        return error
    return {"type": "Error", "code": "", "message": str(error)}


def message_of(task: Task, error: Any = None) -> str:
    """The one line a listing shows for a task: its error, cancel state or message.

    ``error`` is the task's error as it may be shown (redacted); the stored one if
    not given.
    """
    if task.is_failed and task.error:
        shown = envelope(task.error if error is None else error)
        return f"{shown.get('type', 'Error')}: {shown.get('message', '')}"
    if task.cancel_requested and task.is_running:
        return "cancel requested" + (f" · {task.message}" if task.message else "")
    return task.message or ""


def to_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class ErrorView:
    """An error envelope laid out for the page: multi-line texts (tracebacks) apart."""

    type: str
    code: str
    message: str
    # (key, text) of each details entry that is text over several lines, such as the
    # ``traceback`` cairnq workers store or the ``stack`` of other SDKs: shown as text.
    texts: list[tuple[str, str]]
    # The other details, shown as JSON; None when there are none.
    rest: Any


def error_view(error: Any) -> ErrorView:
    """``error`` (an envelope, as shown after redaction) for the error box."""
    env = envelope(error)
    details = env.get("details")
    texts: list[tuple[str, str]] = []
    rest: Any = details
    if isinstance(details, dict):
        texts = [
            (str(k), v)
            for k, v in details.items()
            if isinstance(v, str) and ("\n" in v or k in ("traceback", "stack"))
        ]
        shown = {k for k, _ in texts}
        rest = {k: v for k, v in details.items() if str(k) not in shown} or None
    elif isinstance(details, str) and details:
        texts, rest = [("details", details)], None
    elif not details:
        rest = None
    return ErrorView(
        type=str(env.get("type", "") or ""),
        code=str(env.get("code", "") or ""),
        message=str(env.get("message", "") or ""),
        texts=texts,
        rest=rest,
    )


@dataclass(frozen=True)
class Attempts:
    """How many runs a task had and may have, as the protocol counts them.

    ``attempt`` counts claims. Runs up to ``max_attempts`` come by themselves (a
    retryable failure with attempts left is queued again); a ``retry`` without
    ``reset_attempt`` of a task at its last attempt grants exactly one run more, so
    ``attempt`` can pass ``max_attempts``: those runs are ``by_retry``.
    """

    attempt: int
    max_attempts: int
    # The runs this task is allowed: max_attempts, plus those granted by manual retry.
    allowed: int
    by_retry: int

    @property
    def short(self) -> str:
        """For a listing: ``1/3``, or ``2/1+1`` when a manual retry granted a run."""
        extra = f"+{self.by_retry}" if self.by_retry else ""
        return f"{self.attempt}/{self.max_attempts}{extra}"

    @property
    def long(self) -> str:
        """For the task page: ``1 of 3``, or ``2 of 2 allowed (max_attempts 1 + 1 by manual
        retry)``."""
        if not self.by_retry:
            return f"{self.attempt} of {self.max_attempts}"
        runs = "run" if self.by_retry == 1 else "runs"
        return (
            f"{self.attempt} of {self.allowed} allowed (max_attempts {self.max_attempts} "
            f"+ {self.by_retry} {runs} by manual retry)"
        )

    @property
    def title(self) -> str:
        """A tooltip saying what the numbers mean."""
        text = f"attempt {self.attempt}; max_attempts {self.max_attempts}"
        if self.by_retry:
            text += f"; {self.by_retry} more allowed by manual retry"
        return text


def attempts(task: Task) -> Attempts:
    """``task``'s attempts: a queued task's count includes the run it waits for."""
    # The run a queued task waits for is attempt + 1: past max_attempts only when a
    # manual retry granted it (a retryable failure requeues only below max_attempts).
    runs = task.attempt + 1 if task.is_queued else task.attempt
    allowed = max(task.max_attempts, runs)
    return Attempts(task.attempt, task.max_attempts, allowed, allowed - task.max_attempts)


@dataclass(frozen=True)
class ErrorState:
    """What the error box says of the stored error: will the protocol run the task again?"""

    pill: str
    kind: str
    note: str


def error_state(task: Task, view: View) -> ErrorState:
    """Whether the task's stored error ends it, and why, for the error box's pill.

    The error is kept on every path but ``retry``: a queued task carrying one failed
    retryably and waits for its next run (the protocol runs it again by itself); a
    running or succeeded one carries an earlier attempt's; a failed one is final
    whatever the envelope's ``retryable`` says, as nothing requeues a failed task
    but a manual retry.
    """
    counts = attempts(task)
    if task.is_queued:
        when = view.relative(task.run_at_ms)
        return ErrorState("retrying", "retry", f"attempt {task.attempt + 1} runs {when}")
    if task.is_running:
        return ErrorState(
            "earlier attempt",
            "",
            f"from attempt {task.attempt - 1}; attempt {task.attempt} runs now",
        )
    if task.is_succeeded:
        return ErrorState("earlier attempt", "", "from an earlier attempt; a later one succeeded")
    if task.is_canceled:
        return ErrorState("canceled", "off", "the task was canceled; retry runs it again")
    retryable = envelope(task.error).get("retryable") is True
    if retryable and task.attempt >= counts.allowed:
        note = f"a retryable error, but no attempt left ({counts.long}): retry runs it again"
    elif retryable:
        note = "the task ended here: retry runs it again"
    else:
        note = "a non-retryable error: retry runs it again"
    return ErrorState("final", "bad", note)


def parked_event(task: Task) -> Event | None:
    """The attempt timeline's line for a parked task (queued until its dependencies or
    children end), or ``None``."""
    if not task.is_queued or task.run_at_ms != _workflows.PARKED_RUN_AT_MS:
        return None
    return Event(task.updated_at_ms, "parked", "waits for its dependencies or children")


def timeline(task: Task, now: int) -> list[tuple[int, str, str]]:
    """``(when, what, note)`` of what the task's row records, oldest first.

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
        if task.run_at_ms == _workflows.PARKED_RUN_AT_MS:
            events.append((task.updated_at_ms, "parked", "waits for its dependencies or children"))
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


def _escape(value: Any) -> Any:
    """Every printed value, escaped as ``html.escape`` does (``&quot;``, ``&#x27;``)."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


TEMPLATES = Environment(
    loader=ChoiceLoader(
        [
            PackageLoader("cairnq.dashboard", "templates"),
            *(PackageLoader(package, "templates") for package in EXTENSION_TEMPLATES),
        ]
    ),
    autoescape=True,
    finalize=_escape,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.globals.update(
    attempts=attempts,
    format_duration=format_duration,
    iso=iso,
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

    def __init__(self, dash: PageHost, extras: Sequence[Extension] = ()) -> None:
        self.dash = dash
        named = [(n, import_module(m).pages(self)) for n, m in page_modules(TEMPLATES, extras)]
        self.extensions: list[PageSet] = [pages for _, pages in named]
        self.cards = [(name, pages) for name, pages in named if isinstance(pages, TaskCard)]

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
                ("/tasks/retry", self.confirm_bulk_retry),
                ("/tasks/cancel", self.confirm_bulk_cancel),
                ("/workers", self.workers),
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
            ("workers", "/workers", "Workers"),
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
                window_ms=ACTIVITY_WINDOW_MS, bucket_ms=ACTIVITY_BUCKET_MS
            )
            unserved = await client.unserved(within_ms=self.dash.worker_window_ms)
            added: dict[str, Any] = {}
            for part in self.extensions:
                if isinstance(part, OverviewPart):
                    added.update(await part.overview())
            return summaries, activity, await self.load_workers(), unserved, added

        summaries, activity, workers, unserved, added = await self.dash.reads.get("overview", load)
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
        snoozes = await run(_snooze.snoozes_if_ready(task.id), write=False)
        history = await run(history_if_ready(task.id), write=False)
        cards = [(name, Markup(await card.task_card(task, view))) for name, card in self.cards]
        done = incoming(request).query.get("done", "")

        def shown(name: str) -> Any:
            return self.dash.safe_redact(name, getattr(task, name), task)

        error = None if task.error is None else error_view(shown("error"))
        values: dict[str, Any] = {
            "task": task,
            "children": kids,
            "snoozes": snoozes,
            "attempt_history": None if history is None else history[0],
            "step_history": None if history is None else history[1],
            "cards": cards,
            "timeline": timeline(task, view.now_ms),
            "attempt_timeline": (
                None
                if history is None
                else attempt_timeline(
                    task,
                    history[0],
                    view.now_ms,
                    held=parked_event(task),
                )
            ),
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

    async def confirm_purge(self, request: Request) -> Response:
        if self.dash.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        query = incoming(request).query
        filters = {k: query[k].strip() for k in PURGE_FIELDS if query.get(k, "").strip()}
        if filters.get("status") not in TERMINAL_STATUSES:
            filters.pop("status", None)
        filters.setdefault("older_than", PURGE_DEFAULT_AGE)
        return await self._purge_preview(request, filters)

    async def _purge_preview(
        self, request: Request, filters: Mapping[str, str], error: str | None = None
    ) -> Response:
        """The purge page for ``filters``, with how many tasks match them now."""
        try:
            older = parse_duration(filters.get("older_than", ""))
            count = await self.dash.client._run(
                _reads.purge_count(
                    older_than_ms=older,
                    status=filters.get("status"),
                    queue=filters.get("queue"),
                    name=filters.get("name"),
                    cap=PURGE_MAX + 1,
                ),
                write=False,
            )
        except InvalidArgument as exc:
            return self._purge_page(request, filters, str(exc), 400)
        status = 200 if error is None else 400
        return self._purge_page(
            request,
            filters,
            error,
            status,
            count=count,
            any_age=older == 0,
            counted_at=self._now_ms(),
        )

    def _now_ms(self) -> int:
        return (clock_of(self.dash.client.backend) or SYSTEM_CLOCK).now_ms()

    def _purge_page(
        self,
        request: Request,
        filters: Mapping[str, str],
        error: str | None,
        status: int,
        *,
        count: int | None = None,
        any_age: bool = False,
        counted_at: int | None = None,
    ) -> Response:
        body = render(
            "confirm_purge.html",
            self.view(request),
            filters=filters,
            error=error,
            count=count,
            most=PURGE_MAX,
            any_age=any_age,
            counted_at=counted_at,
        )
        return self._page(request, title="Purge", active="tasks", body=body, status=status)

    async def confirm_bulk_retry(self, request: Request) -> Response:
        return await self._confirm_bulk(request, "retry")

    async def confirm_bulk_cancel(self, request: Request) -> Response:
        return await self._confirm_bulk(request, "cancel")

    async def _confirm_bulk(self, request: Request, action: str) -> Response:
        if self.dash.read_only:
            return self._forbidden(request, "This dashboard is read-only.")
        query = incoming(request).query
        filters = {k: query[k].strip() for k in TASK_FILTERS if query.get(k, "").strip()}
        view = self.view(request)
        try:
            found = await self._bulk_matches(filters, action, BULK_MAX + 1)
        except InvalidArgument as exc:
            body = render("confirm_bulk.html", view, action=action, filters=filters, error=str(exc))
            return self._page(
                request, title=f"{action} tasks", active="tasks", body=body, status=400
            )
        wanted = filters.get("status")
        counts = dict.fromkeys((s for s in BULK_STATUSES[action] if wanted in (None, s)), 0)
        for task in found:
            counts[task.status] = counts.get(task.status, 0) + 1
        body = render(
            "confirm_bulk.html",
            view,
            action=action,
            filters=filters,
            error="",
            count=len(found),
            counts=counts,
            most=BULK_MAX,
            labels=FILTER_LABELS,
        )
        return self._page(request, title=f"{action} tasks", active="tasks", body=body)

    async def _bulk_matches(
        self, filters: Mapping[str, str], action: str, limit: int
    ) -> list[Task]:
        """Up to ``limit`` tasks of the filtered list that ``action`` applies to, newest
        first within each status; each status through the listing's status index."""
        wanted = filters.get("status")
        statuses = [s for s in BULK_STATUSES[action] if wanted in (None, s)]
        if wanted is not None and wanted not in STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(STATUSES)}")
        found: list[Task] = []
        for status in statuses:
            cursor: str | None = None
            while len(found) < limit:
                page = await self.dash.client.list_page(
                    status=status,
                    queue=filters.get("queue"),
                    name=filters.get("name"),
                    key=filters.get("key"),
                    root_id=filters.get("root_id"),
                    correlation_id=filters.get("correlation_id"),
                    id_prefix=filters.get("id_prefix"),
                    cursor=cursor,
                    limit=min(_reads.MAX_PAGE, limit - len(found)),
                )
                found += page.tasks
                cursor = page.next_cursor
                if cursor is None:
                    break
        return found[:limit]

    async def workers(self, request: Request) -> Response:
        view = self.view(request)
        workers = await self.dash.reads.get("workers", self.load_workers)
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
            # The message names the extra to install (``_extras.missing_extra``).
            return PlainTextResponse(f"/metrics is not available: {exc}\n", 501)
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
                response = await self._purge(request)
            else:
                response = await self._bulk(request, path.rsplit("/", 1)[-1])
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

    async def _purge(self, request: Request) -> Response:
        form = incoming(request).form
        filters = {k: form.get(k, "").strip() for k in PURGE_FIELDS}
        shown = {k: v for k, v in filters.items() if v}
        client = self.dash.client
        try:
            if not filters["older_than"]:
                raise InvalidArgument(
                    "say how long ago the tasks must have finished, e.g. 7d; nothing was deleted"
                )
            older = parse_duration(filters["older_than"])
            if older == 0 and form.get("any_age") != "1":
                return await self._purge_preview(
                    request,
                    shown,
                    "0s purges every finished task, even one that finished a moment ago: "
                    "tick the box to confirm. Nothing was deleted.",
                )
            status = filters["status"] or None
            if status is not None and status not in TERMINAL_STATUSES:
                raise InvalidArgument("status must be succeeded, failed or canceled")
            # What the page counted, no more: the cutoff stays where it was when counted
            # (tasks finishing since are not old enough) and the deletes stop at the count.
            older += self._since(form.get("counted_at", ""))
            most = _whole(form.get("count", ""), PURGE_MAX)
            total = 0
            more = False
            for batch in range(PURGE_MAX_BATCHES):
                limit = min(PURGE_BATCH, most - total)
                if limit <= 0:
                    break
                ids = await client.purge(
                    older_than_ms=older,
                    status=status,
                    queue=filters["queue"] or None,
                    name=filters["name"] or None,
                    limit=limit,
                )
                total += len(ids)
                if len(ids) < limit:
                    break
                more = batch == PURGE_MAX_BATCHES - 1
        except InvalidArgument as exc:
            return self._purge_page(request, shown, str(exc), 400)
        log.info("dashboard: purged %d tasks", total)
        query: dict[str, Any] = {"purged": total}
        if more:
            query["more"] = 1
        return redirect(request, "/tasks", query)

    def _since(self, counted_at: str) -> int:
        """Milliseconds since the page's count (``counted_at``), 0 when absent or odd."""
        if not counted_at.isdigit():
            return 0
        return max(0, self._now_ms() - int(counted_at))

    async def _bulk(self, request: Request, action: str) -> Response:
        """Retry or cancel, one task at a time, the tasks of the filtered list it applies to."""
        form = incoming(request).form
        filters = {k: form[k].strip() for k in TASK_FILTERS if form.get(k, "").strip()}
        client = self.dash.client
        reset = form.get("reset_attempt") == "1"
        try:
            found = await self._bulk_matches(filters, action, BULK_MAX + 1)
        except InvalidArgument as exc:
            return self._error(request, 400, "Bad request", str(exc))
        # No more than the page counted and the button said.
        most = _whole(form.get("count", ""), BULK_MAX)
        chosen, more = found[:most], len(found) > most
        done = skipped = requested = 0
        for start in range(0, len(chosen), BULK_CHUNK):
            chunk = chosen[start : start + BULK_CHUNK]
            if action == "retry":
                calls = [client.retry(t.id, reset_attempt=reset) for t in chunk]
            else:
                calls = [client.cancel(t.id) for t in chunk]
            # None: the task left the status the action applies to since it was listed.
            for result in await asyncio.gather(*calls):
                if result is None:
                    skipped += 1
                elif result.is_running:
                    requested += 1
                else:
                    done += 1
        log.info(
            "dashboard: bulk %s: %d done, %d cancel requested, %d skipped",
            action,
            done,
            requested,
            skipped,
        )
        query: dict[str, Any] = dict(filters, bulk=action, done=done)
        if skipped:
            query["skipped"] = skipped
        if requested:
            query["requested"] = requested
        if more:
            query["more"] = 1
        return redirect(request, "/tasks", query)


def bulk_notice(action: str, query: Mapping[str, str]) -> str:
    """The notice after a bulk action, from the counts its redirect carries."""
    done = int(query.get("done", "0"))
    tasks = f"{done} task{'' if done == 1 else 's'}"
    text = f"Queued {tasks} again." if action == "retry" else f"Canceled {tasks}."
    requested = query.get("requested", "")
    if requested.isdigit() and int(requested):
        text += f" Cancel requested for {requested} running: each stops at its next check."
    skipped = query.get("skipped", "")
    if skipped.isdigit() and int(skipped):
        text += f" {skipped} had changed state meanwhile and were left alone."
    if query.get("more") == "1":
        text += f" More match: {action} again."
    return text


def _whole(text: str, most: int) -> int:
    """A whole number from a form field, at most ``most``; ``most`` when absent or odd."""
    return min(int(text), most) if text.isdigit() else most
