"""Task policies on the dashboard's task page: the expiry, run timeout and retry policy
its submit gave it, and ``expired`` for a task a policy ended
(``templates/policies_facts.html``)."""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, TaskParts, View, render
from ....models import Task
from .._ops import of


class PoliciesPages(PartsOnly):
    """The task policies' part of the task page."""

    async def task_card(self, task: Task, view: View) -> TaskParts:
        found = await self.host.dash.client._run(of(task.id), write=False)
        if found is None:
            return TaskParts()
        return TaskParts(facts=render("policies_facts.html", view, task=task, policy=found))


def pages(host: Pages) -> PoliciesPages:
    """The task policies' page set on the dashboard ``host``."""
    return PoliciesPages(host)
