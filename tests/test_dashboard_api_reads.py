"""The HTTP API's routes for what the dashboard's Search, Trends and Workers pages, the
task page's Logs, tags and Waits cards, its replay button and the overview's chart
show or do: each answer, its refusals as JSON, and the dashboard's read-only and CSRF
rules over the new actions.

Requests go through ``httpx.ASGITransport`` straight into the ASGI app, on both
backends; tasks run under a real worker where their logs or history matter.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cairnq import CairnQ
from cairnq.dashboard import create_app
from cairnq.extensions import Search
from cairnq.extensions.history import _hooks as _history
from cairnq.extensions.presence import _ops as _presence
from cairnq.extensions.steps._ops import record_step

from ._db import Database
from ._statements import sent_statements, silent_refusal
from .test_dashboard import WORKER, start
from .test_dashboard_api import TOKEN, api, error_of, http
from .test_dashboard_waits import _parked

FIELDS = {"customer": "metadata.customer", "order": "payload.order"}


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client(extensions=[Search(fields=FIELDS)]) as client:
        yield client


async def _ran(db: Database) -> dict[str, str]:
    """Tasks run by a worker: ``charge`` logs two lines and fails its first attempt, then
    succeeds; ``mail`` succeeds at once, ``broken`` fails for good. Their ids by name."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0)

    @worker.task
    async def charge(ctx: Any) -> Any:
        ctx.log(f"attempt {ctx.attempt}: calling the gateway")
        if ctx.attempt == 1:
            ctx.log("gateway said 503, Bearer abcdefghijklmnop1234 sent", level="warning")
            raise RuntimeError("gateway unavailable")
        return "ok"

    @worker.task
    async def mail(ctx: Any) -> Any:
        return None

    @worker.task
    async def broken(ctx: Any) -> Any:
        raise ValueError("card declined")

    async with db.client() as cq:
        ids = {
            "charge": (await cq.submit("charge", max_attempts=2)).id,
            "mail": (await cq.submit("mail")).id,
            "broken": (await cq.submit("broken", max_attempts=1)).id,
        }
    await worker.run(until_idle=True)
    return ids


# --- search ----------------------------------------------------------------------------------


async def test_search_finds_tasks_by_tag_and_declared_field_newest_first(cq: CairnQ) -> None:
    acme = [
        await cq.submit("bill", tags=["billing"], metadata={"customer": "acme"}) for _ in range(2)
    ]
    await cq.submit("bill", tags=["billing"], metadata={"customer": "globex"})
    await cq.submit("bill", metadata={"customer": "acme"})
    by_params = await api(
        cq, "GET", "/search", params={"tags": "billing", "where": '{"customer": "acme"}'}
    )
    by_text = await api(cq, "GET", "/search", params={"q": "tag:billing customer=acme"})
    expected = sorted((t.id for t in acme), reverse=True)
    assert [t["id"] for t in by_params.json()["tasks"]] == expected
    assert [t["id"] for t in by_text.json()["tasks"]] == expected


async def test_search_pages_with_next_before_until_the_last_page(cq: CairnQ) -> None:
    ids = [(await cq.submit("bill", tags=["eu"])).id for _ in range(3)]
    first = (await api(cq, "GET", "/search", params={"tags": "eu", "limit": 2})).json()
    before = first["next_before"]
    rest = (
        await api(cq, "GET", "/search", params={"tags": "eu", "limit": 2, "before": before})
    ).json()
    assert [t["id"] for t in first["tasks"] + rest["tasks"]] == sorted(ids, reverse=True)
    assert before == first["tasks"][-1]["id"]
    assert rest["next_before"] is None


async def test_search_finds_failed_tasks_by_error_text_and_time(db: Database, cq: CairnQ) -> None:
    ids = await _ran(db)
    since = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).isoformat()
    found = await api(
        cq, "GET", "/search", params={"q": "status:failed", "error": "DECLINED", "since": since}
    )
    later = await api(cq, "GET", "/search", params={"error": "declined", "until": "1h"})
    assert [t["id"] for t in found.json()["tasks"]] == [ids["broken"]]
    assert later.json()["tasks"] == []


async def test_search_leaves_payload_result_and_metadata_out(cq: CairnQ) -> None:
    await cq.submit("bill", {"order": "A-1"}, tags=["x"], metadata={"customer": "acme"})
    (task,) = (await api(cq, "GET", "/search", params={"where": '{"order": "A-1"}'})).json()[
        "tasks"
    ]
    assert {"payload", "result", "metadata"}.isdisjoint(task)


