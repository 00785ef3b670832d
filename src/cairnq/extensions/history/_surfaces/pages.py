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
from datetime import timedelta
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, Param, load_task, to_json
from ....dashboard._api_routes import INTEGER, STRING, array, nullable, obj
from ....dashboard._charts import sparkline
from ....dashboard._http import Handler
from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....durations import format_duration
from ....errors import InvalidArgument, SchemaIncomplete
from ....models import QueueActivity, Task
from .._ops import attempts_if_ready
from .._panel import Event, attempt_timeline
from .._trends import BY, check_buckets, check_by, check_since, series, trends

# The windows the Trends page offers, with the buckets of their charts.
WINDOWS = {"1d": 24, "7d": 28}


class HistoryPages(PartsOnly):
    """The attempt history's part of the task page, and the Trends page."""

    nav = ("trends", "/trends", "Trends")

    def routes(self) -> list[tuple[str, Handler]]:
        return [("/trends", self.trends)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The task's attempts and the trends in the HTTP API (``API_ROUTES``)."""
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


TREND = obj(
    {
        "key": STRING,
        "window_ms": INTEGER,
        "attempts": INTEGER,
        "succeeded": INTEGER,
        "failed": INTEGER,
        "canceled": INTEGER,
        "throughput_per_hour": {"type": "number"},
        "failure_rate": nullable("number"),
        "p50_ms": nullable("integer"),
        "p95_ms": nullable("integer"),
        "series": obj({"succeeded": array(INTEGER), "failed": array(INTEGER)}),
    }
)


async def trends_api(request: ApiRequest) -> Any:
    by = check_by(request.text("by") or "name")
    since = request.text("since") or "7d"
    window = check_since(since)
    buckets = check_buckets(request.integer("buckets", WINDOWS.get(since, 24), 1, 400))
    client = request.dash.client
    span = timedelta(milliseconds=window)
    now_ms = client._clock().now_ms()
    found = await client._run(trends(by, span, now_ms=now_ms), write=False)
    counts = await client._run(series(by, span, buckets, now_ms=now_ms), write=False)
    width = -(-window // buckets)
    shown = []
    for trend in found:
        points = counts.get(trend.key, [(0, 0)] * buckets)
        row = trend.to_dict()
        row["series"] = {"succeeded": [s for s, _ in points], "failed": [f for _, f in points]}
        shown.append(row)
    return {
        "by": by,
        "window_ms": window,
        "bucket_ms": width,
        "start_ms": now_ms + 1 - width * buckets,
        "trends": shown,
    }


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/trends",
        trends_api,
        "listTrends",
        "Per task name or queue over a window ending now: attempts, failure rate, "
        "throughput, run time p50/p95 and a series of successes and failures per bucket",
        "trends",
        params=(
            Param("by", {"type": "string", "enum": list(BY)}, "group by name (default) or queue"),
            Param(
                "since",
                {**STRING, "examples": ["1d", "7d"]},
                "the window, a duration from 1m to 366d (default 7d)",
            ),
            Param(
                "buckets",
                {"type": "integer", "minimum": 1, "maximum": 400},
                "points in each series (24 for 1d, 28 for 7d, else 24)",
            ),
        ),
        response=obj(
            {
                "by": STRING,
                "window_ms": INTEGER,
                "bucket_ms": INTEGER,
                "start_ms": INTEGER,
                "trends": array(TREND),
            }
        ),
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
)
