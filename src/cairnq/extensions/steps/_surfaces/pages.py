"""The durable steps on the dashboard's task page: the task's recorded steps, in
``seq`` order (``templates/steps_card.html``)."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import opened, steps_if_ready


class StepPages(PartsOnly):
    """The steps' part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        client = self.host.dash.client
        found = await client._run(steps_if_ready(task.id), write=False)
        if not found:
            return TaskParts()
        found = opened(client.codec, found, shown=True)
        return TaskParts(cards=render("steps_card.html", view, steps=found))


def pages(host: Pages) -> StepPages:
    """The steps' page set on the dashboard ``host``."""
    return StepPages(host)