async def test_a_tasks_terms_are_its_tags_and_declared_fields(cq: CairnQ) -> None:
    task = await cq.submit("bill", {"order": 42}, tags=["eu", "billing"])
    terms = (await api(cq, "GET", f"/tasks/{task.id}/terms")).json()
    assert terms == {"tags": ["billing", "eu"], "fields": {"order": "42"}}
    assert error_of(await api(cq, "GET", "/tasks/task_nope/terms"))[0] == 404


async def test_a_tasks_declared_fields_are_shown_as_the_redact_hook_shows_its_payload(
    cq: CairnQ,
) -> None:
    def redact(field: str, value: Any, task: Any) -> Any:
        return "[hidden]" if task.queue == "billing" and field == "payload" else value

    app = create_app(cq, token=TOKEN, redact=redact)
    hidden = await cq.submit("bill", {"order": "A-1"}, queue="billing", tags=["eu"])
    shown = await cq.submit("bill", {"order": "B-2"}, queue="other")
    terms = (await api(cq, "GET", f"/tasks/{hidden.id}/terms", app=app)).json()
    other = (await api(cq, "GET", f"/tasks/{shown.id}/terms", app=app)).json()
    assert (terms, other["fields"]) == (
        {"tags": ["eu"], "fields": {"order": "[hidden]"}},
        {"order": "B-2"},
    )


@silent_refusal
@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"where": "customer=acme"}, "where must be a JSON object"),
        ({"where": "[1]"}, "where must be a JSON object"),
        ({"where": '{"cu stomer": "acme"}'}, "identifier"),
        ({"tags": "a b"}, "a tag is 1 to 64 characters"),
        ({"since": "soon"}, "since"),
        ({"since": "2026-12-01T00:00:00"}, "offset"),
        ({"since": "1h", "until": "2h"}, "since must come before until"),
        ({"q": "status:failed", "status": "failed"}, "status is given both in q"),
        ({"q": "customer=acme", "where": '{"customer": "x"}'}, "given both in q and in where"),
        ({"q": 'error:"open'}, "unbalanced quote"),
        ({"status": "lost"}, "status must be one of"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 1000"),
        ({"where": "[" * 1000 + "]" * 1000}, "where must be a JSON object"),
        ({"where": '{"customer": "a\\u0000"}'}, "without NUL"),
        ({"error": "card\x00"}, "without NUL"),
        ({"tags": "a\x00"}, "quotes or NUL"),
    ],
)
async def test_a_bad_search_is_a_400_saying_why_before_any_read(
    db: Database, cq: CairnQ, params: dict[str, str], words: str
) -> None:
    app = create_app(cq, token=TOKEN)
    await api(cq, "GET", "/queues", app=app)
    with sent_statements(db) as sent:
        response = await api(cq, "GET", "/search", app=app, params=params)
    status, message = error_of(response)
    assert status == 400 and words in message
    assert sent == []


# --- logs, trends, workers, activity ---------------------------------------------------------


async def test_a_tasks_logs_are_listed_per_attempt_with_secrets_masked(
    db: Database, cq: CairnQ
) -> None:
    ids = await _ran(db)
    logs = (await api(cq, "GET", f"/tasks/{ids['charge']}/logs")).json()["logs"]
    assert [(e["attempt"], e["dropped"]) for e in logs] == [(1, 0), (2, 0)]
    first = [(ln["level"], ln["message"], ln["source"]) for ln in logs[0]["lines"]]
    assert first[0] == ("info", "attempt 1: calling the gateway", "ctx.log")
    assert first[1][0] == "warning" and "gateway said 503" in first[1][1]
    assert "abcdefghijklmnop1234" not in first[1][1]


async def test_a_tasks_logs_are_filtered_to_one_attempt(db: Database, cq: CairnQ) -> None:
    ids = await _ran(db)
    second = (await api(cq, "GET", f"/tasks/{ids['charge']}/logs", params={"attempt": 2})).json()
    none = (await api(cq, "GET", f"/tasks/{ids['mail']}/logs")).json()
    assert [e["attempt"] for e in second["logs"]] == [2]
    assert none == {"logs": []}


async def test_the_task_page_masks_secrets_in_log_lines_too(db: Database, cq: CairnQ) -> None:
    ids = await _ran(db)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": ids["charge"]})).text
    assert "data-logs" in page and "gateway said 503" in page
    assert "abcdefghijklmnop1234" not in page


