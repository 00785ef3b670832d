"""Search on the dashboard: the Search page (a search box, its syntax shown, and the
tasks found: ``templates/search.html``) and a task's tags and declared search fields
on its page (``templates/search_facts.html``).

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiRequest, ApiRoute, Param, load_task, task_json
from ....dashboard._api_routes import STRING, TASK, array, nullable, obj
from ....dashboard._host import PageHost
from ....dashboard._pages import Pages, TaskParts, View, render
from ....errors import InvalidArgument, SchemaIncomplete
from ....models import STATUSES, Task
from .._model import MAX_LIMIT, SYNTAX, Query, check_query, parse, query_of
from .._ops import TaskTerms, find, terms_of


class SearchPages:
    """The search extension's page set: its page and its part of the task page."""

    nav = ("search", "/search", "Search")
    actions: tuple[str, ...] = ()

    def __init__(self, host: Pages) -> None:
        self.host = host

    def routes(self) -> list[tuple[str, object]]:
        return [("/search", self.search)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The search and a task's terms in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

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
        shown = TaskTerms(found.tags, shown_fields(self.host.dash, found, task))
        return TaskParts(facts=render("search_facts.html", view, terms=shown))

    async def action(self, request: Request, path: str) -> Response:
        return await self.host.not_found(request)


def shown_fields(dash: PageHost, found: TaskTerms, task: Task) -> dict[str, Any]:
    """The declared fields' values as the ``redact`` hook lets them be shown: a field
    may be read from the payload, so each value goes through the hook as ``"payload"``."""
    return {name: dash.safe_redact("payload", value, task) for name, value in found.fields.items()}


def pages(host: Pages) -> SearchPages:
    """The search extension's page set on the dashboard ``host``."""
    return SearchPages(host)


# --- the HTTP API --------------------------------------------------------------------------

# The filters a search takes both as words of ``q`` and as query parameters.
_WORD_FILTERS = ("error", "status", "queue", "name", "since", "until")


def _moment(text: str, what: str) -> Any:
    """``since``/``until`` of the API: a duration ago (``1d``), or an ISO 8601 time with
    its offset (``2026-12-01T00:00:00Z``).

    Raises:
        InvalidArgument: a naive time; a bad duration is refused by ``check_query``.
    """
    if text[:1].isdigit() and "-" in text and len(text) >= 10:
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgument(
                f"{what} must be a duration ago (1d) or an ISO 8601 time with its offset "
                "(2026-12-01T00:00:00Z)"
            ) from None
        if moment.utcoffset() is None:
            raise InvalidArgument(f"{what} must carry its offset (Z or +01:00): a naive time")
        return moment
    return text


def _where(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidArgument(
            'where must be a JSON object of search fields to values: {"customer": "acme"}'
        ) from None
    if not isinstance(found, dict):
        raise InvalidArgument(
            'where must be a JSON object of search fields to values: {"customer": "acme"}'
        )
    return found


def api_query(request: ApiRequest, now_ms: int) -> Query:
    """The search a request asks for: the words of ``q`` (the search box's syntax) and
    the filters given as parameters, together; a filter given both ways is refused,
    except tags and fields, which add up.

    Raises:
        InvalidArgument: a bad filter, a filter given twice.
    """
    given: dict[str, Any] = dict.fromkeys(("tags", "where", *_WORD_FILTERS))
    text = request.text("q")
    if text is not None:
        given.update(parse(text))
    for name in _WORD_FILTERS:
        value = request.text(name)
        if value is None:
            continue
        if given[name] is not None:
            raise InvalidArgument(f"{name} is given both in q and as a parameter")
        given[name] = value
    for name in ("since", "until"):
        if isinstance(given[name], str):
            given[name] = _moment(given[name], name)
    tags = request.text("tags")
    if tags is not None:
        given["tags"] = [*(given["tags"] or ()), *(t.strip() for t in tags.split(","))]
    where = request.text("where")
    if where is not None:
        fields = dict(given["where"] or {})
        for field, value in _where(where).items():
            if field in fields:
                raise InvalidArgument(f"the field {field!r} is given both in q and in where")
            fields[field] = value
        given["where"] = fields
    limit = request.integer("limit", request.dash.page_size, 1, MAX_LIMIT)
    return check_query(**given, before=request.text("before"), limit=limit, now_ms=now_ms)


async def search_api(request: ApiRequest) -> Any:
    client = request.dash.client
    query = api_query(request, client._clock().now_ms())
    tasks = await client._run(find(query), write=False)
    return {
        "tasks": [task_json(t, request, light=True) for t in tasks],
        "next_before": tasks[-1].id if tasks and len(tasks) == query.limit else None,
    }


async def terms_api(request: ApiRequest) -> Any:
    task = await load_task(request)
    found = await request.dash.client._run(terms_of(task.id), write=False)
    return {"tags": list(found.tags), "fields": shown_fields(request.dash, found, task)}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/search",
        search_api,
        "searchTasks",
        "Tasks by tag, declared search field, error text and time, newest first "
        "(the dashboard's Search page, cq.search.find and cq.search.query)",
        "search",
        params=(
            Param("q", STRING, f"the search box's text: {SYNTAX}"),
            Param("tags", STRING, "tags a task must all hold, comma-separated: billing,eu"),
            Param(
                "where",
                {**STRING, "examples": ['{"customer": "acme"}']},
                "declared search fields and their values, as a JSON object",
            ),
            Param("error", STRING, "text the task's error holds, in any case"),
            Param("status", {"type": "string", "enum": list(STATUSES)}, "the task's status"),
            Param("queue", STRING, "the task's queue"),
            Param("name", STRING, "the task's name"),
            Param(
                "since",
                {**STRING, "examples": ["1d", "2026-12-01T00:00:00Z"]},
                "created at or after: a duration ago, or an ISO 8601 time with its offset",
            ),
            Param("until", STRING, "created before: a duration ago, or an ISO 8601 time"),
            Param("before", STRING, "next_before of the previous page"),
            Param(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                "the most tasks (default the dashboard's page size)",
            ),
        ),
        response=obj({"tasks": array(TASK), "next_before": nullable("string")}),
    ),
    ApiRoute(
        "GET",
        "/tasks/{task_id}/terms",
        terms_api,
        "getTaskTerms",
        "The task's tags and the declared search fields its submit recorded",
        "search",
        response=obj(
            {
                "tags": array(STRING),
                "fields": {"type": "object", "additionalProperties": STRING},
            }
        ),
        statuses=(404,),
    ),
)
