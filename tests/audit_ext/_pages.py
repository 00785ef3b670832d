# audit_ext/_pages.py
"""The dashboard's Audit page and its part of the task page; their template is
``templates/audit.html``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from cairnq.dashboard import Pages, TaskParts, render

from . import entries


class AuditPages:
    """The page set the dashboard asks ``pages`` for: a nav entry, one page and a part
    of the task page."""

    nav = ("audit", "/audit", "Audit")
    actions: tuple[str, ...] = ()

    def __init__(self, host: Pages) -> None:
        self.host = host

    def routes(self) -> list[tuple[str, object]]:
        return [("/audit", self.audit)]

    async def audit(self, request: Request) -> Response:
        rows = await self.host.dash.client.backend.arun(entries(), write=False)
        body = render("audit.html", self.host.view(request), rows=rows)
        return self.host.page(request, title="Audit", active="audit", body=body)

    async def task_card(self, task: Any, view: Any) -> TaskParts:
        """The task page's part: the task's rows, below the task's own cards."""
        rows = await self.host.dash.client.backend.arun(entries(task.id), write=False)
        return TaskParts(below=render("audit.html", view, rows=rows))

    async def action(self, request: Request, path: str) -> Response:
        raise LookupError(path)  # never called: the page set has no actions


def pages(host: Pages) -> AuditPages:
    return AuditPages(host)
