"""The durable steps on the dashboard's task page: the task's recorded steps, in
``seq`` order (``templates/steps_card.html``), and on a failed or canceled task a
"Replay from here" button per step, which queues the task again from that step
(``cq.retry(id, from_step=...)``, docs/replay.md).

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, load_task, to_json
from ....dashboard._api_routes import array, obj
from ....dashboard._http import incoming, redirect
from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....errors import InvalidArgument
from ....models import Task
from .._ops import opened, steps_if_ready

log = logging.getLogger("cairnq.dashboard")

REPLAY = "/steps/replay"


class StepPages(PartsOnly):
    """The steps' part of the task page, and its replay action."""

    actions = (REPLAY,)

    def api_routes(self) -> Sequence[ApiRoute]:
        """The task's steps in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def task_card(self, task: Task, view: View) -> TaskParts:
        client = self.host.dash.client
        found = await client._run(steps_if_ready(task.id), write=False)
        if not found:
            return TaskParts()
        found = opened(client.codec, found, shown=True)
        replay = task.status in ("failed", "canceled") and not view.read_only
        body = render("steps_card.html", view, steps=found, task=task, replay=replay)
        return TaskParts(cards=body)

    async def action(self, request: Request, path: str) -> Response:
        """Queue the form's task again from the form's step, then back to its page."""
        form = incoming(request).form
        task_id, step = form.get("id", ""), form.get("from_step", "")
        try:
            await self.host.dash.client.retry(task_id, from_step=step)
        except InvalidArgument as exc:
            return self.host._error(request, 400, "Bad request", str(exc))
        self.host.dash.lists.clear()
        self.host.dash.reads.clear()
        log.info("dashboard: replay %s from step %r", task_id, step)
        return redirect(request, "/task", {"id": task_id, "done": "retried"})


def pages(host: Pages) -> StepPages:
    """The steps' page set on the dashboard ``host``."""
    return StepPages(host)


# --- the HTTP API --------------------------------------------------------------------------


async def steps(request: ApiRequest) -> Any:
    task = await load_task(request)
    found = await request.dash.client._run(steps_if_ready(task.id), write=False)
    if found is None:
        raise ApiError(503, "the steps' migration is not applied to this database")
    shown = []
    for step in found:
        row = to_json(step)
        row["result"] = request.redact("result", step.result, task)
        shown.append(row)
    return {"steps": shown}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/tasks/{task_id}/steps",
        steps,
        "listSteps",
        "The task's recorded durable steps",
        "tasks",
        response=obj({"steps": array({"type": "object"})}),
        statuses=(404,),
    ),
)
