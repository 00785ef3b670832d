"""Search on the dashboard: a task's tags and declared search fields on its page
(``templates/search_facts.html``); the task list's search box is the dashboard's
(``cairnq.dashboard``), which reads it with ``parse``."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import terms_of


class SearchPages(PartsOnly):
    """The search extension's part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(terms_of(task.id), write=False)
        if not found.tags and not found.fields:
            return TaskParts()
        return TaskParts(facts=render("search_facts.html", view, terms=found))


def pages(host: Pages) -> SearchPages:
    """The search extension's page set on the dashboard ``host``."""
    return SearchPages(host)
