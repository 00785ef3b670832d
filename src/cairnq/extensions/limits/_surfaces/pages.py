"""The dashboard's limits page: each stored limit, its use now and the tasks waiting on
it. Its template is in ``templates/`` beside this module.

The dashboard imports this module by the name the extension declares
(``Limits.pages``) and asks ``pages`` for its page set.

Its page set also serves the feature's routes of the dashboard's HTTP API
(``api_routes``: ``API_ROUTES``, at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._api import ApiRequest, ApiRoute, to_json
from ....dashboard._api_routes import array, obj
from ....dashboard._http import Handler
from ....dashboard._pages import Pages, render
from ....errors import SchemaIncomplete
from .. import _ops as _limits

# The limits page shows this many keys of each limit (the busiest, or the emptiest buckets).
KEYS_SHOWN = 5


class LimitPages:
    """The limits page, rendered with the dashboard's ``Pages``; it has no action."""

    nav = ("limits", "/limits", "Limits")
    actions: tuple[str, ...] = ()

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.dash = pages.dash

    def routes(self) -> list[tuple[str, Handler]]:
        """Each page by path (the dashboard wraps each in its endpoint)."""
        return [("/limits", self.limits)]

    def api_routes(self) -> Sequence[ApiRoute]:
        """The limits' read in the HTTP API (``API_ROUTES``)."""
        return API_ROUTES

    async def limits(self, request: Request) -> Response:
        view = self.pages.view(request)
        client = self.dash.client

        async def load() -> Any:
            return await client._run(_limits.usage(), write=False)

        try:
            usages = await self.dash.reads.get("limits", load)
        except SchemaIncomplete as exc:
            live = render("limits.html", view, error=str(exc), usages=[])
        else:
            live = render("limits.html", view, error="", usages=usages, keys_shown=KEYS_SHOWN)
        return self.pages._page(request, title="Limits", active="limits", body="", region=live)

    async def action(self, request: Request, path: str) -> Response:
        """Never reached: the page declares no action."""
        return self.pages._error(request, 404, "Not found", path)


def pages(host: Pages) -> LimitPages:
    """The limits' page set for the dashboard's ``host``."""
    return LimitPages(host)


# --- the HTTP API --------------------------------------------------------------------------


async def limits(request: ApiRequest) -> Any:
    found = await request.dash.client._run(_limits.usage(), write=False)
    return {"limits": to_json(list(found))}


API_ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/limits",
        limits,
        "listLimits",
        "Every concurrency and rate limit with its use now",
        "limits",
        response=obj({"limits": array({"type": "object"})}),
    ),
)
