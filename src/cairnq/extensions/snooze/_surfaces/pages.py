"""Snoozing on the dashboard's task page: how many times the task snoozed, for how
long the last time, and when it is due again (``templates/snooze_facts.html``)."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import snoozes_if_ready


class SnoozePages(PartsOnly):
    """Snoozing's part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(snoozes_if_ready(task.id), write=False)
        if found is None:
            return TaskParts()
        return TaskParts(facts=render("snooze_facts.html", view, task=task, snoozes=found))


def pages(host: Pages) -> SnoozePages:
    """Snoozing's page set on the dashboard ``host``."""
    return SnoozePages(host)
