"""The dashboard's Workers page (each worker alive now, with its running tasks) and what
the overview shows of presence: the workers tile and a notice per unserved (queue,
name). Its template is in ``templates/`` beside the extension.

The dashboard imports this module by the name the extension declares
(``Presence.pages``) and asks ``pages`` for its page set.

Its page set also serves the feature's route of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiRequest, ApiRoute, task_json
from ....dashboard._api_routes import INTEGER, STRING, TASK, array, nullable, obj
from ....dashboard._http import Handler
from ....dashboard._pages import Pages, render
from ....models import WorkerInfo


class PresencePages:
    """The Workers page, rendered with the dashboard's ``Pages``, and the overview's
    workers tile and unserved notices; it has no action."""

    nav = ("workers", "/workers", "Workers")
    actions: tuple[str, ...] = ()

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.dash = pages.dash

    def routes(self) -> list[tuple[str, Handler]]:
        """Each page by path (the dashboard wraps each in its endpoint)."""
        return [("/workers", self.workers)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The workers in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def workers(self, request: Request) -> Response:
        """The Workers page: the workers seen within the dashboard's alive window, and
        every lease holder."""
        view = self.pages.view(request)
        found = await self.dash.reads.get("workers", self.load_workers)
        live = render("workers.html", view, workers=found, window_ms=self.dash.worker_window_ms)
        return self.pages._page(request, title="Workers", active="workers", body="", region=live)

    async def load_workers(self) -> list[WorkerInfo]:
        """The workers alive within the dashboard's window (``cq.presence.workers``)."""
        window = timedelta(milliseconds=self.dash.worker_window_ms)
        return await self.dash.client.presence.workers(within=window)

    async def overview(self) -> Mapping[str, Any]:
        """The overview template's ``workers`` (how many are alive) and ``unserved``
        (a notice each; none on a database without the presence tables)."""
        window = self.dash.worker_window_ms
        unserved = await self.dash.client.presence.unserved(within=timedelta(milliseconds=window))
        return {"workers": len(await self.load_workers()), "unserved": unserved}

    async def action(self, request: Request, path: str) -> Response:
        """Never reached: the page set declares no action."""
        return self.pages._error(request, 404, "Not found", path)


def pages(host: Pages) -> PresencePages:
    """Presence's page set for the dashboard's ``host``."""
    return PresencePages(host)


# --- the HTTP API --------------------------------------------------------------------------

WORKER = obj(
    {
        "worker_id": STRING,
        "running": array(TASK),
        "queues": {"type": ["array", "null"], "items": STRING},
        "host": nullable("string"),
        "pid": nullable("integer"),
        "concurrency": nullable("integer"),
        "started_at_ms": nullable("integer"),
        "last_seen_ms": nullable("integer"),
    }
)
UNSERVED = obj(
    {
        "queue": STRING,
        "name": STRING,
        "count": INTEGER,
        "capped": {"type": "boolean"},
        "oldest_run_at_ms": nullable("integer"),
        "queue_served": {"type": "boolean"},
    }
)


async def workers(request: ApiRequest) -> Any:
    dash = request.dash
    window = timedelta(milliseconds=dash.worker_window_ms)
    found = await dash.client.presence.workers(within=window)
    unserved = await dash.client.presence.unserved(within=window)
    return {
        "window_ms": dash.worker_window_ms,
        "workers": [
            {
                "worker_id": w.worker_id,
                "running": [task_json(t, request, light=True) for t in w.running],
                "queues": None if w.queues is None else list(w.queues),
                "host": w.host,
                "pid": w.pid,
                "concurrency": w.concurrency,
                "started_at_ms": w.started_at_ms,
                "last_seen_ms": w.last_seen_ms,
            }
            for w in found
        ],
        "unserved": [
            {
                "queue": u.queue,
                "name": u.name,
                "count": u.count,
                "capped": u.capped,
                "oldest_run_at_ms": u.oldest_run_at_ms,
                "queue_served": u.queue_served,
            }
            for u in unserved
        ],
    }


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/workers",
        workers,
        "listWorkers",
        "The workers alive within the dashboard's window, with the tasks each holds, and "
        "the due (queue, name) pairs no live cairnq worker serves",
        "workers",
        response=obj({"window_ms": INTEGER, "workers": array(WORKER), "unserved": array(UNSERVED)}),
    ),
)
