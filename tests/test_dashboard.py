"""The dashboard over HTTP: pages, escaping, actions, CSRF, read-only mode, tokens, mounting.

Requests go through ``httpx.ASGITransport`` straight into the ASGI app, on both
backends. Tasks reach ``running`` and ``failed`` through the operations a worker
uses, so every page shows a state the test set up exactly.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import httpx
import pytest

from cairnq import CairnQ, InvalidArgument, SyncCairnQ, Task, kernel
from cairnq.cli import main
from cairnq.dashboard import create_app, default_redact, mount
from cairnq.dashboard._app import DashboardApp
from cairnq.extensions.history import _hooks as _history
from cairnq.extensions.steps._ops import record_step
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import reads_proven_elsewhere, sent_anywhere, sent_statements, silent_refusal
from .test_cli import db_args, one_error_line, run

WORKER = "worker_dashboard_test"
TOKEN = "t0ken-for-tests"
BASE = "http://dash.test"


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def http(app: Any, base_url: str = BASE) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


async def start(cq: CairnQ, name: str, queue: str = "default") -> Lease:
    op = kernel.claim([queue], WORKER, 60_000, [kernel.Draw([name], 1)], 100)
    rows = await cq.backend.arun(op, write=True)
    assert len(rows) == 1
    return Lease.of(rows[0])


async def fail(
    cq: CairnQ,
    name: str,
    message: str = "it broke",
    *,
    queue: str = "default",
    retryable: bool = False,
    max_attempts: int = 3,
    details: dict[str, Any] | None = None,
) -> Task:
    """Submit a task of ``name`` and fail its first run, as a worker would: for good
    unless ``retryable`` with attempts left."""
    await cq.submit(name, queue=queue, max_attempts=max_attempts)
    lease = await start(cq, name, queue)
    return await fail_run(cq, lease, message, retryable=retryable, details=details)


async def fail_run(
    cq: CairnQ,
    lease: Lease,
    message: str = "it broke",
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
) -> Task:
    """Fail the claimed run ``lease`` as a worker would."""
    envelope = {
        "type": "ValueError",
        "code": "handler_error",
        "message": message,
        "retryable": retryable,
        "details": {"hint": "check input"} if details is None else details,
    }
    op = kernel.fail(lease, WORKER, json.dumps(envelope), retryable=retryable, delay_ms=0)
    await cq.backend.arun(op, write=True)
    task = await cq.get(lease.id)
    assert task is not None
    return task


def csrf_from(page: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match, "no CSRF field on the page"
    return match.group(1)


def task_ids(page: str) -> list[str]:
    return re.findall(r'data-task="([^"]+)"', page)


# --- pages -----------------------------------------------------------------------------------


async def test_the_overview_shows_each_queues_counts(cq: CairnQ) -> None:
    await cq.submit("a", queue="emails")
    await cq.submit("a", queue="emails")
    await fail(cq, "b")
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    emails = re.search(r"<tr><th scope=\"row\"><a[^>]*>emails</a></th>(.*?)</tr>", page)
    assert emails is not None
    assert 'href="/tasks?queue=emails&amp;status=queued">2</a>' in emails.group(1)
    assert 'href="/tasks?queue=default&amp;status=failed">1</a>' in page


async def test_the_overview_flags_queued_tasks_no_live_worker_serves(cq: CairnQ) -> None:
    await cq.submit("emial.send")
    await cq.submit("emial.send")
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    assert (
        "Unserved: emial.send on default: 2 queued, no live worker serves the queue</div>" in page
    )


async def test_the_overview_charts_the_last_hour(cq: CairnQ) -> None:
    await fail(cq, "b")
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    assert '<svg class="chart"' in page
    assert '<rect class="bad"' in page


async def test_the_task_list_filters_by_status(cq: CairnQ) -> None:
    queued = await cq.submit("a")
    failed = await fail(cq, "b")
    async with http(create_app(cq)) as client:
        page = (await client.get("/tasks", params={"status": "failed"})).text
    assert task_ids(page) == [failed.id]
    assert queued.id not in page


async def test_the_task_list_filters_by_id_prefix(cq: CairnQ) -> None:
    tasks = [await cq.submit("a") for _ in range(3)]
    async with http(create_app(cq)) as client:
        page = (await client.get("/tasks", params={"id_prefix": tasks[1].id})).text
    assert task_ids(page) == [tasks[1].id]


async def test_the_task_list_pages_through_an_older_link(cq: CairnQ) -> None:
    ids = [(await cq.submit("a")).id for _ in range(5)]
    async with http(create_app(cq, page_size=2)) as client:
        seen: list[str] = []
        url: str | None = "/tasks"
        while url:
            page = (await client.get(url)).text
            seen += task_ids(page)
            older = re.search(r'rel="next" href="([^"]+)"', page)
            url = older.group(1).replace("&amp;", "&") if older else None
    assert sorted(seen) == sorted(ids)
    assert len(seen) == 5


@silent_refusal
async def test_a_bad_filter_is_a_400_with_the_reason(db: Database, cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        with sent_statements(db) as sent:
            response = await client.get("/tasks", params={"status": "bogus"})
    assert sent == []
    assert response.status_code == 400
    assert "status must be one of" in response.text


async def test_a_list_row_shows_attempts_progress_and_message(cq: CairnQ) -> None:
    task = await cq.submit("a")
    lease = await start(cq, "a")
    await cq.backend.arun(kernel.progress(lease, WORKER, 0.4, "halfway-ish"), write=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/tasks")).text
    row = re.search(rf'<tr data-task="{task.id}".*?</tr>', page)
    assert row is not None
    assert 'value="0.4000"' in row.group(0)
    assert "halfway-ish" in row.group(0)
    assert ">1/3<" in row.group(0)


async def test_the_task_page_shows_payload_result_key_and_timeline(cq: CairnQ) -> None:
    task = await cq.submit("a", {"to": "ada@example.com"}, key="welcome:ada")
    lease = await start(cq, "a")
    await cq.backend.arun(kernel.complete(lease, WORKER, json.dumps({"sent": 42})), write=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "ada@example.com" in page
    assert "&quot;sent&quot;: 42" in page
    assert "welcome:ada" in page
    assert 'class="timeline"' in page and ">succeeded<" in page


async def test_the_task_page_shows_each_attempt_with_its_error_and_the_steps(
    cq: CairnQ,
) -> None:
    task = await cq.submit("a", max_attempts=2)
    first = await start(cq, "a")
    await cq.backend.arun(record_step(first, WORKER, "fetch-invoice", 1, '"A-1"'), write=True)
    error = '{"type":"ValueError","code":"handler_error","message":"disk on fire"}'
    await cq.backend.arun(
        _history.fail(first, WORKER, error, retryable=True, delay_ms=0, started=None), write=True
    )
    second = await start(cq, "a")
    await cq.backend.arun(_history.complete(second, WORKER, None, None), write=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    history = re.search(r'<ol class="timeline attempt-history">(.*?)</ol>', page, re.S)
    assert history is not None
    events = re.findall(r'<li class="ev ev-([a-z-]+)">(.*?)</li>', history.group(1), re.S)
    assert [what for what, _ in events] == ["created", "retry", "succeeded"]
    assert "attempt 1 · " + WORKER in events[1][1] and "disk on fire" in events[1][1]
    assert "attempt 2 · " + WORKER in events[2][1]
    assert "1. fetch-invoice" in page


async def test_a_running_task_with_recorded_attempts_shows_them_and_the_running_one(
    cq: CairnQ,
) -> None:
    task = await cq.submit("a", max_attempts=2)
    first = await start(cq, "a")
    error = '{"type":"ValueError","code":"handler_error","message":"disk on fire"}'
    await cq.backend.arun(
        _history.fail(first, WORKER, error, retryable=True, delay_ms=0, started=None), write=True
    )
    await start(cq, "a")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    events = re.findall(r'<li class="ev ev-([a-z-]+)">', page)
    assert events == ["created", "retry", "running"]
    assert "last update" not in page and "<h2>Attempts</h2>" not in page
    assert f"attempt 2 on {WORKER}, claimed at or after this time" in page


async def test_the_task_page_shows_the_error_envelope(cq: CairnQ) -> None:
    task = await fail(cq, "b", "disk on fire")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "disk on fire" in page
    assert "ValueError [handler_error]" in page
    assert "check input" in page


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app/tasks.py", line 7, in send\n'
    '    raise RuntimeError("kaboom")\n'
    "RuntimeError: kaboom\n"
)


async def test_a_traceback_in_the_error_details_renders_as_preformatted_text(cq: CairnQ) -> None:
    task = await fail(cq, "b", "kaboom", details={"traceback": TRACEBACK, "hint": "x"})
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    shown = TRACEBACK.replace('"', "&quot;")
    assert f'<pre class="trace">{shown}</pre>' in page
    assert "\\n" not in page and '\\"' not in page


async def test_a_failed_task_with_no_attempt_left_wears_a_final_pill_not_retryable(
    cq: CairnQ,
) -> None:
    task = await fail(cq, "b", retryable=True, max_attempts=1)
    assert task.is_failed
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert '<span class="pill p-bad">final</span>' in page
    assert ">retryable<" not in page
    assert "no attempt left (1 of 1)" in page


async def test_a_task_requeued_after_a_retryable_failure_says_it_will_run_again(
    cq: CairnQ,
) -> None:
    task = await fail(cq, "b", retryable=True, max_attempts=3)
    assert task.is_queued
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert '<span class="pill p-retry">retrying</span>' in page
    assert "attempt 2 runs" in page


async def test_after_a_manual_retry_the_attempts_count_the_run_it_granted(cq: CairnQ) -> None:
    task = await fail(cq, "b", max_attempts=1)
    await cq.retry(task.id)
    await start(cq, "b")
    async with http(create_app(cq)) as client:
        detail = (await client.get("/task", params={"id": task.id})).text
        listing = (await client.get("/tasks")).text
    assert "2 of 2 allowed (max_attempts 1 + 1 run by manual retry)" in detail
    row = re.search(rf'<tr data-task="{task.id}".*?</tr>', listing)
    assert row is not None and ">2/1+1<" in row.group(0)
    assert ">2/1<" not in listing and "2 of 1" not in detail


async def test_a_queued_task_after_a_manual_retry_counts_the_run_it_waits_for(
    cq: CairnQ,
) -> None:
    task = await fail(cq, "b", max_attempts=1)
    await cq.retry(task.id)
    async with http(create_app(cq)) as client:
        listing = (await client.get("/tasks")).text
    assert ">1/1+1<" in listing


async def test_the_timeline_shows_when_the_running_attempt_started(cq: CairnQ) -> None:
    task = await cq.submit("a")
    await start(cq, "a")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    started = re.search(r'<li class="ev ev-started">.*?</li>', page)
    assert started is not None
    assert "attempt 1, claimed at or after this time" in started.group(0)


async def test_the_timeline_of_a_finished_task_goes_created_started_finished(
    cq: CairnQ,
) -> None:
    task = await cq.submit("a")
    lease = await start(cq, "a")
    await cq.backend.arun(kernel.complete(lease, WORKER, json.dumps(1)), write=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    events = re.findall(r'<li class="ev ev-([a-z-]+)">', page)
    assert events == ["created", "started", "succeeded"]


async def test_the_timeline_says_a_requeued_task_failed_then_waits(cq: CairnQ) -> None:
    task = await fail(cq, "b", retryable=True)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    events = re.findall(r'<li class="ev ev-([a-z-]+)">', page)
    assert events == ["created", "failed"]
    assert "attempt 1, retryable: queued again" in page


async def test_the_task_page_links_parent_children_and_root(cq: CairnQ) -> None:
    parent = await cq.submit("parent")
    child = await cq.submit("child", parent_id=parent.id, root_id=parent.id)
    async with http(create_app(cq)) as client:
        parent_page = (await client.get("/task", params={"id": parent.id})).text
        child_page = (await client.get("/task", params={"id": child.id})).text
    assert f'href="/task?id={child.id}"' in parent_page
    assert f'<dt>parent</dt><dd><a class="mono" href="/task?id={parent.id}"' in child_page
    assert f'href="/tasks?root_id={parent.id}"' in child_page


async def test_a_guessed_tasks_slash_id_address_leads_to_the_tasks_page(cq: CairnQ) -> None:
    task = await cq.submit("a")
    async with http(create_app(cq)) as client:
        moved = await client.get(f"/tasks/{task.id}")
        page = await client.get(moved.headers["location"])
        missing = await client.get((await client.get("/tasks/task_nope")).headers["location"])
    assert (moved.status_code, moved.headers["location"]) == (303, f"/task?id={task.id}")
    assert page.status_code == 200 and task.id in page.text
    assert missing.status_code == 404


async def test_an_unknown_task_is_a_404(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        response = await client.get("/task", params={"id": "task_nope"})
    assert response.status_code == 404


async def test_the_workers_page_lists_lease_holders_and_their_tasks(cq: CairnQ) -> None:
    task = await cq.submit("a")
    await start(cq, "a")
    async with http(create_app(cq)) as client:
        page = (await client.get("/workers")).text
    assert f'data-worker="{WORKER}"' in page
    assert task.id in page


async def test_the_live_fragment_is_only_the_refreshed_region(cq: CairnQ) -> None:
    await cq.submit("a")
    async with http(create_app(cq)) as client:
        response = await client.get("/tasks", headers={"X-Cairnq-Live": "1"})
    assert response.status_code == 200
    assert "<html" not in response.text and "data-task=" in response.text


async def test_a_refresh_of_a_running_task_leaves_out_the_payload(cq: CairnQ) -> None:
    task = await cq.submit("a", {"marker": "payload-marker"})
    lease = await start(cq, "a")
    await cq.backend.arun(kernel.progress(lease, WORKER, 0.5, "half"), write=True)
    live = {"X-Cairnq-Live": "1"}
    async with http(create_app(cq)) as client:
        running = (await client.get("/task", params={"id": task.id}, headers=live)).text
        await cq.backend.arun(
            kernel.complete(lease, WORKER, json.dumps("result-marker")), write=True
        )
        finished = (await client.get("/task", params={"id": task.id}, headers=live)).text
    assert 'value="0.5000"' in running and "payload-marker" not in running
    assert "data-final" not in running
    assert "result-marker" in finished and "data-final" in finished


@silent_refusal
async def test_static_files_are_served_with_their_types(db: Database, cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        with sent_statements(db) as sent:
            css = await client.get("/static/dashboard.css")
            js = await client.get("/static/dashboard.js")
            missing = await client.get("/static/../_app.py")
    assert sent == []
    assert css.headers["content-type"].startswith("text/css")
    assert js.headers["content-type"].startswith("text/javascript")
    assert missing.status_code == 404


@silent_refusal
async def test_an_extension_s_stylesheet_is_served_and_linked_from_every_page(
    db: Database, cq: CairnQ
) -> None:
    async with http(create_app(cq)) as client:
        css = await client.get("/static/x/workflows/workflows.css")
        page = await client.get("/workers")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert ".wf-graph" in css.text
    assert '<link rel="stylesheet" href="/static/x/workflows/workflows.css">' in page.text


# The overview's reads: test_the_overview_shows_each_queues_counts.
@reads_proven_elsewhere
async def test_pages_forbid_inline_scripts_and_framing(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        response = await client.get("/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "<script>" not in response.text


# --- escaping and redaction ------------------------------------------------------------------


# Text with quotes and braces round-trips verbatim on every backend:
# test_validation.py::test_odd_text_round_trips_verbatim_in_every_text_field;
# the pages' reads: test_the_overview_shows_each_queues_counts,
# test_the_task_list_filters_by_status, test_the_task_page_shows_payload_result_key_and_timeline.
@reads_proven_elsewhere
async def test_task_text_is_escaped_everywhere(cq: CairnQ) -> None:
    evil = '<img src=x onerror="alert(1)">'
    task = await cq.submit(evil, {"k": evil}, queue=evil, correlation_id=evil)
    async with http(create_app(cq)) as client:
        pages = [
            (await client.get(path, params=params)).text
            for path, params in (
                ("/", {}),
                ("/tasks", {}),
                ("/tasks", {"queue": evil}),
                ("/task", {"id": task.id}),
            )
        ]
    for page in pages:
        assert "<img" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in pages[3]


# Text with quotes and braces round-trips verbatim on every backend:
# test_validation.py::test_odd_text_round_trips_verbatim_in_every_text_field;
# the pages' reads: test_the_overview_shows_each_queues_counts,
# test_the_task_list_filters_by_status, test_the_task_page_shows_payload_result_key_and_timeline.
@reads_proven_elsewhere
async def test_template_syntax_in_task_text_is_shown_as_text(cq: CairnQ) -> None:
    text = "{{ 'evaluated' ~ '-marker' }}{% if true %}x{% endif %}"
    task = await cq.submit(text, {"k": text}, queue=text, correlation_id=text)
    async with http(create_app(cq)) as client:
        pages = [
            (await client.get(path, params=params)).text
            for path, params in (("/", {}), ("/tasks", {"queue": text}), ("/task", {"id": task.id}))
        ]
    for page in pages:
        assert "{{ &#x27;evaluated&#x27; ~ &#x27;-marker&#x27; }}{% if true %}x{% endif %}" in page
        assert "evaluated-marker" not in page


# The task page's reads: test_the_task_page_shows_payload_result_key_and_timeline.
@reads_proven_elsewhere
async def test_secret_looking_keys_are_masked_by_default(cq: CairnQ) -> None:
    task = await cq.submit("a", {"user": "ada", "password": "hunter2", "nested": {"api_key": "k"}})
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "ada" in page
    assert "hunter2" not in page and "&quot;k&quot;" not in page


def test_default_redact_masks_keys_at_any_depth() -> None:
    value = {"a": [{"Authorization": "Bearer x"}], "b": 1}
    assert default_redact("payload", value, None) == {"a": [{"Authorization": "••••••"}], "b": 1}  # type: ignore[arg-type]


CARD = "4242424242424242"


async def test_card_numbers_and_tokens_in_any_string_are_masked_by_default(cq: CairnQ) -> None:
    payload = {
        "note": "charge card 4242 4242 4242 4242 now",
        "card": CARD,
        "digits": int(CARD),
        "header": "Bearer abcdefghijklmnop123",
        "openai": "sk-proj-abcdefghijklmnopqrstuvwx",
    }
    task = await cq.submit("a", payload)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "charge card •••••• now" in page and "Bearer ••••••" in page
    for secret in ("4242 4242", CARD, "abcdefghijklmnop123", "sk-proj-"):
        assert secret not in page


# The pages' reads: test_the_task_page_shows_the_error_envelope,
# test_a_list_row_shows_attempts_progress_and_message.
@reads_proven_elsewhere
async def test_a_card_number_in_an_error_is_masked_on_the_task_and_in_the_list(
    cq: CairnQ,
) -> None:
    task = await fail(cq, "b", f"declined {CARD}", details={"traceback": f"card={CARD}\n"})
    async with http(create_app(cq)) as client:
        detail = (await client.get("/task", params={"id": task.id})).text
        listing = (await client.get("/tasks")).text
    assert "declined ••••••" in detail and "declined ••••••" in listing
    assert CARD not in detail and CARD not in listing


@pytest.mark.parametrize(
    "text",
    [
        "4242-4242-4242-4242",
        "378282246310005",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "sk_live_abcdefghij12345",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "postgresql://bob:hunter2secret@",
        "https://api.example.com/v1?access_token=abc123xyz",
    ],
)
def test_default_redact_masks_secret_shaped_text(text: str) -> None:
    shown = default_redact("payload", {"note": f"before {text} after"}, None)  # type: ignore[arg-type]
    assert shown["note"].startswith("before ") and shown["note"].endswith(" after")
    assert "••••••" in shown["note"]
    assert text[-6:] not in shown["note"]


def test_default_redact_masks_card_numbers_but_not_timestamps_or_other_numbers() -> None:
    kept = [
        "1700000000000",
        1_700_000_000_000,
        "4242424242424241",
        "order 12345 shipped",
        "task_01HZX2345678901234567ABC",
        "token validation failed",
        "took 0.4242424242424242 s",
        "elapsed=1733240000.4242424242424242",
        "4242424242424242.5",
        "Basic authentication required",
        "http://db.example.com:5432/app",
    ]
    shown = default_redact("payload", [CARD, *kept], None)  # type: ignore[arg-type]
    assert shown == ["••••••", *kept]


# The task page's reads: test_the_task_page_shows_payload_result_key_and_timeline.
@reads_proven_elsewhere
async def test_a_redact_hook_decides_what_is_shown(cq: CairnQ) -> None:
    task = await cq.submit("a", {"card": "4111"}, metadata={"tenant": 7})
    calls: list[str] = []

    def redact(field: str, value: Any, shown: Task) -> Any:
        calls.append(field)
        return "[hidden]" if field == "payload" else value

    async with http(create_app(cq, redact=redact)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "4111" not in page and "[hidden]" in page
    assert "&quot;tenant&quot;: 7" in page
    assert set(calls) == {"payload", "metadata"}


# --- actions ---------------------------------------------------------------------------------


async def test_cancel_goes_through_a_confirmation_then_cancels(cq: CairnQ) -> None:
    task = await cq.submit("a")
    async with http(create_app(cq)) as client:
        confirm = await client.get("/task/cancel", params={"id": task.id})
        assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]
        response = await client.post(
            f"/task/cancel?id={task.id}", data={"csrf": csrf_from(confirm.text)}
        )
    assert response.status_code == 303
    assert response.headers["location"] == f"/task?id={task.id}&done=canceled"
    assert (await cq.get_status(task.id)).status == "canceled"  # type: ignore[union-attr]


async def test_retry_requeues_a_failed_task_resetting_attempts(cq: CairnQ) -> None:
    task = await fail(cq, "b")
    async with http(create_app(cq)) as client:
        confirm = await client.get("/task/retry", params={"id": task.id})
        await client.post(
            f"/task/retry?id={task.id}",
            data={"csrf": csrf_from(confirm.text), "reset_attempt": "1"},
        )
    again = await cq.get(task.id)
    assert again is not None and again.is_queued and again.attempt == 0


async def test_purge_deletes_only_the_matching_finished_tasks(cq: CairnQ) -> None:
    doomed = await fail(cq, "b")
    kept_queued = await cq.submit("b")
    other = await cq.submit("c", queue="other")
    await cq.cancel(other.id)
    async with http(create_app(cq)) as client:
        confirm = await client.get("/purge", params={"status": "failed", "older_than": "0s"})
        response = await client.post(
            "/purge",
            data={
                "csrf": csrf_from(confirm.text),
                "status": "failed",
                "older_than": "0s",
                "any_age": "1",
            },
        )
    assert response.headers["location"] == "/tasks?purged=1"
    assert await cq.get(doomed.id) is None
    assert await cq.get(kept_queued.id) is not None and await cq.get(other.id) is not None


@silent_refusal
async def test_a_bad_purge_duration_is_refused_with_nothing_deleted(
    db: Database, cq: CairnQ
) -> None:
    doomed = await fail(cq, "b")
    app = create_app(cq)
    async with http(app) as client:
        with sent_statements(db) as sent:
            response = await client.post(
                "/purge", data={"csrf": app.csrf_token(), "older_than": "soon"}
            )
    assert sent == []
    assert response.status_code == 400
    assert await cq.get(doomed.id) is not None


DAY_MS = 86_400_000


async def test_the_purge_page_counts_the_matching_tasks_before_confirming(db: Database) -> None:
    clock = FakeClock(1_800_000_000_000)
    async with db.client(clock=clock) as cq:
        old = [await fail(cq, "b") for _ in range(2)]
        clock.advance(8 * DAY_MS)
        await fail(cq, "b")
        async with http(create_app(cq)) as client:
            page = (await client.get("/purge", params={"status": "failed"})).text
            posted = await client.post(
                "/purge",
                data={"csrf": csrf_from(page), "status": "failed", "older_than": "7d"},
            )
        assert 'data-count="2"' in page
        assert "2 finished tasks</strong> match these filters" in page
        assert ">Purge 2 tasks</button>" in page
        assert posted.headers["location"] == "/tasks?purged=2"
        assert [await cq.get(t.id) for t in old] == [None, None]


async def test_a_purge_deletes_what_its_page_counted_not_what_aged_since(db: Database) -> None:
    clock = FakeClock(1_800_000_000_000)
    async with db.client(clock=clock) as cq:
        counted = [await fail(cq, "b") for _ in range(2)]
        clock.advance(2 * DAY_MS)
        aged_since = await fail(cq, "b")
        clock.advance(6 * DAY_MS)
        async with http(create_app(cq)) as client:
            page = (await client.get("/purge", params={"older_than": "7d"})).text
            clock.advance(2 * DAY_MS)  # the page stayed open; the third task is now 8 days old
            hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
            posted = await client.post("/purge", data={**hidden, "csrf": csrf_from(page)})
        assert 'data-count="2"' in page
        assert posted.headers["location"] == "/tasks?purged=2"
        assert [await cq.get(t.id) for t in counted] == [None, None]
        assert await cq.get(aged_since.id) is not None


# The purge page's reads: test_the_purge_page_counts_the_matching_tasks_before_confirming.
@reads_proven_elsewhere
async def test_the_purge_page_proposes_seven_days_not_zero(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        page = (await client.get("/purge")).text
    assert 'name="older_than" value="7d"' in page
    assert 'value="0s"' not in page


async def test_a_zero_age_purge_without_the_confirmation_deletes_nothing(cq: CairnQ) -> None:
    task = await fail(cq, "b")
    app = create_app(cq)
    async with http(app) as client:
        response = await client.post("/purge", data={"csrf": app.csrf_token(), "older_than": "0s"})
    assert response.status_code == 400
    assert "tick the box to confirm" in response.text
    assert 'name="any_age"' in response.text
    assert await cq.get(task.id) is not None


async def test_bulk_retry_shows_the_count_then_requeues_only_the_filtered_tasks(
    cq: CairnQ,
) -> None:
    chosen = [await fail(cq, "b", queue="mail") for _ in range(3)]
    other = await fail(cq, "b", queue="media")
    async with http(create_app(cq)) as client:
        listing = (await client.get("/tasks", params={"queue": "mail", "status": "failed"})).text
        confirm = (await client.get("/tasks/retry", params={"queue": "mail"})).text
        unchanged = [(await cq.get_status(t.id)).status for t in chosen]  # type: ignore[union-attr]
        posted = await client.post(
            "/tasks/retry", data={"csrf": csrf_from(confirm), "queue": "mail"}
        )
    assert 'href="/tasks/retry?status=failed&amp;queue=mail"' in listing
    assert 'data-count="3"' in confirm and "3 failed, 0 canceled" in confirm
    assert unchanged == ["failed"] * 3
    assert posted.headers["location"] == "/tasks?queue=mail&bulk=retry&done=3"
    for task in chosen:
        assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]
    assert (await cq.get_status(other.id)).status == "failed"  # type: ignore[union-attr]


async def test_bulk_retry_acts_on_no_more_tasks_than_its_page_counted(cq: CairnQ) -> None:
    counted = [await fail(cq, "b", queue="mail") for _ in range(2)]
    async with http(create_app(cq)) as client:
        confirm = (await client.get("/tasks/retry", params={"queue": "mail"})).text
        failed_since = await fail(cq, "b", queue="mail")
        hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', confirm))
        posted = await client.post("/tasks/retry", data={**hidden, "csrf": csrf_from(confirm)})
    assert ">Retry 2 tasks</button>" in confirm
    assert posted.headers["location"].endswith("done=2&more=1")
    statuses = [(await cq.get_status(t.id)).status for t in [*counted, failed_since]]  # type: ignore[union-attr]
    assert sorted(statuses) == ["failed", "queued", "queued"]


async def test_bulk_retry_can_reset_the_attempt_counters(cq: CairnQ) -> None:
    task = await fail(cq, "b", max_attempts=1)
    app = create_app(cq)
    async with http(app) as client:
        await client.post(
            "/tasks/retry",
            data={"csrf": app.csrf_token(), "status": "failed", "reset_attempt": "1"},
        )
    again = await cq.get(task.id)
    assert again is not None and again.is_queued and again.attempt == 0


async def test_bulk_cancel_cancels_queued_and_asks_running_tasks_to_stop(cq: CairnQ) -> None:
    queued = await cq.submit("a", queue="mail")
    running = await cq.submit("r", queue="mail")
    await start(cq, "r", "mail")
    elsewhere = await cq.submit("a", queue="media")
    app = create_app(cq)
    async with http(app) as client:
        confirm = (await client.get("/tasks/cancel", params={"queue": "mail"})).text
        posted = await client.post(
            "/tasks/cancel", data={"csrf": app.csrf_token(), "queue": "mail"}
        )
        notice = (await client.get(posted.headers["location"])).text
    assert 'data-count="2"' in confirm and "1 queued, 1 running" in confirm
    assert (await cq.get_status(queued.id)).status == "canceled"  # type: ignore[union-attr]
    after = await cq.get(running.id)
    assert after is not None and after.cancel_requested
    assert (await cq.get_status(elsewhere.id)).status == "queued"  # type: ignore[union-attr]
    assert "Canceled 1 task. Cancel requested for 1 running" in notice


async def test_the_bulk_confirmation_says_when_nothing_matches(cq: CairnQ) -> None:
    await cq.submit("a")
    async with http(create_app(cq)) as client:
        page = (await client.get("/tasks/retry")).text
    assert 'data-count="0"' in page and 'method="post"' not in page


@silent_refusal
async def test_a_bulk_action_without_a_csrf_token_is_refused(db: Database, cq: CairnQ) -> None:
    task = await fail(cq, "b")
    async with http(create_app(cq)) as client:
        with sent_statements(db) as sent:
            response = await client.post("/tasks/retry", data={"status": "failed"})
    assert sent == []
    assert response.status_code == 403
    assert (await cq.get_status(task.id)).status == "failed"  # type: ignore[union-attr]


@silent_refusal
async def test_an_action_without_a_csrf_token_is_refused(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    async with http(create_app(cq)) as client:
        with sent_statements(db) as sent:
            response = await client.post(f"/task/cancel?id={task.id}", data={})
    assert sent == []
    assert response.status_code == 403
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


@silent_refusal
async def test_a_csrf_token_from_another_secret_is_refused(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    foreign = create_app(cq, secret="another-secret").csrf_token()
    async with http(create_app(cq, secret="this-secret")) as client:
        with sent_statements(db) as sent:
            response = await client.post(f"/task/cancel?id={task.id}", data={"csrf": foreign})
    assert sent == []
    assert response.status_code == 403


@silent_refusal
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
)
async def test_a_cross_site_action_is_refused(
    db: Database, cq: CairnQ, headers: dict[str, str]
) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    async with http(app) as client:
        with sent_statements(db) as sent:
            response = await client.post(
                f"/task/cancel?id={task.id}", data={"csrf": app.csrf_token()}, headers=headers
            )
    assert sent == []
    assert response.status_code == 403
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


# The cancel's statements: test_cancel_goes_through_a_confirmation_then_cancels.
@reads_proven_elsewhere
async def test_a_same_origin_action_passes_the_origin_check(cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    headers = {"Origin": BASE, "Sec-Fetch-Site": "same-origin"}
    async with http(app) as client:
        response = await client.post(
            f"/task/cancel?id={task.id}", data={"csrf": app.csrf_token()}, headers=headers
        )
    assert response.status_code == 303


# The confirmation page's reads: test_cancel_goes_through_a_confirmation_then_cancels.
@reads_proven_elsewhere
async def test_actions_are_post_only(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    async with http(app) as client:
        await client.get(f"/task/cancel?id={task.id}&csrf={app.csrf_token()}")
        with sent_statements(db) as sent:
            put = await client.put(f"/task/cancel?id={task.id}")
    assert sent == []
    assert put.status_code == 405
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


# --- read-only -------------------------------------------------------------------------------


# The pages' reads: test_the_task_page_shows_payload_result_key_and_timeline,
# test_the_task_list_filters_by_status.
@reads_proven_elsewhere
async def test_read_only_pages_offer_no_actions(cq: CairnQ) -> None:
    failed = await fail(cq, "b")
    queued = await cq.submit("a")
    async with http(create_app(cq, read_only=True)) as client:
        pages = [
            (await client.get("/task", params={"id": failed.id})).text,
            (await client.get("/task", params={"id": queued.id})).text,
            (await client.get("/tasks")).text,
        ]
    for page in pages:
        assert "/task/cancel" not in page and "/task/retry" not in page
        assert "/purge" not in page
    assert "read-only" in pages[0]


@silent_refusal
async def test_read_only_refuses_actions_and_their_confirmations(db: Database, cq: CairnQ) -> None:
    task = await cq.submit("a")
    app = create_app(cq, read_only=True)
    async with http(app) as client:
        with sent_statements(db) as sent:
            confirm = await client.get("/task/cancel", params={"id": task.id})
            post = await client.post(f"/task/cancel?id={task.id}", data={"csrf": app.csrf_token()})
            purge = await client.post("/purge", data={"csrf": app.csrf_token()})
    assert sent == []
    assert (confirm.status_code, post.status_code, purge.status_code) == (403, 403, 403)
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


# The listing's reads: test_the_task_list_filters_by_status; the refusals send nothing.
@reads_proven_elsewhere
async def test_read_only_hides_and_refuses_bulk_actions(db: Database, cq: CairnQ) -> None:
    task = await fail(cq, "b")
    app = create_app(cq, read_only=True)
    async with http(app) as client:
        listing = (await client.get("/tasks")).text
        with sent_statements(db) as sent:
            confirm = await client.get("/tasks/retry")
            post = await client.post("/tasks/retry", data={"csrf": app.csrf_token()})
    assert sent == []
    assert "/tasks/retry" not in listing and "/tasks/cancel" not in listing
    assert (confirm.status_code, post.status_code) == (403, 403)
    assert (await cq.get_status(task.id)).status == "failed"  # type: ignore[union-attr]


# --- metrics ---------------------------------------------------------------------------------


@silent_refusal
async def test_metrics_without_the_extra_is_a_501_naming_the_extra(
    db: Database, cq: CairnQ, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "cairnq.telemetry.metrics", raising=False)
    async with http(create_app(cq)) as client:
        with sent_statements(db) as sent:
            response = await client.get("/metrics")
    assert sent == []
    assert response.status_code == 501
    assert 'needs the "metrics" extra' in response.text
    assert 'pip install ".[metrics]"' in response.text


# --- tokens ----------------------------------------------------------------------------------


@silent_refusal
async def test_a_request_without_the_token_is_refused(db: Database, cq: CairnQ) -> None:
    async with http(create_app(cq, token=TOKEN)) as client:
        with sent_statements(db) as sent:
            response = await client.get("/")
            static = await client.get("/static/dashboard.js")
    assert sent == []
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert static.status_code == 401


@silent_refusal
async def test_a_wrong_token_is_refused(db: Database, cq: CairnQ) -> None:
    async with http(create_app(cq, token=TOKEN)) as client:
        with sent_statements(db) as sent:
            header = await client.get("/", headers={"Authorization": "Bearer wrong-token"})
            query = await client.get("/", params={"token": "wrong-token"})
    assert sent == []
    assert (header.status_code, query.status_code) == (401, 401)


# The overview's reads: test_the_overview_shows_each_queues_counts.
@reads_proven_elsewhere
async def test_a_bearer_token_is_accepted(cq: CairnQ) -> None:
    async with http(create_app(cq, token=TOKEN)) as client:
        response = await client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


# The redirect sends nothing; the workers page's reads:
# test_the_workers_page_lists_lease_holders_and_their_tasks.
@reads_proven_elsewhere
async def test_a_query_token_sets_a_strict_cookie_and_leaves_the_url(
    db: Database, cq: CairnQ
) -> None:
    async with http(create_app(cq, token=TOKEN)) as client:
        with sent_statements(db) as sent:
            first = await client.get("/tasks", params={"token": TOKEN, "status": "queued"})
        assert sent == []
        cookie = first.headers["set-cookie"]
        later = await client.get("/workers")
    assert first.status_code == 303
    assert first.headers["location"] == "/tasks?status=queued"
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert TOKEN not in cookie
    assert later.status_code == 200


def test_a_short_token_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="token"):
        create_app("sqlite:///unused.db", token="short")


def test_a_sync_client_is_refused(tmp_path: Any) -> None:
    with pytest.raises(InvalidArgument, match="async"):
        create_app(SyncCairnQ.sqlite(tmp_path / "t.db"))


async def test_an_app_made_from_a_url_opens_and_closes_its_own_client(
    sqlite_db: Database,
) -> None:
    sqlite_db.sync_client().open().stats()
    app = create_app(sqlite_db.url)
    assert isinstance(app, DashboardApp)
    async with http(app) as client:
        response = await client.get("/")
    await app.aclose()
    assert response.status_code == 200


# --- mounting --------------------------------------------------------------------------------


# The pages' reads and the cancel: test_the_task_list_filters_by_status,
# test_cancel_goes_through_a_confirmation_then_cancels.
@reads_proven_elsewhere
async def test_mounted_in_starlette_every_link_and_form_keeps_the_prefix(cq: CairnQ) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    async def home(request: Any) -> PlainTextResponse:
        return PlainTextResponse("host app")

    task = await cq.submit("a")
    host = Starlette(routes=[Route("/", home), Mount("/ops/cairnq", app=create_app(cq))])
    async with http(host) as client:
        listing = (await client.get("/ops/cairnq/tasks")).text
        confirm = (await client.get("/ops/cairnq/task/cancel", params={"id": task.id})).text
        action = re.search(r'<form method="post" action="([^"]+)"', confirm)
        assert action is not None
        posted = await client.post(
            action.group(1).replace("&amp;", "&"), data={"csrf": csrf_from(confirm)}
        )
        home_page = (await client.get("/")).text
    links = re.findall(r'(?:href|src|action)="([^"]+)"', listing + confirm)
    assert links and all(link.startswith("/ops/cairnq/") for link in links)
    assert posted.headers["location"] == f"/ops/cairnq/task?id={task.id}&done=canceled"
    assert (await cq.get_status(task.id)).status == "canceled"  # type: ignore[union-attr]
    assert home_page == "host app"


# The workers page's reads: test_the_workers_page_lists_lease_holders_and_their_tasks.
@reads_proven_elsewhere
async def test_mount_sends_the_prefix_to_the_dashboard_and_the_rest_elsewhere(
    cq: CairnQ,
) -> None:
    async def fallback(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"django"})

    app = mount("/cairnq", create_app(cq), fallback)
    async with http(app) as client:
        dashboard = await client.get("/cairnq/workers")
        other = await client.get("/admin/")
        lookalike = await client.get("/cairnqx")
    assert 'href="/cairnq/tasks"' in dashboard.text
    assert (other.text, lookalike.text) == ("django", "django")


# --- the command -----------------------------------------------------------------------------


@silent_refusal
def test_the_command_refuses_a_public_bind_without_a_token(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAIRNQ_DASHBOARD_TOKEN", raising=False)
    with sent_anywhere(db) as sent:
        result = run(capsys, "dashboard", "--host", "0.0.0.0", *db_args(db))
    assert sent == []
    assert result.code == 1
    assert "without a token" in one_error_line(result)


@silent_refusal
def test_the_command_says_how_to_install_uvicorn_when_it_is_missing(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with sent_anywhere(db) as sent:
        result = run(capsys, "dashboard", *db_args(db))
    assert sent == []
    assert result.code == 1
    assert 'pip install ".[dashboard]"' in one_error_line(result)


def test_the_command_serves_with_the_token_from_the_environment(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    db.sync_client().open().stats()
    served: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:
        served.update(options, app=app)

    monkeypatch.setattr(uvicorn, "run", fake_run)
    monkeypatch.setenv("CAIRNQ_DASHBOARD_TOKEN", TOKEN)
    result = run(
        capsys, "dashboard", "--host", "0.0.0.0", "--port", "9999", "--read-only", *db_args(db)
    )
    assert result.code == 0, result.err
    assert (served["host"], served["port"]) == ("0.0.0.0", 9999)
    assert served["app"].token == TOKEN and served["app"].read_only
    assert TOKEN not in result.out
    asyncio.run(served["app"].aclose())


def test_the_command_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["dashboard", "--help"])
    assert code == 0
    assert "example: cairnq dashboard" in capsys.readouterr().out


async def test_an_app_made_from_a_url_never_creates_a_database(tmp_path: Any) -> None:
    path = tmp_path / "missing.db"
    app = create_app(f"sqlite:///{path}")
    async with http(app) as client:
        response = await client.get("/")
    await app.aclose()
    assert response.status_code == 503
    assert not path.exists()


async def test_an_error_stored_by_another_writer_in_another_shape_still_renders(
    sqlite_db: Database,
) -> None:
    import sqlite3

    async with sqlite_db.client() as cq:
        task = await cq.submit("a")
        assert sqlite_db.path is not None
        with sqlite3.connect(sqlite_db.path) as conn:
            conn.execute(
                "update cairnq_tasks set status = 'failed', error = '\"plain words\"', "
                "completed_at_ms = created_at_ms where id = ?",
                (task.id,),
            )
        async with http(create_app(cq)) as client:
            detail = await client.get("/task", params={"id": task.id})
            listing = await client.get("/tasks")
    assert detail.status_code == listing.status_code == 200
    assert "plain words" in detail.text and "plain words" in listing.text


def test_timeline_notes_wrap_between_words_so_a_worker_id_stays_whole() -> None:
    css = (resources.files("cairnq.dashboard") / "static" / "dashboard.css").read_text()
    (rule,) = re.findall(r"ol\.timeline \.rel \{([^}]*)\}", css)
    assert "overflow-wrap: break-word" in rule and "anywhere" not in rule
