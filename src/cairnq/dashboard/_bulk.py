"""The dashboard's purge and its bulk retry and cancel: the confirmation pages that
count what a filter matches, and the actions that act on no more than was counted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from .._clock import SYSTEM_CLOCK
from ..backends import clock_of
from ..durations import parse_duration
from ..errors import InvalidArgument
from ..kernel import views as _reads
from ..models import STATUSES, TERMINAL_STATUSES, Task
from ._host import PageHost
from ._http import incoming, redirect
from ._view import View, render

log = logging.getLogger("cairnq.dashboard")

PURGE_BATCH = 1000
PURGE_MAX_BATCHES = 100
# The most one purge from the dashboard deletes; the page counts one more to say "over".
PURGE_MAX = PURGE_BATCH * PURGE_MAX_BATCHES
PURGE_FIELDS = ("status", "queue", "name", "older_than")
# What the purge page proposes: tasks finished a week ago or more.
PURGE_DEFAULT_AGE = "7d"
# Bulk retry and cancel: the most tasks one confirmation acts on, and how many
# single-task operations run at once.
BULK_MAX = 1000
BULK_CHUNK = 50

# The statuses each bulk action applies to, as the protocol allows them.
BULK_STATUSES = {"retry": ("failed", "canceled"), "cancel": ("queued", "running")}
TASK_FILTERS = ("status", "queue", "name", "key", "correlation_id", "id_prefix", "root_id")
FILTER_LABELS = {
    "status": "Status",
    "queue": "Queue",
    "name": "Name",
    "key": "Key",
    "correlation_id": "Correlation id",
    "id_prefix": "Id prefix",
    "root_id": "Root",
}


class Host(Protocol):
    """What the purge and bulk pages need of the dashboard's ``Pages``."""

    dash: PageHost

    def view(self, request: Request) -> View: ...

    def _page(
        self, request: Request, *, title: str, active: str, body: str, status: int = 200
    ) -> Response: ...

    def _error(self, request: Request, status: int, title: str, message: str) -> Response: ...

    def _forbidden(self, request: Request, message: str) -> Response: ...


