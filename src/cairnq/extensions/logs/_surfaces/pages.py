"""Attempt logs on the dashboard's task page: a Logs card under the task's cards, one
section per attempt that logged (``templates/logs_card.html``)."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import logs


class LogPages(PartsOnly):
    """The attempt logs' part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(logs(task.id), write=False)
        if not found:
            return TaskParts()
        return TaskParts(below=render("logs_card.html", view, logs=found))


def pages(host: Pages) -> LogPages:
    """The attempt logs' page set on the dashboard ``host``."""
    return LogPages(host)
