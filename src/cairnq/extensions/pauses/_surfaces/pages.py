"""The dashboard's pause and resume buttons: the overview's flow column and its list of
paused task names (read here, shown by the overview's template), and the two actions.

The dashboard imports this module by the name the extension declares
(``Pauses.pages``) and asks ``pages`` for its page set, which has no page of its own
(no entry in the navigation bar): a GET of an action's address goes back to the
overview, where its buttons are.

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, to_json
from ....dashboard._api_routes import INTEGER, STRING, array, nullable, obj
from ....dashboard._http import Handler, incoming, redirect
from ....dashboard._pages import Pages
from ....errors import InvalidArgument
from .. import _ops as _pauses

log = logging.getLogger("cairnq.dashboard")


class PausePages:
    """The pause and resume actions on the overview's queues, and what the overview
    shows of the pauses."""

    nav = None
    actions = ("/queue/pause", "/queue/resume")
    """The paths that take a POST; the dashboard checks read-only, origin and CSRF first."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.dash = pages.dash

    def routes(self) -> list[tuple[str, Handler]]:
        """A GET of either action's address: back to the overview."""
        return [(path, self.back_to_overview) for path in self.actions]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The pauses' reads and actions in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def back_to_overview(self, request: Request) -> Response:
        """GET on a pause or resume action: its buttons live on the overview."""
        return redirect(request, "/")

    async def overview(self) -> Mapping[str, Any]:
        """The overview template's ``paused_queues`` (each paused queue's pause by its
        name; ``None`` on a database without the pauses' tables: no pause buttons then)
        and ``paused_names``. The template lists the paused queues that hold no task
        below the queues' table, so a pause is never out of sight."""
        pauses = await self.dash.client._run(_pauses.paused_if_ready(), write=False)
        if pauses is None:
            return {"paused_queues": None, "paused_names": []}
        return {
            "paused_queues": {p.target: p for p in pauses if p.scope == "queue"},
            "paused_names": [p for p in pauses if p.scope == "name"],
        }

    async def action(self, request: Request, path: str) -> Response:
        """Pause or resume the queue the form names, then back to the overview."""
        dash = self.dash
        queue = incoming(request).form.get("queue", "")
        pause = path == "/queue/pause"
        try:
            if pause:
                await dash.client.pauses.pause_queue(queue, by="dashboard")
            else:
                await dash.client.pauses.resume_queue(queue)
        except InvalidArgument as exc:
            return self.pages._error(request, 400, "Bad request", str(exc))
        dash.reads.clear()
        log.info("dashboard: %s queue %s", "pause" if pause else "resume", queue)
        return redirect(request, "/")


def pages(host: Pages) -> PausePages:
    """The pauses' page set for the dashboard's ``host``."""
    return PausePages(host)


# --- the HTTP API --------------------------------------------------------------------------

PAUSE = obj(
    {
        "scope": {"type": "string", "enum": ["queue", "name"]},
        "target": STRING,
        "paused_at_ms": INTEGER,
        "paused_by": nullable("string"),
    }
)
_RESUMED = obj({"resumed": {"type": "boolean"}})


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


API_ROUTES: tuple[ApiRoute, ...] = (
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
        response=_RESUMED,
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
        response=_RESUMED,
    ),
)
