"""The dashboard's pause and resume buttons: the overview's flow column and its list of
paused task names (read here, shown by the overview's template), and the two actions.

The dashboard imports this module by the name the extension declares
(``Pauses.pages``) and asks ``pages`` for its page set, which has no page of its own
(no entry in the navigation bar): a GET of an action's address goes back to the
overview, where its buttons are.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

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