class Bulk:
    """The purge and bulk pages and actions, rendered with the dashboard's ``Pages``."""

    def __init__(self, host: Host) -> None:
        self.host = host

    async def confirm_purge(self, request: Request) -> Response:
        if self.host.dash.read_only:
            return self.host._forbidden(request, "This dashboard is read-only.")
        query = incoming(request).query
        filters = {k: query[k].strip() for k in PURGE_FIELDS if query.get(k, "").strip()}
        if filters.get("status") not in TERMINAL_STATUSES:
            filters.pop("status", None)
        filters.setdefault("older_than", PURGE_DEFAULT_AGE)
        return await self._purge_preview(request, filters)

    async def _purge_preview(
        self, request: Request, filters: Mapping[str, str], error: str | None = None
    ) -> Response:
        """The purge page for ``filters``, with how many tasks match them now."""
        try:
            older = parse_duration(filters.get("older_than", ""))
            count = await self.host.dash.client._run(
                _reads.purge_count(
                    older_than_ms=older,
                    status=filters.get("status"),
                    queue=filters.get("queue"),
                    name=filters.get("name"),
                    cap=PURGE_MAX + 1,
                ),
                write=False,
            )
        except InvalidArgument as exc:
            return self._purge_page(request, filters, str(exc), 400)
        status = 200 if error is None else 400
        return self._purge_page(
            request,
            filters,
            error,
            status,
            count=count,
            any_age=older == 0,
            counted_at=self._now_ms(),
        )

    def _now_ms(self) -> int:
        return (clock_of(self.host.dash.client.backend) or SYSTEM_CLOCK).now_ms()

    def _purge_page(
        self,
        request: Request,
        filters: Mapping[str, str],
        error: str | None,
        status: int,
        *,
        count: int | None = None,
        any_age: bool = False,
        counted_at: int | None = None,
    ) -> Response:
        body = render(
            "confirm_purge.html",
            self.host.view(request),
            filters=filters,
            error=error,
            count=count,
            most=PURGE_MAX,
            any_age=any_age,
            counted_at=counted_at,
        )
        return self.host._page(request, title="Purge", active="tasks", body=body, status=status)

    async def confirm_bulk_retry(self, request: Request) -> Response:
        return await self._confirm_bulk(request, "retry")

    async def confirm_bulk_cancel(self, request: Request) -> Response:
        return await self._confirm_bulk(request, "cancel")

    async def _confirm_bulk(self, request: Request, action: str) -> Response:
        if self.host.dash.read_only:
            return self.host._forbidden(request, "This dashboard is read-only.")
        query = incoming(request).query
        filters = {k: query[k].strip() for k in TASK_FILTERS if query.get(k, "").strip()}
        view = self.host.view(request)
        try:
            found = await self._bulk_matches(filters, action, BULK_MAX + 1)
        except InvalidArgument as exc:
            body = render("confirm_bulk.html", view, action=action, filters=filters, error=str(exc))
            return self.host._page(
                request, title=f"{action} tasks", active="tasks", body=body, status=400
            )
        wanted = filters.get("status")
        counts = dict.fromkeys((s for s in BULK_STATUSES[action] if wanted in (None, s)), 0)
        for task in found:
            counts[task.status] = counts.get(task.status, 0) + 1
        body = render(
            "confirm_bulk.html",
            view,
            action=action,
            filters=filters,
            error="",
            count=len(found),
            counts=counts,
            most=BULK_MAX,
            labels=FILTER_LABELS,
        )
        return self.host._page(request, title=f"{action} tasks", active="tasks", body=body)

    async def _bulk_matches(
        self, filters: Mapping[str, str], action: str, limit: int
    ) -> list[Task]:
        """Up to ``limit`` tasks of the filtered list that ``action`` applies to, newest
        first within each status; each status through the listing's status index."""
        wanted = filters.get("status")
        statuses = [s for s in BULK_STATUSES[action] if wanted in (None, s)]
        if wanted is not None and wanted not in STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(STATUSES)}")
        found: list[Task] = []
        for status in statuses:
            cursor: str | None = None
            while len(found) < limit:
                page = await self.host.dash.client.list_page(
                    status=status,
                    queue=filters.get("queue"),
                    name=filters.get("name"),
                    key=filters.get("key"),
                    root_id=filters.get("root_id"),
                    correlation_id=filters.get("correlation_id"),
                    id_prefix=filters.get("id_prefix"),
                    cursor=cursor,
                    limit=min(_reads.MAX_PAGE, limit - len(found)),
                )
                found += page.tasks
                cursor = page.next_cursor
                if cursor is None:
                    break
        return found[:limit]

    async def purge(self, request: Request) -> Response:
        form = incoming(request).form
        filters = {k: form.get(k, "").strip() for k in PURGE_FIELDS}
        shown = {k: v for k, v in filters.items() if v}
        client = self.host.dash.client
        try:
            if not filters["older_than"]:
                raise InvalidArgument(
                    "say how long ago the tasks must have finished, e.g. 7d; nothing was deleted"
                )
            older = parse_duration(filters["older_than"])
            if older == 0 and form.get("any_age") != "1":
                return await self._purge_preview(
                    request,
                    shown,
                    "0s purges every finished task, even one that finished a moment ago: "
                    "tick the box to confirm. Nothing was deleted.",
                )
            status = filters["status"] or None
            if status is not None and status not in TERMINAL_STATUSES:
                raise InvalidArgument("status must be succeeded, failed or canceled")
            # What the page counted, no more: the cutoff stays where it was when counted
            # (tasks finishing since are not old enough) and the deletes stop at the count.
            older += self._since(form.get("counted_at", ""))
            most = _whole(form.get("count", ""), PURGE_MAX)
            total = 0
            more = False
            for batch in range(PURGE_MAX_BATCHES):
                limit = min(PURGE_BATCH, most - total)
                if limit <= 0:
                    break
                ids = await client.purge(
                    older_than_ms=older,
                    status=status,
                    queue=filters["queue"] or None,
                    name=filters["name"] or None,
                    limit=limit,
                )
                total += len(ids)
                if len(ids) < limit:
                    break
                more = batch == PURGE_MAX_BATCHES - 1
        except InvalidArgument as exc:
            return self._purge_page(request, shown, str(exc), 400)
        log.info("dashboard: purged %d tasks", total)
        query: dict[str, Any] = {"purged": total}
        if more:
            query["more"] = 1
        return redirect(request, "/tasks", query)

    def _since(self, counted_at: str) -> int:
        """Milliseconds since the page's count (``counted_at``), 0 when absent or odd."""
        if not counted_at.isdigit():
            return 0
        return max(0, self._now_ms() - int(counted_at))

    async def act(self, request: Request, action: str) -> Response:
        """Retry or cancel, one task at a time, the tasks of the filtered list it applies to."""
        form = incoming(request).form
        filters = {k: form[k].strip() for k in TASK_FILTERS if form.get(k, "").strip()}
        client = self.host.dash.client
        reset = form.get("reset_attempt") == "1"
        try:
            found = await self._bulk_matches(filters, action, BULK_MAX + 1)
        except InvalidArgument as exc:
            return self.host._error(request, 400, "Bad request", str(exc))
        # No more than the page counted and the button said.
        most = _whole(form.get("count", ""), BULK_MAX)
        chosen, more = found[:most], len(found) > most
        done = skipped = requested = 0
        for start in range(0, len(chosen), BULK_CHUNK):
            chunk = chosen[start : start + BULK_CHUNK]
            if action == "retry":
                calls = [client.retry(t.id, reset_attempt=reset) for t in chunk]
            else:
                calls = [client.cancel(t.id) for t in chunk]
            # None: the task left the status the action applies to since it was listed.
            for result in await asyncio.gather(*calls):
                if result is None:
                    skipped += 1
                elif result.is_running:
                    requested += 1
                else:
                    done += 1
        log.info(
            "dashboard: bulk %s: %d done, %d cancel requested, %d skipped",
            action,
            done,
            requested,
            skipped,
        )
        query: dict[str, Any] = dict(filters, bulk=action, done=done)
        if skipped:
            query["skipped"] = skipped
        if requested:
            query["requested"] = requested
        if more:
            query["more"] = 1
        return redirect(request, "/tasks", query)


def bulk_notice(action: str, query: Mapping[str, str]) -> str:
    """The notice after a bulk action, from the counts its redirect carries."""
    done = int(query.get("done", "0"))
    tasks = f"{done} task{'' if done == 1 else 's'}"
    text = f"Queued {tasks} again." if action == "retry" else f"Canceled {tasks}."
    requested = query.get("requested", "")
    if requested.isdigit() and int(requested):
        text += f" Cancel requested for {requested} running: each stops at its next check."
    skipped = query.get("skipped", "")
    if skipped.isdigit() and int(skipped):
        text += f" {skipped} had changed state meanwhile and were left alone."
    if query.get("more") == "1":
        text += f" More match: {action} again."
    return text


def _whole(text: str, most: int) -> int:
    """A whole number from a form field, at most ``most``; ``most`` when absent or odd."""
    return min(int(text), most) if text.isdigit() else most
