"""The dashboard's Workers page (each worker alive now, with its running tasks) and what
the overview shows of presence: the workers tile and a notice per unserved (queue,
name). Its template is in ``templates/`` beside the extension.

The dashboard imports this module by the name the extension declares
(``Presence.pages``) and asks ``pages`` for its page set.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

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
