"""Durable waits on the dashboard: the task page's Waits card (``templates/waits_card.html``),
and its action, which sends an event to a task's parked wait (``/events/send``: the
form's key, task id and JSON payload, and the send id drawn when the page was shown,
so a form posted twice delivers its event once).

The dashboard imports this module by the name the extension declares (``Waits.pages``).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...._json import parse_input
from ....dashboard._http import Handler, incoming, redirect
from ....dashboard._pages import Pages, TaskParts, View, render
from ....errors import InvalidArgument
from ....models import Task
from .._ops import waits_if_ready

log = logging.getLogger("cairnq.dashboard")


class WaitPages:
    """The Waits card of the task page and its send action; no page of its own."""

    nav = None
    actions = ("/events/send",)
    """The paths that take a POST; the dashboard checks read-only, origin and CSRF first."""

    def __init__(self, host: Pages) -> None:
        self.host = host

    def routes(self) -> list[tuple[str, Handler]]:
        """A GET of the action's address: back to the overview."""
        return [("/events/send", self.back)]

    async def back(self, request: Request) -> Response:
        return redirect(request, "/")

    async def task_card(self, task: Task, view: View) -> TaskParts:
        client = self.host.dash.client
        codec = client.codec

        def decode(text: str) -> Any:
            return codec.shown(codec.decode(text, what="event payload"), what="event payload")

        found = await client._run(waits_if_ready(task.id, decode), write=False)
        if not found:
            return TaskParts()
        send_id = f"dashboard-{secrets.token_hex(12)}"
        return TaskParts(
            cards=render("waits_card.html", view, waits=found, task_id=task.id, send_id=send_id)
        )

    async def action(self, request: Request, path: str) -> Response:
        """Send the form's event to the form's task, then back to the task's page."""
        form = incoming(request).form
        key, task_id = form.get("key", ""), form.get("task_id", "")
        send_id = form.get("send_id") or None
        try:
            payload = parse_input(form.get("payload", "null") or "null", what="payload")
            await self.host.dash.client.events.send(key, payload, task_id=task_id, id=send_id)
        except InvalidArgument as exc:
            return self.host._error(request, 400, "Bad request", str(exc))
        self.host.dash.reads.clear()
        log.info("dashboard: sent an event on %s to task %s", key, task_id)
        return redirect(request, "/task", {"id": task_id})


def pages(host: Pages) -> WaitPages:
    """The waits' page set on the dashboard ``host``."""
    return WaitPages(host)
