"""The attempt history on the dashboard's task page: the Timeline drawn from the
recorded attempts (``templates/history_timeline.html``) when they cover the task's
runs, else an Attempts card beside the timeline of the task's row
(``templates/history_attempts.html``)."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import attempts_if_ready
from .._panel import Event, attempt_timeline


class HistoryPages(PartsOnly):
    """The attempt history's part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(attempts_if_ready(task.id), write=False)
        if not found:
            return TaskParts()
        line = self.host.held(task)
        held = None if line is None else Event(task.updated_at_ms, *line)
        events = attempt_timeline(task, found, view.now_ms, held=held)
        if events is None:
            return TaskParts(beside_timeline=render("history_attempts.html", view, attempts=found))
        return TaskParts(timeline=render("history_timeline.html", view, task=task, events=events))


def pages(host: Pages) -> HistoryPages:
    """The attempt history's page set on the dashboard ``host``."""
    return HistoryPages(host)
