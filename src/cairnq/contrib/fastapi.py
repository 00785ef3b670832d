"""cairnq in a FastAPI application: the client as a dependency.

``Client`` is ``Annotated[CairnQ, Depends(get_client)]``: an endpoint parameter
of that type receives the client that ``lifespan`` opened. ``lifespan``,
``follow`` and ``task_events`` are ``cairnq.contrib.starlette``'s (FastAPI is
Starlette underneath).

Example::

    from fastapi import FastAPI
    from cairnq.contrib.fastapi import Client, lifespan, task_events

    app = FastAPI(lifespan=lifespan("sqlite:///tasks.db", worker=worker))

    @app.post("/reports")
    async def make_report(cq: Client) -> dict[str, str]:
        task = await cq.submit("report.build", {"month": "2025-01"})
        return {"id": task.id}

    @app.get("/tasks/{task_id}/events")
    async def report_events(task_id: str, cq: Client):
        return await task_events(cq, task_id)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..client import CairnQ
from ..worker import Worker
from .starlette import STATE_KEY, follow, get_client, get_worker, lifespan, task_events

__all__ = [
    "STATE_KEY",
    "Client",
    "RunningWorker",
    "follow",
    "get_client",
    "get_worker",
    "lifespan",
    "task_events",
]

#: An endpoint parameter receiving the open client (``StoreClosed`` without cairnq's lifespan).
Client = Annotated[CairnQ, Depends(get_client)]

#: An endpoint parameter receiving the in-process worker, or ``None`` when none runs.
RunningWorker = Annotated[Worker | None, Depends(get_worker)]
