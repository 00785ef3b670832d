"""The dashboard's schedules pages: the list, one schedule with its slots, and the
pause and resume actions. Their templates are in ``templates/`` beside this module.

The dashboard imports this module by the name the extension declares
(``Schedules.pages``) and asks ``pages`` for its page set.

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, to_json
from ....dashboard._api_routes import (
    INTEGER,
    ROWS_PARAM,
    STRING,
    array,
    nullable,
    obj,
)
from ....dashboard._http import Handler, incoming, redirect
from ....dashboard._pages import Pages, render
from ....errors import InvalidArgument, SchemaIncomplete
from ....kernel import views as _reads
from .. import _ops as _schedules

log = logging.getLogger("cairnq.dashboard")

# One schedule's page shows this many of its latest slots.
SCHEDULE_HISTORY = 100
NOTICES = {
    "paused": "Schedule paused: no slot submits a task until it is resumed.",
    "resumed": "Schedule resumed from now: the slots passed while paused were skipped.",
}


class SchedulePages:
    """The schedules' pages and actions, rendered with the dashboard's ``Pages``."""

    nav = ("schedules", "/schedules", "Schedules")
    actions = ("/schedule/pause", "/schedule/resume")
    """The paths that take a POST; the dashboard checks read-only, origin and CSRF first."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.dash = pages.dash

    def routes(self) -> list[tuple[str, Handler]]:
        """Each page by path (the dashboard wraps each in its endpoint)."""
        return [
            ("/schedules", self.schedules),
            ("/schedule", self.schedule),
            ("/schedule/pause", self.action_page),
            ("/schedule/resume", self.action_page),
        ]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The schedules' reads and actions in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def schedules(self, request: Request) -> Response:
        view = self.pages.view(request)
        client = self.dash.client

        async def load() -> Any:
            rows = await client._run(_schedules.with_last_slots(), write=False)
            return rows, (await self._workers_alive() if rows else True)

        try:
            rows, alive = await self.dash.reads.get("schedules", load)
        except SchemaIncomplete as exc:
            live = render("schedules.html", view, error=str(exc), rows=[], alive=True)
        else:
            live = render("schedules.html", view, error="", rows=rows, alive=alive)
        return self.pages._page(
            request, title="Schedules", active="schedules", body="", region=live
        )

    async def _workers_alive(self) -> bool:
        """Whether a cairnq worker is alive (presence), to evaluate the schedules: a
        next run is only a due time while none is. ``True`` when presence cannot say."""
        try:
            return bool(await self.dash.client.presence.workers())
        except Exception:
            return True

    async def schedule(self, request: Request) -> Response:
        view = self.pages.view(request)
        query = incoming(request).query
        name = query.get("name", "")
        client = self.dash.client
        try:
            found = await client.schedules.get(name)
            slots = (
                []
                if found is None
                else await client.schedules.history(name, limit=SCHEDULE_HISTORY)
            )
        except SchemaIncomplete as exc:
            return self.pages._error(request, 404, "No schedules", str(exc))
        except InvalidArgument as exc:
            return self.pages._error(request, 400, "Bad schedule name", str(exc))
        if found is None:
            return self._no_schedule(request, name)
        live = render("schedule.html", view, schedule=found, slots=slots)
        body = render(
            "schedule_head.html", view, schedule=found, done=NOTICES.get(query.get("done", ""), "")
        )
        return self.pages._page(
            request, title=found.name, active="schedules", body=body, region=live
        )

    def _no_schedule(self, request: Request, name: str) -> Response:
        return self.pages._error(
            request, 404, "No such schedule", f"No schedule is named {name!r}."
        )

    async def action_page(self, request: Request) -> Response:
        """A GET of a pause or resume address: the schedule's page, where its button is."""
        if self.dash.read_only:
            return self.pages._forbidden(request, "This dashboard is read-only.")
        return redirect(request, "/schedule", {"name": incoming(request).query.get("name", "")})

    async def action(self, request: Request, path: str) -> Response:
        """Pause or resume the schedule the form names, then show its page."""
        seen = incoming(request)
        name = seen.form.get("name") or seen.query.get("name", "")
        paused = path == "/schedule/pause"
        client = self.dash.client
        try:
            if paused:
                stored = await client.schedules.pause(name)
            else:
                stored = await client.schedules.resume(name)
        except SchemaIncomplete as exc:
            return self.pages._error(request, 404, "No schedules", str(exc))
        except InvalidArgument as exc:
            return self.pages._error(request, 400, "Bad request", str(exc))
        if stored is None:
            return self._no_schedule(request, name)
        self.dash.reads.clear()
        done = "paused" if paused else "resumed"
        log.info("dashboard: schedule %s -> %s", name, done)
        return redirect(request, "/schedule", {"name": name, "done": done})


def pages(host: Pages) -> SchedulePages:
    """The schedules' page set for the dashboard's ``host``."""
    return SchedulePages(host)


# --- the HTTP API --------------------------------------------------------------------------

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


API_ROUTES: tuple[ApiRoute, ...] = (
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
        params=(ROWS_PARAM,),
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
)
