"""The attempt history on the dashboard: on the task page, the Timeline drawn from the
recorded attempts (``templates/history_timeline.html``) when they cover the task's
runs, else an Attempts card beside the timeline of the task's row
(``templates/history_attempts.html``); and the Trends page (``templates/trends.html``):
per task name or queue over the last day or week, the counts, failure rate, run time
p50/p95 and a chart of successes and failures per bucket.

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, load_task, to_json
from ....dashboard._api_routes import array, obj
from ....dashboard._charts import sparkline
from ....dashboard._http import Handler
from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....durations import format_duration
from ....errors import InvalidArgument, SchemaIncomplete
from ....models import QueueActivity, Task
from .._ops import attempts_if_ready
from .._panel import Event, attempt_timeline
from .._trends import check_by, series, trends

# The windows the Trends page offers, with the buckets of their charts.
WINDOWS = {"1d": 24, "7d": 28}


class HistoryPages(PartsOnly):
    """The attempt history's part of the task page, and the Trends page."""

    nav = ("trends", "/trends", "Trends")

    def routes(self) -> list[tuple[str, Handler]]:
        return [("/trends", self.trends)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The task's attempts in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def trends(self, request: Request) -> Response:
        view = self.host.view(request)
        by = request.query_params.get("by", "name")
        since = request.query_params.get("since", "7d")
        try:
            check_by(by)
            if since not in WINDOWS:
                raise InvalidArgument(f"since must be one of {', '.join(WINDOWS)}; got {since!r}")
        except InvalidArgument as exc:
            return self.host._error(request, 400, "Bad request", str(exc))
        client = self.host.dash.client
        now_ms = int(time.time() * 1000)
        rows: list[dict[str, object]] = []
        error = ""
        try:
            found = await client._run(trends(by, since, now_ms=now_ms), write=False)
            buckets = WINDOWS[since]
            counts = await client._run(series(by, since, buckets, now_ms=now_ms), write=False)
        except SchemaIncomplete as exc:
            found, counts, error = [], {}, str(exc)
        for trend in found:
            points = counts.get(trend.key, [])
            width = -(-trend.window_ms // max(1, len(points)))
            chart = QueueActivity(
                trend.key,
                now_ms - trend.window_ms,
                width,
                tuple(s for s, _ in points),
                tuple(f for _, f in points),
                tuple(0 for _ in points),
            )
            rows.append(
                {
                    "trend": trend,
                    "chart": Markup(sparkline(chart, width=240, height=28)),
                    "p50": "-" if trend.p50_ms is None else format_duration(trend.p50_ms),
                    "p95": "-" if trend.p95_ms is None else format_duration(trend.p95_ms),
                }
            )
        body = render(
            "trends.html", view, rows=rows, by=by, since=since, windows=list(WINDOWS), error=error
        )
        return self.host._page(request, title="Trends", active="trends", body=body)

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(attempts_if_ready(task.id), write=False)
        if not found:
            return TaskParts()
        line = self.host.held(task)
        held = None if line is None else Event(task.updated_at_ms, *line)
        events = attempt_timeline(task, found, view.now_ms, held=held)
        if events is None:
            return TaskParts(beside_timeline=render("history_attempts.html", view, attempts=found))
        return TaskParts(timeline=render("history_timeline.html", view, task=task, events=events))


def pages(host: Pages) -> HistoryPages:
    """The attempt history's page set on the dashboard ``host``."""
    return HistoryPages(host)


# --- the HTTP API --------------------------------------------------------------------------


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


API_ROUTES: tuple[ApiRoute, ...] = (
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
)
