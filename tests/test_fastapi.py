"""cairnq.contrib.fastapi and .starlette: an app submits, runs in-process, streams progress."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cairnq import CairnQ, Worker
from cairnq.contrib.fastapi import Client, RunningWorker, lifespan, task_events
from cairnq.contrib.starlette import get_client
from cairnq.errors import InvalidArgument, StoreClosed

from ._db import PluginDatabase

STEPS = (0.25, 0.5, 0.75)


class Paced:
    """Lets the handler report its next step only once the stream's reader saw the last."""

    def __init__(self) -> None:
        self.seen = {step: asyncio.Event() for step in STEPS}

    def saw(self, progress: float | None) -> None:
        if progress in self.seen:
            self.seen[progress].set()

    async def wait(self, progress: float) -> None:
        await asyncio.wait_for(self.seen[progress].wait(), 30)


def report_app(cq: CairnQ, paced: Paced) -> FastAPI:
    worker = Worker(cq, poll_interval_ms=20)

    @worker.task(name="report.build")
    async def build(ctx: Any, payload: Any) -> Any:
        for number, step in enumerate(STEPS, 1):
            await ctx.progress(step, f"part {number} of {len(STEPS)}")
            await paced.wait(step)
        return {"rows": payload["rows"]}

    app = FastAPI(lifespan=lifespan(client=cq, worker=worker))

    @app.post("/reports")
    async def make_report(cq: Client, running: RunningWorker) -> dict[str, Any]:
        task = await cq.submit("report.build", {"rows": 3})
        return {"id": task.id, "worker": running.worker_id if running else None}

    @app.get("/tasks/{task_id}/events")
    async def report_events(task_id: str, cq: Client) -> Response:
        return await task_events(cq, task_id, poll="20ms")

    return app


@pytest.fixture
async def served(fresh: PluginDatabase) -> AsyncIterator[tuple[str, Paced]]:
    """The report app served by uvicorn on a free local port, in this event loop."""
    cq = fresh.client()
    paced = Paced()
    server = uvicorn.Server(
        uvicorn.Config(report_app(cq, paced), lifespan="on", log_level="warning")
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not serving.done(), "the server stopped during start-up"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}", paced
    finally:
        server.should_exit = True
        await serving
        sock.close()
        await cq.close()


async def read_events(response: httpx.Response, paced: Paced) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            events.append((kind, data))
            if kind == "progress":
                paced.saw(data["progress"])
    return events


async def test_a_task_submitted_through_the_dependency_streams_each_progress_value_then_its_result(
    served: tuple[str, Paced],
) -> None:
    base, paced = served
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        submitted = (await http.post("/reports")).json()
        assert submitted["worker"] is not None
        async with http.stream("GET", f"/tasks/{submitted['id']}/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = await read_events(response, paced)
    progress = [data for kind, data in events if kind == "progress"]
    reported = [(d["progress"], d["message"]) for d in progress if d["progress"] is not None]
    assert reported == [(0.25, "part 1 of 3"), (0.5, "part 2 of 3"), (0.75, "part 3 of 3")]
    assert {d["id"] for d in progress} == {submitted["id"]}
    assert events[-1] == (
        "done",
        {
            "id": submitted["id"],
            "status": "succeeded",
            "result": {"rows": 3},
            "error": None,
            "progress": 1.0,
            "message": "part 3 of 3",
        },
    )
    assert [kind for kind, _ in events].count("done") == 1


async def test_the_events_endpoint_answers_404_for_a_task_that_does_not_exist(
    served: tuple[str, Paced],
) -> None:
    base, _ = served
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        response = await http.get("/tasks/task_01NOSUCHTASK000000000000000/events")
    assert response.status_code == 404
    assert "no task" in response.json()["error"]


def test_a_lifespan_without_a_url_a_client_or_a_worker_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="needs a database URL"):
        lifespan()


def test_a_lifespan_given_both_a_url_and_a_client_is_refused(tmp_path: Any) -> None:
    cq = CairnQ.sqlite(tmp_path / "a.db")
    with pytest.raises(InvalidArgument, match="not both"):
        lifespan(tmp_path / "b.db", client=cq)


def asgi(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


async def test_an_app_whose_in_process_worker_has_no_handlers_fails_at_start_up(
    cairnq_sqlite: str,
) -> None:
    worker = Worker(CairnQ.sqlite(cairnq_sqlite))
    app = FastAPI(lifespan=lifespan(worker=worker))
    with pytest.raises(InvalidArgument, match="no task handlers registered"):
        async with app.router.lifespan_context(app):
            pass


async def test_a_starlette_endpoint_reads_the_client_from_the_request(cairnq_sqlite: str) -> None:
    async def submit(request: Request) -> JSONResponse:
        task = await get_client(request).submit("email.send", {"to": "ada@example.com"})
        return JSONResponse({"id": task.id})

    app = Starlette(
        routes=[Route("/send", submit, methods=["POST"])], lifespan=lifespan(cairnq_sqlite)
    )
    async with app.router.lifespan_context(app), asgi(app) as http:
        body = (await http.post("/send")).json()
    async with CairnQ.sqlite(cairnq_sqlite) as cq:
        task = await cq.get(body["id"])
    assert task is not None
    assert (task.name, task.status, task.payload) == (
        "email.send",
        "queued",
        {"to": "ada@example.com"},
    )


async def test_an_endpoint_in_an_app_without_cairnqs_lifespan_gets_store_closed() -> None:
    async def submit(request: Request) -> JSONResponse:
        get_client(request)
        return JSONResponse({})

    app = Starlette(routes=[Route("/send", submit, methods=["POST"])])
    async with asgi(app) as http:
        with pytest.raises(StoreClosed, match="lifespan="):
            await http.post("/send")


async def test_after_shutdown_the_app_has_no_client(cairnq_sqlite: str) -> None:
    app = Starlette(lifespan=lifespan(cairnq_sqlite))
    async with app.router.lifespan_context(app):
        assert isinstance(app.state.cairnq, CairnQ)
    assert app.state.cairnq is None
