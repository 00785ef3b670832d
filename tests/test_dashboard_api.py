"""The dashboard's HTTP API: each endpoint's answer, its refusals as JSON, and the
dashboard's token, CSRF and read-only rules over it.

Requests go through ``httpx.ASGITransport`` straight into the ASGI app, on both
backends; tasks reach ``running`` and ``failed`` through the operations a worker uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from cairnq import CairnQ
from cairnq.dashboard import ApiRequest, ApiRoute, Pages, PartsOnly, create_app
from cairnq.extensions import Extension
from cairnq.extensions.history import _hooks as _history
from cairnq.extensions.steps._ops import record_step
from cairnq.limits import Limit
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements, silent_refusal
from .test_dashboard import WORKER, fail, start

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "http://dash.test"


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def http(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


async def api(
    cq: CairnQ, method: str, path: str, *, app: Any = None, **options: Any
) -> httpx.Response:
    """One request to ``/api<path>`` with the bearer token (of a dashboard with it)."""
    app = app or create_app(cq, token=TOKEN)
    headers = {**AUTH, **options.pop("headers", {})}
    async with http(app) as client:
        return await client.request(method, f"/api{path}", headers=headers, **options)


def error_of(response: httpx.Response) -> tuple[int, str]:
    """``(status, message)`` of a JSON error answer, checking the two agree."""
    assert response.headers["content-type"] == "application/json"
    found = response.json()["error"]
    assert found["status"] == response.status_code
    return response.status_code, found["message"]


# --- reads -----------------------------------------------------------------------------------


async def test_queues_give_counts_the_due_backlog_and_the_oldest_due_age(db: Database) -> None:
    clock = FakeClock()
    async with db.client(clock=clock) as cq:
        await cq.submit("a", queue="work")
        clock.advance(3_000)
        await cq.submit("a", queue="work")
        await cq.submit("a", queue="work", delay_ms=60_000)
        answer = (await api(cq, "GET", "/queues")).json()
    (queue,) = answer["queues"]
    assert queue["queue"] == "work"
    assert queue["counts"]["queued"] == 3
    assert (queue["due"], queue["oldest_due_age_ms"]) == (2, 3_000)


async def test_one_queue_is_read_by_name_with_zeros_when_it_holds_no_task(cq: CairnQ) -> None:
    await cq.submit("a", queue="work")
    work = (await api(cq, "GET", "/queues/work")).json()
    empty = (await api(cq, "GET", "/queues/idle")).json()
    assert (work["due"], work["counts"]["queued"]) == (1, 1)
    assert empty == {
        "queue": "idle",
        "counts": dict.fromkeys(["queued", "running", "succeeded", "failed", "canceled"], 0),
        "due": 0,
        "oldest_due_age_ms": None,
    }


async def test_the_task_list_filters_and_pages_with_the_cursor(cq: CairnQ) -> None:
    ids = [(await cq.submit("a", {"i": i}, queue="q")).id for i in range(3)]
    await cq.submit("a", queue="other")
    first = (await api(cq, "GET", "/tasks", params={"queue": "q", "limit": 2})).json()
    cursor = first["next_cursor"]
    rest = (await api(cq, "GET", "/tasks", params={"queue": "q", "cursor": cursor})).json()
    listed = [t["id"] for t in first["tasks"] + rest["tasks"]]
    assert listed == sorted(ids, reverse=True)
    assert rest["next_cursor"] is None


async def test_the_task_list_leaves_payload_result_and_metadata_out(cq: CairnQ) -> None:
    await cq.submit("a", {"big": "x" * 100})
    (task,) = (await api(cq, "GET", "/tasks")).json()["tasks"]
    assert {"payload", "result", "metadata"}.isdisjoint(task)
    assert task["status"] == "queued"


async def test_a_task_is_shown_with_its_payload_redacted(cq: CairnQ) -> None:
    task = await cq.submit("signup", {"email": "ada@example.com", "password": "hunter2"})
    shown = (await api(cq, "GET", f"/tasks/{task.id}")).json()
    assert shown["id"] == task.id
    assert shown["payload"]["email"] == "ada@example.com"
    assert shown["payload"]["password"] != "hunter2"


async def test_a_value_a_redact_hook_returns_that_json_cannot_hold_is_shown_as_text(
    cq: CairnQ,
) -> None:
    task = await cq.submit("a", {"n": 1})
    app = create_app(cq, token=TOKEN, redact=lambda field, value, task: {1, 2})
    shown = (await api(cq, "GET", f"/tasks/{task.id}", app=app)).json()
    assert shown["payload"] == "{1, 2}"


async def test_an_unknown_task_is_a_404_json_error(cq: CairnQ) -> None:
    response = await api(cq, "GET", "/tasks/task_nope")
    assert error_of(response) == (404, "no task has this id")


async def test_attempts_and_steps_list_what_the_task_recorded(cq: CairnQ) -> None:
    task = await cq.submit("a", max_attempts=2)
    first = await start(cq, "a")
    await cq.backend.arun(record_step(first, WORKER, "fetch", 1, '"A-1"'), write=True)
    error = '{"type":"ValueError","code":"handler_error","message":"disk on fire"}'
    await cq.backend.arun(
        _history.fail(first, WORKER, error, retryable=True, delay_ms=0, started=None), write=True
    )
    attempts = (await api(cq, "GET", f"/tasks/{task.id}/attempts")).json()["attempts"]
    steps = (await api(cq, "GET", f"/tasks/{task.id}/steps")).json()["steps"]
    assert [(a["attempt"], a["outcome"], a["error"]["message"]) for a in attempts] == [
        (1, "retry", "disk on fire")
    ]
    assert [(s["name"], s["seq"], s["result"]) for s in steps] == [("fetch", 1, "A-1")]


async def test_schedules_are_listed_and_shown_without_their_payload(cq: CairnQ) -> None:
    await cq.schedules.add("nightly", "report", every="1h", payload={"token": "s"})
    listed = (await api(cq, "GET", "/schedules")).json()["schedules"]
    shown = (await api(cq, "GET", "/schedules/nightly")).json()
    assert [s["name"] for s in listed] == ["nightly"]
    assert shown["schedule"]["task"] == "report" and "payload" not in shown["schedule"]
    assert shown["history"] == []


async def test_limits_are_listed_with_their_use(cq: CairnQ) -> None:
    await cq.limits.set(Limit.concurrency(2, queue="mail"))
    (limit,) = (await api(cq, "GET", "/limits")).json()["limits"]
    assert (limit["limit"]["amount"], limit["limit"]["target"]) == (2, "mail")
    assert "key_function" not in limit["limit"]


async def test_a_batch_is_shown_with_its_members(cq: CairnQ) -> None:
    batch = await cq.batches.submit([("a", {}), ("a", {})])
    shown = (await api(cq, "GET", f"/batches/{batch.id}")).json()
    assert (shown["batch"]["id"], shown["batch"]["total"]) == (batch.id, 2)
    assert len(shown["members"]) == 2
    assert error_of(await api(cq, "GET", "/batches/batch_nope"))[0] == 404


async def test_the_openapi_document_describes_every_route_under_the_mount_point(
    cq: CairnQ,
) -> None:
    document = (await api(cq, "GET", "/openapi.json")).json()
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": "/api"}]
    assert {"/tasks", "/tasks/{task_id}/cancel", "/batches/{batch_id}", "/openapi.json"} <= set(
        document["paths"]
    )
    assert document["paths"]["/tasks/{task_id}/retry"]["post"]["operationId"] == "retryTask"


# --- actions ---------------------------------------------------------------------------------


async def test_cancel_ends_a_queued_task_and_says_so(cq: CairnQ) -> None:
    task = await cq.submit("a")
    answer = (await api(cq, "POST", f"/tasks/{task.id}/cancel")).json()
    assert (answer["outcome"], answer["task"]["status"]) == ("canceled", "canceled")


async def test_cancel_of_a_finished_task_is_a_409(cq: CairnQ) -> None:
    task = await cq.submit("a")
    await cq.cancel(task.id)
    response = await api(cq, "POST", f"/tasks/{task.id}/cancel")
    assert error_of(response)[0] == 409


async def test_retry_requeues_a_failed_task_resetting_attempts_when_asked(cq: CairnQ) -> None:
    task = await fail(cq, "a")
    response = await api(cq, "POST", f"/tasks/{task.id}/retry", json={"reset_attempt": True})
    answer = response.json()
    assert (answer["outcome"], answer["task"]["status"]) == ("retried", "queued")
    assert answer["task"]["attempt"] == 0


async def test_retry_of_a_queued_task_is_a_409(cq: CairnQ) -> None:
    task = await cq.submit("a")
    response = await api(cq, "POST", f"/tasks/{task.id}/retry")
    assert error_of(response) == (409, "only a failed or canceled task can be retried")


async def test_purge_deletes_finished_tasks_matching_the_filter(cq: CairnQ) -> None:
    canceled = await cq.submit("a", queue="old")
    await cq.cancel(canceled.id)
    kept = await cq.submit("a", queue="old")
    answer = (await api(cq, "POST", "/purge", json={"older_than": "0s", "queue": "old"})).json()
    assert answer == {"purged": 1, "ids": [canceled.id], "more": False}
    assert await cq.get(kept.id) is not None


async def test_bulk_retry_requeues_the_failed_tasks_of_the_filtered_list(cq: CairnQ) -> None:
    mail = [await fail(cq, "a", queue="mail") for _ in range(2)]
    other = await fail(cq, "a", queue="other")
    answer = (await api(cq, "POST", "/tasks/retry", json={"queue": "mail"})).json()
    assert sorted(answer["done"]) == sorted(t.id for t in mail)
    assert (answer["skipped"], answer["more"]) == (0, False)
    assert (await cq.get(other.id)).status == "failed"  # type: ignore[union-attr]


async def test_bulk_cancel_stops_at_the_limit_and_says_more_match(cq: CairnQ) -> None:
    for _ in range(3):
        await cq.submit("a", queue="mail")
    answer = (await api(cq, "POST", "/tasks/cancel", json={"queue": "mail", "limit": 2})).json()
    assert (len(answer["done"]), answer["more"]) == (2, True)
    left = (await api(cq, "GET", "/tasks", params={"status": "queued"})).json()["tasks"]
    assert len(left) == 1


async def test_bulk_cancel_refuses_a_status_it_does_not_apply_to(cq: CairnQ) -> None:
    response = await api(cq, "POST", "/tasks/cancel", json={"status": "failed"})
    assert error_of(response) == (400, "status must be queued or running to cancel")


async def test_a_queue_and_a_task_name_are_paused_and_resumed(cq: CairnQ) -> None:
    paused = (await api(cq, "POST", "/queues/mail/pause")).json()
    named = (await api(cq, "POST", "/task-names/report/pause")).json()
    listed = (await api(cq, "GET", "/pauses")).json()["pauses"]
    resumed = (await api(cq, "POST", "/queues/mail/resume")).json()
    again = (await api(cq, "POST", "/queues/mail/resume")).json()
    assert (paused["scope"], paused["target"], paused["paused_by"]) == ("queue", "mail", "api")
    assert (named["scope"], named["target"]) == ("name", "report")
    assert sorted((p["scope"], p["target"]) for p in listed) == [
        ("name", "report"),
        ("queue", "mail"),
    ]
    assert (resumed, again) == ({"resumed": True}, {"resumed": False})


async def test_a_schedule_is_paused_and_resumed(cq: CairnQ) -> None:
    await cq.schedules.add("nightly", "report", every="1h")
    paused = (await api(cq, "POST", "/schedules/nightly/pause")).json()
    resumed = (await api(cq, "POST", "/schedules/nightly/resume")).json()
    assert (paused["paused"], resumed["paused"]) == (True, False)
    assert error_of(await api(cq, "POST", "/schedules/nope/pause"))[0] == 404


# --- bad input -------------------------------------------------------------------------------


@silent_refusal
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "0"}, "limit must be a whole number from 1 to 1000"),
        ({"limit": "ten"}, "limit must be a whole number from 1 to 1000"),
        ({"status": "lost"}, "status must be one of queued, running, succeeded, failed, canceled"),
        ({"colour": "red"}, "unknown query parameter 'colour' for this path"),
    ],
)
async def test_a_bad_task_list_query_is_a_400_naming_the_parameter(
    db: Database, cq: CairnQ, params: dict[str, str], message: str
) -> None:
    app = create_app(cq, token=TOKEN)
    await api(cq, "GET", "/queues", app=app)
    with sent_statements(db) as sent:
        response = await api(cq, "GET", "/tasks", app=app, params=params)
    assert error_of(response) == (400, message)
    assert sent == []


@silent_refusal
@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        ("{", {"content-type": "application/json"}, 400, "the request body is not valid JSON"),
        ("[1]", {"content-type": "application/json"}, 400, "must be a JSON object"),
        ("reset_attempt=1", {"content-type": "text/plain"}, 415, "must be application/json"),
        ('{"reset_attempt": "yes"}', {"content-type": "application/json"}, 400, "true or false"),
    ],
)
async def test_a_bad_action_body_is_refused_with_a_clear_json_error(
    db: Database, cq: CairnQ, body: str, headers: dict[str, str], status: int, message: str
) -> None:
    task = await cq.submit("a")
    app = create_app(cq, token=TOKEN)
    await api(cq, "GET", "/queues", app=app)
    with sent_statements(db) as sent:
        response = await api(
            cq, "POST", f"/tasks/{task.id}/retry", app=app, content=body, headers=headers
        )
    found_status, found = error_of(response)
    assert found_status == status and message in found
    assert sent == []


async def test_a_purge_without_older_than_deletes_nothing(cq: CairnQ) -> None:
    task = await cq.submit("a")
    await cq.cancel(task.id)
    response = await api(cq, "POST", "/purge", json={"status": "canceled"})
    assert error_of(response)[0] == 400
    assert await cq.get(task.id) is not None


async def test_a_bad_duration_in_a_purge_is_a_400(cq: CairnQ) -> None:
    response = await api(cq, "POST", "/purge", json={"older_than": "soon"})
    assert error_of(response)[0] == 400


@silent_refusal
async def test_an_unknown_api_path_and_a_wrong_method_are_json_errors(
    db: Database, cq: CairnQ
) -> None:
    app = create_app(cq, token=TOKEN)
    with sent_statements(db) as sent:
        missing = await api(cq, "GET", "/nope", app=app)
        wrong = await api(cq, "POST", "/queues", app=app)
        put = await api(cq, "PUT", "/tasks", app=app)
    assert error_of(missing)[0] == 404
    assert error_of(wrong) == (405, "this path takes GET")
    assert error_of(put)[0] == 405
    assert sent == []


# --- token, CSRF and read-only ---------------------------------------------------------------


@silent_refusal
async def test_without_the_token_the_api_answers_401_as_json(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq, token=TOKEN)
    with sent_statements(db) as sent:
        async with http(app) as client:
            read = await client.get("/api/tasks")
            action = await client.post(f"/api/tasks/{task.id}/cancel")
            wrong = await client.get("/api/tasks", headers={"Authorization": "Bearer nope-nope"})
    assert [error_of(r)[0] for r in (read, action, wrong)] == [401, 401, 401]
    assert read.headers["www-authenticate"] == "Bearer"
    assert sent == []


async def test_a_read_only_dashboard_refuses_every_action_with_403(cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq, token=TOKEN, read_only=True)
    listed = await api(cq, "GET", "/tasks", app=app)
    canceled = await api(cq, "POST", f"/tasks/{task.id}/cancel", app=app)
    paused = await api(cq, "POST", "/queues/default/pause", app=app)
    assert listed.status_code == 200
    assert [error_of(r)[0] for r in (canceled, paused)] == [403, 403]
    assert (await cq.get(task.id)).status == "queued"  # type: ignore[union-attr]


async def test_an_action_with_the_session_cookie_needs_the_csrf_header(cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq, token=TOKEN)
    async with http(app) as client:
        await client.get("/", params={"token": TOKEN})
        refused = await client.post(f"/api/tasks/{task.id}/cancel")
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        done = await client.post(f"/api/tasks/{task.id}/cancel", headers={"X-CSRF-Token": csrf})
    assert error_of(refused)[0] == 403
    assert done.json()["outcome"] == "canceled"


async def test_an_action_on_a_dashboard_without_a_token_needs_the_csrf_header(
    cq: CairnQ,
) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    async with http(app) as client:
        refused = await client.post(f"/api/tasks/{task.id}/cancel")
        forged = await client.post(
            f"/api/tasks/{task.id}/cancel", headers={"X-CSRF-Token": "1.abc"}
        )
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        done = await client.post(f"/api/tasks/{task.id}/cancel", headers={"X-CSRF-Token": csrf})
    assert [error_of(r)[0] for r in (refused, forged)] == [403, 403]
    assert done.status_code == 200


@silent_refusal
async def test_a_cross_site_action_is_refused_even_with_the_token(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq, token=TOKEN)
    with sent_statements(db) as sent:
        response = await api(
            cq,
            "POST",
            f"/tasks/{task.id}/cancel",
            app=app,
            headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        )
    assert error_of(response) == (403, "cross-site request refused")
    assert sent == []


# --- routes of an extension outside cairnq ---------------------------------------------------


class _EchoPages(PartsOnly):
    def api_routes(self) -> Sequence[ApiRoute]:
        async def echo(request: ApiRequest) -> Any:
            return {
                "word": request.path["word"],
                "queues": len(await request.dash.client.overview()),
            }

        return [ApiRoute("GET", "/echo/{word}", echo, "echoWord", "Echo a word", "echo")]


def pages(host: Pages) -> _EchoPages:
    return _EchoPages(host)


class Echo(Extension):
    name = "echo"
    pages = __name__
    # Its templates (none) would be in the ``templates/`` folder of this package.
    package = "tests"


async def test_an_extensions_page_set_adds_its_api_routes_and_their_document(
    cq: CairnQ,
) -> None:
    app = create_app(cq, token=TOKEN, extensions=[Echo()])
    answer = (await api(cq, "GET", "/echo/hello", app=app)).json()
    document = (await api(cq, "GET", "/openapi.json", app=app)).json()
    assert answer == {"word": "hello", "queues": 0}
    assert document["paths"]["/echo/{word}"]["get"]["operationId"] == "echoWord"
