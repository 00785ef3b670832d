"""The dashboard's batch page (``/batch?id=...``): a batch's state, counts, progress,
callbacks and its first members with their recorded outcomes. Its template is
``templates/batch.html``.

The dashboard imports this module by the name the extension declares
(``Batches.pages``) and asks ``pages`` for its page set; the page has no entry in
the navigation bar (``cairnq batch`` prints a batch's id and state too).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ....dashboard._http import Handler, incoming
from ....dashboard._pages import Pages, render
from ....errors import InvalidArgument
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
