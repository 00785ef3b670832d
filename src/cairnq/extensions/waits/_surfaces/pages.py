"""Durable waits on the dashboard: the task page's Waits card (``templates/waits_card.html``),
and its action, which sends an event to a task's parked wait (``/events/send``: the
form's key, task id and JSON payload, and the send id drawn when the page was shown,
so a form posted twice delivers its event once).

The dashboard imports this module by the name the extension declares (``Waits.pages``).
Its page set also serves the action in the dashboard's HTTP API (``api_routes``:
``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...._json import parse_input
from ....dashboard._api import ApiError, ApiRequest, ApiRoute, load_task
from ....dashboard._api_routes import ANY, INTEGER, STRING, array, obj
from ....dashboard._http import Handler, incoming, redirect
from ....dashboard._pages import Pages, TaskParts, View, render
from ....errors import InvalidArgument, SchemaIncomplete
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

    def api_routes(self) -> Sequence[ApiRoute]:
        """The send action in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

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
        events = self.host.dash.client.events
        try:
            payload = parse_input(form.get("payload", "null") or "null", what="payload")
            try:
                await events.send(key, payload, task_id=task_id, id=send_id)
            except SchemaIncomplete:
                # The form's id only guards a double post; a database without the
                # (optional) send ids takes the send without it.
                await events.send(key, payload, task_id=task_id)
        except InvalidArgument as exc:
            return self.host._error(request, 400, "Bad request", str(exc))
        self.host.dash.reads.clear()
        log.info("dashboard: sent an event on %s to task %s", key, task_id)
        return redirect(request, "/task", {"id": task_id})


def pages(host: Pages) -> WaitPages:
    """The waits' page set on the dashboard ``host``."""
    return WaitPages(host)


# --- the HTTP API --------------------------------------------------------------------------


async def send_event(request: ApiRequest) -> Any:
    key = request.body.get("key")
    if not isinstance(key, str) or not key.strip():
        raise ApiError(400, "key is required: the event key the task waits on (a string)")
    task = await load_task(request)
    send_id = request.body.get("id")
    sent = await request.dash.client.events.send(
        key, request.body.get("payload"), task_id=task.id, id=send_id
    )
    log.info("dashboard api: sent an event to task %s", task.id)
    return {"seq": sent.seq, "delivered_to": list(sent.delivered_to), "kept": sent.kept}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "POST",
        "/tasks/{task_id}/events",
        send_event,
        "sendTaskEvent",
        "Send an event to the task's waits on key (ctx.wait_for): the dashboard's Waits card. "
        "A send with an id is delivered once: a repeat returns the first send's answer",
        "tasks",
        body=obj(
            {
                "key": {"type": "string", "minLength": 1},
                "payload": ANY,
                "id": {"type": "string", "minLength": 1, "maxLength": 1000},
            },
            required=["key"],
        ),
        response=obj({"seq": INTEGER, "delivered_to": array(STRING), "kept": {"type": "boolean"}}),
        statuses=(404,),
    ),
)
