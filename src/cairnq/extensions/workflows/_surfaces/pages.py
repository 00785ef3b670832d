"""The workflows on the dashboard: no page of their own, the graph card of the task
page and the timeline's line of a parked task.

The card draws the task's workflow (``_graph``'s layout, ``templates/_workflow.html``,
styled by ``static/workflows.css``) when the task has a parent, children,
dependencies or dependents, and the database has the workflow tables. The dashboard
imports this module by the name the extension declares (``Workflows.pages``) and
asks ``pages`` for its page set.
"""

from __future__ import annotations

from ....dashboard._pages import Pages, PartsOnly, View, render
from ....models import Task
from .. import _ops as _workflows
from .._graph import Picture, belongs_to_workflow, picture


class WorkflowPages(PartsOnly):
    """The workflows' part of the dashboard, rendered with the dashboard's ``Pages``."""

    async def task_card(self, task: Task, view: View) -> str:
        """The graph of ``task``'s workflow, or nothing for a task outside any."""
        found = await self._picture(task)
        return "" if found is None else render("workflow_card.html", view, pic=found)

    def held(self, task: Task) -> tuple[str, str] | None:
        """The timeline's line of a parked task: queued until its dependencies or
        children end."""
        if task.run_at_ms != _workflows.PARKED_RUN_AT_MS:
            return None
        return ("parked", "waits for its dependencies or children")

    async def _picture(self, task: Task) -> Picture | None:
        """The graph of ``task``'s workflow, or ``None``: no workflow tables, or a task
        without parent, children, dependencies or dependents."""
        run = self.host.dash.client._run
        if not await run(_workflows.workflows_ready(), write=False):
            return None
        found = await run(_workflows.workflow(task), write=False)
        if not belongs_to_workflow(found, task.id):
            return None
        return picture(found, task.id)


def pages(host: Pages) -> WorkflowPages:
    """The workflows' page set on the dashboard ``host``."""
    return WorkflowPages(host)
