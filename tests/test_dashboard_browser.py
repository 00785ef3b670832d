"""The dashboard in a real headless Chromium, served by uvicorn, on a SQLite file.

Needs ``/usr/bin/chromium`` and the ``playwright`` package; without them these
tests skip and say why, unless ``CAIRNQ_REQUIRE_BROWSER=1`` (set by CI), which
turns the skip into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairnq import SyncCairnQ, Worker, kernel
from cairnq.dashboard import create_app
from cairnq.models import Lease

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.browser

REQUIRE = os.environ.get("CAIRNQ_REQUIRE_BROWSER") == "1"
WORKER = "worker_browser_test"
TOKEN = "browser-test-token"
TIMEOUT_MS = 10_000


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (CAIRNQ_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"the playwright package is not installed: {exc}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def background(worker: Worker) -> Iterator[None]:
    """Run ``worker`` on its own event loop in a thread."""
    thread = threading.Thread(target=asyncio.run, args=(worker.run(),), daemon=True)
    thread.start()
    try:
        yield
    finally:
        deadline = time.monotonic() + 10
        while worker._loop is None and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.stop()
        thread.join(10)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "browser.db"


@pytest.fixture
def cq(db_path: Path) -> Iterator[SyncCairnQ]:
    with SyncCairnQ.sqlite(db_path) as client:
        yield client


def fail(cq: SyncCairnQ, name: str, queue: str = "default") -> str:
    op = kernel.claim([queue], WORKER, 60_000, [kernel.Draw([name], 1)], 100)
    (row,) = cq.backend.run(op, write=True)
    envelope = json.dumps(
        {"type": "Boom", "code": "boom", "message": "it broke", "retryable": False, "details": {}}
    )
    lease = Lease.of(row)
    cq.backend.run(kernel.fail(lease, WORKER, envelope, retryable=False, delay_ms=0), write=True)
    return str(row["id"])


def test_the_overview_renders_the_counts_of_the_database(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    for _ in range(3):
        cq.submit("send", queue="emails")
    cq.submit("resize", queue="media")
    cq.submit("boom")
    fail(cq, "boom")
    with serve(create_app(str(db_path))) as url:
        page.goto(url + "/")
        emails = page.locator("table.queues tbody tr", has_text="emails")
        assert emails.locator("td").nth(0).inner_text() == "3"
        media = page.locator("table.queues tbody tr", has_text="media")
        assert media.locator("td").nth(0).inner_text() == "1"
        failed = page.locator("table.queues tbody tr", has_text="default")
        assert failed.locator("td").nth(3).inner_text() == "1"
        assert page.locator(".tile .v").first.inner_text() == "4"


def test_filtering_the_task_list_shows_only_matching_tasks(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    queued = [cq.submit("send").id for _ in range(2)]
    cq.submit("boom")
    failed = fail(cq, "boom")
    with serve(create_app(str(db_path))) as url:
        page.goto(url + "/tasks")
        assert page.locator("tr[data-task]").count() == 3
        page.select_option("select[name=status]", "failed")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**/tasks?status=failed*")
        rows = page.locator("tr[data-task]")
        assert rows.count() == 1
        assert rows.first.get_attribute("data-task") == failed
        page.fill("input[name=id_prefix]", queued[0])
        page.select_option("select[name=status]", "")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**id_prefix=*")
        assert [r.get_attribute("data-task") for r in rows.all()] == [queued[0]]


def test_a_running_tasks_progress_advances_without_a_reload(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    reached = [threading.Event() for _ in range(2)]
    proceed = [threading.Event() for _ in range(2)]
    worker = Worker.sqlite(db_path, lease_ms=5_000)

    @worker.task("steps")
    def steps(ctx: Any, payload: Any) -> dict[str, bool]:
        for index, fraction in enumerate((0.25, 0.75)):
            ctx.progress(fraction, f"step {index + 1}")
            reached[index].set()
            assert proceed[index].wait(TIMEOUT_MS / 1000)
        return {"done": True}

    from playwright.sync_api import expect

    task = cq.submit("steps")
    app = create_app(str(db_path), refresh_ms=250)
    with serve(app) as url, background(worker):
        assert reached[0].wait(10)
        page.goto(f"{url}/task?id={task.id}")
        bar = page.locator(".progress-big progress")
        assert bar.get_attribute("value") == "0.2500"
        page.evaluate("window.__sameDocument = true")
        proceed[0].set()
        assert reached[1].wait(10)
        # Locator assertions poll without eval, which the page's CSP forbids.
        expect(bar).to_have_attribute("value", "0.7500")
        assert page.locator(".pmsg").inner_text() == "step 2"
        proceed[1].set()
        expect(page.locator("h1 .badge")).to_have_text("succeeded")
        assert page.evaluate("window.__sameDocument") is True


def test_cancel_from_the_task_page(page: Any, cq: SyncCairnQ, db_path: Path) -> None:
    task = cq.submit("send")
    with serve(create_app(str(db_path))) as url:
        page.goto(f"{url}/task?id={task.id}")
        page.click("text=Cancel…")
        page.wait_for_url("**/task/cancel?*")
        assert cq.get_status(task.id).status == "queued"  # type: ignore[union-attr]
        page.click("button:has-text('Cancel task')")
        page.wait_for_url("**done=canceled*")
        assert page.locator("h1 .badge").inner_text() == "canceled"
    assert cq.get_status(task.id).status == "canceled"  # type: ignore[union-attr]


def test_retry_from_the_task_page(page: Any, cq: SyncCairnQ, db_path: Path) -> None:
    cq.submit("boom")
    task_id = fail(cq, "boom")
    with serve(create_app(str(db_path))) as url:
        page.goto(f"{url}/task?id={task_id}")
        assert "it broke" in page.locator(".errbox").inner_text()
        page.click("text=Retry…")
        page.check("input[name=reset_attempt]")
        page.click("button:has-text('Retry task')")
        page.wait_for_url("**done=retried*")
        assert page.locator("h1 .badge").inner_text() == "queued"
    task = cq.get(task_id)
    assert task is not None and task.is_queued and task.attempt == 0


def test_pause_and_resume_from_the_schedules_page(page: Any, cq: SyncCairnQ, db_path: Path) -> None:
    cq.schedules.add("tick", "job", every="10s")
    with serve(create_app(str(db_path))) as url:
        page.goto(f"{url}/schedules")
        page.click("tr[data-schedule=tick] button:has-text('Pause')")
        page.wait_for_url("**done=paused*")
        assert page.locator("h1 .pill").inner_text() == "paused"
        page.click("button:has-text('Resume')")
        page.wait_for_url("**done=resumed*")
        assert page.locator("h1 .pill").count() == 0
    assert cq.schedules.get("tick").paused is False  # type: ignore[union-attr]


def test_read_only_mode_hides_the_actions(page: Any, cq: SyncCairnQ, db_path: Path) -> None:
    queued = cq.submit("send")
    cq.submit("boom")
    failed = fail(cq, "boom")
    with serve(create_app(str(db_path), read_only=True)) as url:
        for task_id in (queued.id, failed):
            page.goto(f"{url}/task?id={task_id}")
            assert page.locator("h1").count() == 1
            assert page.locator("text=Cancel…").count() == 0
            assert page.locator("text=Retry…").count() == 0
        page.goto(f"{url}/tasks")
        assert page.locator("text=Purge…").count() == 0
        assert page.locator(".pill.ro").inner_text() == "read-only"


def test_a_token_protected_dashboard_on_a_public_bind_refuses_requests_without_it(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    cq.submit("send", queue="emails")
    with serve(create_app(str(db_path), token=TOKEN), host="0.0.0.0") as url:
        response = page.goto(url + "/")
        assert response.status == 401
        assert "Token required" in page.content()
        assert "emails" not in page.content()
        page.goto(f"{url}/?token={TOKEN}")
        assert page.url == url + "/"
        assert page.locator("table.queues").count() == 1
        page.goto(url + "/tasks")
        assert page.locator("tr[data-task]").count() == 1


def wait_for(cq: SyncCairnQ, task_id: str, status: str, attempt: int) -> None:
    """Wait (up to 10 s) until the worker has brought the task to ``status`` at ``attempt``."""
    deadline = time.monotonic() + 10
    while True:
        task = cq.get(task_id)
        if task is not None and (task.status, task.attempt) == (status, attempt):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"task never reached {status} at attempt {attempt}: {task!r}")
        time.sleep(0.02)


def failing_worker(db_path: Path) -> Worker:
    worker = Worker.sqlite(db_path, poll_interval_ms=50)

    @worker.task("boom")
    def boom(ctx: Any, payload: Any) -> None:
        raise RuntimeError("kaboom")

    return worker


def test_a_handlers_traceback_shows_as_text(page: Any, cq: SyncCairnQ, db_path: Path) -> None:
    task = cq.submit("boom", max_attempts=1)
    with serve(create_app(str(db_path))) as url, background(failing_worker(db_path)):
        wait_for(cq, task.id, "failed", 1)
        page.goto(f"{url}/task?id={task.id}")
        trace = page.locator(".errbox pre.trace").inner_text()
        lines = trace.splitlines()
        assert lines[0] == "Traceback (most recent call last):"
        assert lines[-1] == "RuntimeError: kaboom"
        assert "\\n" not in page.locator(".errbox").inner_text()


def test_attempts_and_pill_after_a_final_failure_and_a_manual_retry(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    task = cq.submit("boom", max_attempts=1)
    with serve(create_app(str(db_path))) as url, background(failing_worker(db_path)):
        wait_for(cq, task.id, "failed", 1)
        page.goto(f"{url}/task?id={task.id}")
        assert page.locator(".errbox .pill").inner_text() == "final"
        assert page.locator(".pill", has_text="retryable").count() == 0
        assert page.locator("dd.attempts").inner_text() == "1 of 1"
        page.click("text=Retry…")
        page.click("button:has-text('Retry task')")
        page.wait_for_url("**done=retried*")
        wait_for(cq, task.id, "failed", 2)
        page.reload()
        assert page.locator(".errbox .pill").inner_text() == "final"
        allowed = "2 of 2 allowed (max_attempts 1 + 1 run by manual retry)"
        assert page.locator("dd.attempts").inner_text() == allowed
        page.goto(f"{url}/tasks")
        cell = page.locator(f"tr[data-task='{task.id}'] td.num").first
        assert cell.inner_text() == "2/1+1"


def test_the_purge_page_shows_the_matching_count_before_purging(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    doomed = []
    for _ in range(3):
        cq.submit("boom")
        doomed.append(fail(cq, "boom"))
    kept = cq.submit("send")
    with serve(create_app(str(db_path))) as url:
        page.goto(f"{url}/tasks")
        page.click("text=Purge…")
        assert page.locator("input[name=older_than]").input_value() == "7d"
        assert page.locator(".purge-count").get_attribute("data-count") == "0"
        page.fill("input[name=older_than]", "0s")
        page.click("button:has-text('Count matching')")
        assert "3 finished tasks match" in page.locator(".purge-count").inner_text()
        assert all(cq.get(task_id) is not None for task_id in doomed)
        page.click("button:has-text('Purge 3 tasks')")
        assert "tick the box to confirm" in page.locator(".notice").inner_text()
        assert all(cq.get(task_id) is not None for task_id in doomed)
        page.check("input[name=any_age]")
        page.click("button:has-text('Purge 3 tasks')")
        page.wait_for_url("**/tasks?purged=3")
        assert page.locator(".notice").inner_text() == "Purged 3 tasks."
    assert [cq.get(task_id) for task_id in doomed] == [None, None, None]
    assert cq.get(kept.id) is not None


def test_bulk_retry_of_the_filtered_list_after_a_confirmation(
    page: Any, cq: SyncCairnQ, db_path: Path
) -> None:
    chosen = []
    for _ in range(2):
        cq.submit("boom")
        chosen.append(fail(cq, "boom"))
    cq.submit("boom", queue="other")
    other = fail(cq, "boom", queue="other")
    with serve(create_app(str(db_path))) as url:
        page.goto(f"{url}/tasks")
        page.select_option("select[name=status]", "failed")
        page.fill("input[name=queue]", "default")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**/tasks?status=failed*")
        page.click("text=Retry matching…")
        page.wait_for_url("**/tasks/retry?*")
        assert page.locator(".bulk-count").get_attribute("data-count") == "2"
        assert all(cq.get_status(t).status == "failed" for t in chosen)  # type: ignore[union-attr]
        page.click("button:has-text('Retry 2 tasks')")
        page.wait_for_url("**bulk=retry*")
        assert page.locator(".notice").inner_text() == "Queued 2 tasks again."
    assert [cq.get_status(t).status for t in chosen] == ["queued", "queued"]  # type: ignore[union-attr]
    assert cq.get_status(other).status == "failed"  # type: ignore[union-attr]
