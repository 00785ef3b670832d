"""Search on the dashboard: the Search page (a search box, its syntax shown, and the
tasks found: ``templates/search.html``) and a task's tags and declared search fields
on its page (``templates/search_facts.html``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._pages import Pages, TaskParts, View, render
from ....errors import InvalidArgument, SchemaIncomplete
from ....models import Task
from .._model import SYNTAX, query_of
from .._ops import find, terms_of


class SearchPages:
    """The search extension's page set: its page and its part of the task page."""

    nav = ("search", "/search", "Search")
    actions: tuple[str, ...] = ()

    def __init__(self, host: Pages) -> None:
        self.host = host

    def routes(self) -> list[tuple[str, object]]:
        return [("/search", self.search)]

    async def search(self, request: Request) -> Response:
        """``/search?q=...``: the tasks the search box's text finds, newest first."""
        text = request.query_params.get("q", "").strip()
        before = request.query_params.get("before") or None
        view = self.host.view(request)
        client = self.host.dash.client
        tasks: list[Task] = []
        error = ""
        status = 200
        if text:
            try:
                query = query_of(
                    text,
                    before=before,
                    limit=self.host.dash.page_size,
                    now_ms=client._clock().now_ms(),
                )
                tasks = await client._run(find(query), write=False)
            except (InvalidArgument, SchemaIncomplete) as exc:
                error, status = str(exc), 400
        body = render(
            "search.html", view, q=text, syntax=SYNTAX, tasks=tasks, error=error, before=before,
            more=len(tasks) == self.host.dash.page_size,
        )  # fmt: skip
        return self.host.page(request, title="Search", active="search", body=body, status=status)

    async def task_card(self, task: Task, view: View) -> TaskParts:
        """The task page's Details lines: the task's tags and declared search fields."""
        found = await self.host.dash.client._run(terms_of(task.id), write=False)
        if not found.tags and not found.fields:
            return TaskParts()
        return TaskParts(facts=render("search_facts.html", view, terms=found))

    async def action(self, request: Request, path: str) -> Response:
        return await self.host.not_found(request)


def pages(host: Pages) -> SearchPages:
    """The search extension's page set on the dashboard ``host``."""
    return SearchPages(host)