async def test_the_logs_of_an_unknown_task_are_a_404(cq: CairnQ) -> None:
    assert error_of(await api(cq, "GET", "/tasks/task_nope/logs")) == (404, "no task has this id")


async def test_trends_give_each_names_counts_failure_rate_and_series(
    db: Database, cq: CairnQ
) -> None:
    await _ran(db)
    answer = (await api(cq, "GET", "/trends", params={"since": "1d"})).json()
    by_key = {t["key"]: t for t in answer["trends"]}
    charge, broken = by_key["charge"], by_key["broken"]
    assert (answer["by"], answer["window_ms"], answer["bucket_ms"]) == (
        "name",
        86_400_000,
        3_600_000,
    )
    assert (charge["attempts"], charge["succeeded"], charge["failed"]) == (2, 1, 1)
    assert (broken["failure_rate"], len(broken["series"]["failed"])) == (1.0, 24)
    assert sum(charge["series"]["succeeded"]) == 1


async def test_trends_group_by_queue_with_the_buckets_asked(db: Database, cq: CairnQ) -> None:
    await _ran(db)
    answer = (await api(cq, "GET", "/trends", params={"by": "queue", "buckets": 7})).json()
    (queue,) = answer["trends"]
    assert (queue["key"], queue["attempts"], len(queue["series"]["succeeded"])) == ("default", 4, 7)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"by": "worker"}, "by must be 'name' or 'queue'"),
        ({"since": "10s"}, "since"),
        ({"since": "400d"}, "since"),
        ({"buckets": "401"}, "buckets must be a whole number from 1 to 400"),
    ],
)
async def test_bad_trends_options_are_a_400(cq: CairnQ, params: dict[str, str], words: str) -> None:
    status, message = error_of(await api(cq, "GET", "/trends", params=params))
    assert status == 400 and words in message


async def test_workers_are_listed_with_the_tasks_they_hold(cq: CairnQ) -> None:
    task = await cq.submit("long")
    await start(cq, "long")
    await cq.backend.arun(_presence.worker_start(WORKER, ["default"], "host-1", 42, 4), write=True)
    answer = (await api(cq, "GET", "/workers")).json()
    (worker,) = answer["workers"]
    assert (worker["worker_id"], worker["host"], worker["queues"]) == (
        WORKER,
        "host-1",
        ["default"],
    )
    assert [t["id"] for t in worker["running"]] == [task.id]
    assert answer["window_ms"] == 60_000


async def test_activity_counts_finished_tasks_per_queue(db: Database, cq: CairnQ) -> None:
    await _ran(db)
    answer = (await api(cq, "GET", "/activity", params={"window": "1h", "bucket": "10m"})).json()
    (queue,) = answer["queues"]
    assert (queue["queue"], queue["bucket_ms"], len(queue["succeeded"])) == ("default", 600_000, 6)
    assert (sum(queue["succeeded"]), sum(queue["failed"])) == (2, 1)
    bad = await api(cq, "GET", "/activity", params={"bucket": "fast"})
    assert error_of(bad)[0] == 400


# --- actions ---------------------------------------------------------------------------------


async def _failed_with_steps(cq: CairnQ) -> str:
    task = await cq.submit("bill", max_attempts=1)
    lease = await start(cq, "bill")
    await cq.backend.arun(record_step(lease, WORKER, "fetch", 1, '"A-1"'), write=True)
    await cq.backend.arun(record_step(lease, WORKER, "charge", 2, '"C-1"'), write=True)
    error = '{"type":"ValueError","code":"handler_error","message":"mail down"}'
    await cq.backend.arun(
        _history.fail(lease, WORKER, error, retryable=False, delay_ms=0, started=None), write=True
    )
    return task.id


async def test_retry_from_a_step_replays_the_task_keeping_the_steps_before_it(
    cq: CairnQ,
) -> None:
    task_id = await _failed_with_steps(cq)
    answer = (await api(cq, "POST", f"/tasks/{task_id}/retry", json={"from_step": "charge"})).json()
    steps = (await api(cq, "GET", f"/tasks/{task_id}/steps")).json()["steps"]
    assert (answer["outcome"], answer["task"]["status"]) == ("retried", "queued")
    assert [s["name"] for s in steps] == ["fetch"]


async def test_retry_from_a_step_never_recorded_is_a_400_and_changes_nothing(
    cq: CairnQ,
) -> None:
    task_id = await _failed_with_steps(cq)
    response = await api(cq, "POST", f"/tasks/{task_id}/retry", json={"from_step": "refund"})
    assert error_of(response)[0] == 400
    assert (await cq.get(task_id)).status == "failed"  # type: ignore[union-attr]


