"""The dashboard's batch page (``/batch?id=...``): a batch's state, counts, progress,
callbacks and its first members with their recorded outcomes. Its template is
``templates/batch.html``.

The dashboard imports this module by the name the extension declares
(``Batches.pages``) and asks ``pages`` for its page set; the page has no entry in
the navigation bar (``cairnq batch`` prints a batch's id and state too).

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiError, ApiRequest, ApiRoute, to_json
from ....dashboard._api_routes import (
    INTEGER,
    ROWS_PARAM,
    STRING,
    array,
    nullable,
    obj,
)
from ....dashboard._http import Handler, incoming
from ....dashboard._pages import Pages, render
from ....errors import InvalidArgument
from ....kernel import views as _reads
from .. import _ops

SHOWN_MEMBERS = 500


class BatchPages:
    """The batch page, rendered with the dashboard's ``Pages``; it has no action."""

    nav = None
    actions: tuple[str, ...] = ()

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.dash = pages.dash

    def routes(self) -> list[tuple[str, Handler]]:
        """Each page by path (the dashboard wraps each in its endpoint)."""
        return [("/batch", self.batch)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """A batch's read in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def batch(self, request: Request) -> Response:
        """A batch: its counts and callbacks, and its first members."""
        view = self.pages.view(request)
        batch_id = incoming(request).query.get("id", "")
        try:
            found = await self.dash.client._run(_ops.status(batch_id), write=False)
        except InvalidArgument:
            found = None
        if found is None:
            return self.pages._error(
                request, 404, "Not found", f"No batch has the id {batch_id!r}."
            )
        members = await self.dash.client._run(
            _ops.members(found.id, limit=SHOWN_MEMBERS), write=False
        )
        live = render("batch.html", view, batch=found, members=members, shown=SHOWN_MEMBERS)
        return self.pages._page(
            request, title=found.id, active="", body="", region=live, final=found.state == "done"
        )

    async def action(self, request: Request, path: str) -> Response:
        """Never reached: the page set declares no action."""
        return self.pages._error(request, 404, "Not found", path)


def pages(host: Pages) -> BatchPages:
    """The batches' page set for the dashboard's ``host``."""
    return BatchPages(host)


# --- the HTTP API --------------------------------------------------------------------------

BATCH = obj(
    {
        "id": STRING,
        "state": STRING,
        "total": INTEGER,
        "succeeded": INTEGER,
        "failed": INTEGER,
        "canceled": INTEGER,
        "purged": INTEGER,
        "pending": INTEGER,
        "callbacks": {"type": "object", "additionalProperties": STRING},
        "submitted": array(STRING),
        "created_at_ms": INTEGER,
        "closed_at_ms": nullable("integer"),
        "done_at_ms": nullable("integer"),
    }
)


async def batch(request: ApiRequest) -> Any:
    found = await request.dash.client.batches.status(request.path["batch_id"])
    if found is None:
        raise ApiError(404, "no batch has this id")
    members = await request.dash.client.batches.members(
        found.id, limit=request.integer("limit", 100, 1, _reads.MAX_PAGE)
    )
    return {"batch": to_json(found), "members": to_json(list(members))}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/batches/{batch_id}",
        batch,
        "getBatch",
        "A batch's state, counts and callbacks, and its first members",
        "batches",
        params=(ROWS_PARAM,),
        response=obj({"batch": BATCH, "members": array({"type": "object"})}),
        statuses=(404,),
    ),
)