async def test_retry_from_a_step_of_a_queued_task_is_a_409(cq: CairnQ) -> None:
    task = await cq.submit("bill")
    response = await api(cq, "POST", f"/tasks/{task.id}/retry", json={"from_step": "charge"})
    assert error_of(response) == (409, "only a failed or canceled task can be retried")


async def test_an_event_is_sent_to_the_tasks_wait(cq: CairnQ) -> None:
    task_id = await _parked(cq, "refund:42")
    answer = (
        await api(
            cq,
            "POST",
            f"/tasks/{task_id}/events",
            json={"key": "refund:42", "payload": {"approved": True}},
        )
    ).json()
    [wait] = await cq.events.waits(task_id)
    assert answer["delivered_to"] == [task_id]
    assert (wait.state, wait.payload) == ("delivered", {"approved": True})


async def test_an_event_sent_twice_with_one_id_is_delivered_once(cq: CairnQ) -> None:
    task_id = await _parked(cq, "refund:42")
    body = {"key": "refund:42", "payload": {"n": 1}, "id": "refund-42-approval"}
    first = (await api(cq, "POST", f"/tasks/{task_id}/events", json=body)).json()
    again = (await api(cq, "POST", f"/tasks/{task_id}/events", json={**body, "payload": 2})).json()
    [wait] = await cq.events.waits(task_id)
    assert again == first and first["delivered_to"] == [task_id]
    assert wait.payload == {"n": 1}


@silent_refusal
async def test_an_event_without_a_key_is_a_400_and_sends_nothing(db: Database, cq: CairnQ) -> None:
    task_id = await _parked(cq, "k")
    app = create_app(cq, token=TOKEN)
    await api(cq, "GET", "/queues", app=app)
    with sent_statements(db) as sent:
        response = await api(cq, "POST", f"/tasks/{task_id}/events", app=app, json={"key": 1})
    assert error_of(response)[0] == 400
    assert sent == []


async def test_a_read_only_dashboard_refuses_replay_and_events_with_403(cq: CairnQ) -> None:
    task_id = await _failed_with_steps(cq)
    app = create_app(cq, token=TOKEN, read_only=True)
    replay = await api(cq, "POST", f"/tasks/{task_id}/retry", app=app, json={"from_step": "fetch"})
    sent = await api(cq, "POST", f"/tasks/{task_id}/events", app=app, json={"key": "k"})
    assert [error_of(r)[0] for r in (replay, sent)] == [403, 403]
    assert (await cq.get(task_id)).status == "failed"  # type: ignore[union-attr]


async def test_an_event_sent_with_the_session_cookie_needs_the_csrf_header(cq: CairnQ) -> None:
    task_id = await _parked(cq, "k")
    app = create_app(cq, token=TOKEN)
    async with http(app) as client:
        await client.get("/", params={"token": TOKEN})
        refused = await client.post(f"/api/tasks/{task_id}/events", json={"key": "k"})
        csrf = (await client.get("/api/csrf")).json()["csrf"]
        done = await client.post(
            f"/api/tasks/{task_id}/events", json={"key": "k"}, headers={"X-CSRF-Token": csrf}
        )
    assert error_of(refused)[0] == 403
    assert done.json()["delivered_to"] == [task_id]


async def test_the_new_reads_need_the_token(cq: CairnQ) -> None:
    task = await cq.submit("a")
    async with http(create_app(cq, token=TOKEN)) as client:
        answers = [
            await client.get(path)
            for path in ("/api/search", f"/api/tasks/{task.id}/logs", "/api/trends", "/api/workers")
        ]
    assert [error_of(r)[0] for r in answers] == [401, 401, 401, 401]


async def test_the_openapi_document_describes_the_new_routes(cq: CairnQ) -> None:
    paths = (await api(cq, "GET", "/openapi.json")).json()["paths"]
    assert paths["/search"]["get"]["operationId"] == "searchTasks"
    assert {p["name"] for p in paths["/search"]["get"]["parameters"]} >= {
        "q", "tags", "where", "error", "since", "until", "before", "limit",
    }  # fmt: skip
    assert paths["/tasks/{task_id}/logs"]["get"]["operationId"] == "listTaskLogs"
    assert {"/trends", "/workers", "/activity", "/tasks/{task_id}/events"} <= set(paths)
    retry = paths["/tasks/{task_id}/retry"]["post"]["requestBody"]
    assert "from_step" in retry["content"]["application/json"]["schema"]["properties"]
