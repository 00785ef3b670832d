"""Seed a demo database, serve the dashboard and save screenshots of it.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs] [--chromium /usr/bin/chromium]
        [--only overview,task,task-logs,trends]

Writes ``dashboard-overview.png``, ``dashboard-task.png``, ``dashboard-task-logs.png``
and ``dashboard-trends.png`` (``--only`` picks some). The demo holds a week of
attempts of five task names (some failing, one with a bad spell two days ago) for
the Trends page, several queues with tasks in every status finished over the last
hour, a running task reporting progress (a child of a parent with more children), a
failed task with an error envelope, and a ``payments.charge`` task run by a real
worker whose handler logged several lines in each of its two attempts (the first
failed). Needs uvicorn and the playwright package (``pip install -e ".[dev]"``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cairnq import CairnQ, SyncCairnQ, Worker, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.history import _hooks as _history
from cairnq.extensions.presence import _ops as _presence
from cairnq.history import capture_logging
from cairnq.models import Lease
from cairnq.testing import FakeClock

WORKERS = ("worker_01JDEMO0MAILER00000000000", "worker_01JDEMO0RENDER00000000000")
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SHOTS = ("overview", "task", "task-logs", "trends")
# The week's task names: queue, weight, run time range (ms), failure rate.
WEEK = {
    "email.send": ("emails", 45, (40, 900), 0.02),
    "images.resize": ("media", 22, (300, 4_000), 0.03),
    "payments.charge": ("payments", 18, (150, 2_500), 0.07),
    "reports.build": ("reports", 5, (8_000, 60_000), 0.01),
    "webhooks.deliver": ("webhooks", 10, (30, 1_500), 0.12),
}


def _claim(cq: SyncCairnQ, queue: str, name: str, worker: str, lease_ms: int = 60_000) -> Any:
    op = kernel.claim([queue], worker, lease_ms, [kernel.Draw([name], 1)], 100)
    (row,) = cq.backend.run(op, write=True)
    return Lease.of(row)


def _error(kind: str, code: str, message: str, **details: Any) -> str:
    return json.dumps(
        {"type": kind, "code": code, "message": message, "retryable": False, "details": details}
    )


def seed_week(cq: SyncCairnQ, clock: FakeClock, rng: random.Random, until_ms: int) -> None:
    """A week of attempts of the ``WEEK`` names, recorded in the attempt history (the
    Trends page's source), up to ``until_ms``; ``images.resize`` fails a third of its
    runs for six hours two days ago."""
    names = list(WEEK)
    weights = [WEEK[n][1] for n in names]
    spell = (until_ms - 2 * DAY_MS, until_ms - 2 * DAY_MS + 12 * HOUR_MS)
    while clock.now_ms() < until_ms:
        clock.advance(rng.randint(60_000, 600_000))
        name = rng.choices(names, weights)[0]
        queue, _, (low, high), rate = WEEK[name]
        if name == "images.resize" and spell[0] <= clock.now_ms() < spell[1]:
            rate = 0.6
        cq.submit(name, {"n": rng.randint(1, 10_000)}, queue=queue)
        started = clock.now_ms()
        lease = _claim(cq, queue, name, WORKERS[0], lease_ms=600_000)
        clock.advance(int(low + (high - low) * rng.betavariate(1.3, 5)))
        if rng.random() < rate:
            err = _error("TimeoutError", "handler_error", f"{name}: upstream timed out")
            op = _history.fail(lease, WORKERS[0], err, retryable=False, delay_ms=0, started=started)
        else:
            op = _history.complete(lease, WORKERS[0], json.dumps({"ok": True}), started)
        cq.backend.run(op, write=True)


async def run_logged(path: Path) -> str:
    """A ``payments.charge`` task run by a real worker: its handler logs (``ctx.log``, and
    the ``payments`` logger through ``capture_logging``), fails its first attempt and
    succeeds its second; returns its id."""
    import logging

    async with CairnQ.sqlite(path) as cq:
        worker = Worker(cq, poll_interval_ms=20, retry_backoff_ms=0, queues=["payments"])
        stop = capture_logging(worker, "payments", level="INFO")
        gateway = logging.getLogger("payments.gateway")

        @worker.task(name="payments.charge")
        async def charge(ctx: Any, payload: Any) -> Any:
            ctx.log(f"charging {payload['amount']} cents to customer {payload['customer']}")
            ctx.log(f"idempotency key {payload['order']}-{ctx.attempt}", level="debug")
            gateway.info("POST /v1/charges (attempt %d)", ctx.attempt)
            if ctx.attempt == 1:
                gateway.warning("no answer after 10.0 s; connection reset")
                ctx.log("gateway timed out; the charge may not have gone through", level="error")
                ctx.log("will retry: the idempotency key keeps a second charge out")
                raise TimeoutError("payment gateway timed out after 10 s")
            gateway.info("200 OK, charge ch_3PdemoQ7 captured")
            ctx.log("receipt ch_3PdemoQ7 stored, 4 lines written to the ledger")
            ctx.log(f"emailing the receipt to customer {payload['customer']}")
            return {"charge": "ch_3PdemoQ7", "captured": True}

        task = await cq.submit(
            "payments.charge",
            {"amount": 4_999, "customer": "cus_ada", "order": "ord_1042"},
            queue="payments",
            max_attempts=3,
            tags=["billing", "eu"],
        )
        await worker.run(until_idle=True)
        stop()
        return task.id


def seed(path: Path) -> tuple[str, str]:
    """Fill ``path`` with the demo; returns the ids of the running child task and of
    the task whose handler logged."""
    rng = random.Random(7)
    now = int(time.time() * 1000)
    clock = FakeClock(now - 7 * DAY_MS)
    with SyncCairnQ.sqlite(path, clock=clock) as cq:
        seed_week(cq, clock, rng, now - HOUR_MS)
        clock.set(now - HOUR_MS)
        # An hour of traffic: tasks finish every few seconds, a few fail.
        names = {"emails": "email.send", "media": "images.resize", "reports": "reports.build"}
        weights = {"emails": 6, "media": 3, "reports": 1}
        while clock.now_ms() < now - 60_000:
            clock.advance(rng.randint(4_000, 22_000))
            queue = rng.choices(list(weights), list(weights.values()))[0]
            name = names[queue]
            cq.submit(name, {"n": rng.randint(1, 10_000)}, queue=queue)
            lease = _claim(cq, queue, name, WORKERS[0])
            clock.advance(rng.randint(50, 2_000))
            if rng.random() < 0.06:
                err = _error("SMTPError", "handler_error", "450 mailbox busy", attempt=1)
                cq.backend.run(
                    kernel.fail(lease, WORKERS[0], err, retryable=False, delay_ms=0), write=True
                )
            elif rng.random() < 0.03:
                cq.cancel(lease.id)
                cq.backend.run(kernel.complete(lease, WORKERS[0], None), write=True)
            else:
                result = json.dumps({"ok": True, "ms": rng.randint(20, 900)})
                cq.backend.run(kernel.complete(lease, WORKERS[0], result), write=True)
        clock.set(now - 45_000)
        # A monthly report with children: one done, one running with progress, two queued.
        parent = cq.submit(
            "reports.monthly",
            {"month": "2026-11", "format": "pdf"},
            queue="reports",
            key="report:2026-11",
            correlation_id="req-7f3a",
            metadata={"requested_by": "ada@example.com", "tenant": 42},
        )
        boss = _claim(cq, "reports", "reports.monthly", WORKERS[1], lease_ms=600_000)
        cq.backend.run(
            kernel.progress(boss, WORKERS[1], 0.25, "waiting for 3 of 4 sections"), write=True
        )
        sections = []
        for index, title in enumerate(("summary", "revenue", "churn", "appendix")):
            sections.append(
                cq.submit(
                    "reports.section",
                    {"month": "2026-11", "section": title, "api_token": "sk_live_not_shown"},
                    queue="reports",
                    parent_id=parent.id,
                    root_id=parent.id,
                    correlation_id="req-7f3a",
                    metadata={"page_budget": 12 - index},
                    priority=5 - index,
                )
            )
            clock.advance(120)
        clock.advance(2_000)
        done = _claim(cq, "reports", "reports.section", WORKERS[1], lease_ms=600_000)
        clock.advance(9_000)
        cq.backend.run(
            kernel.complete(done, WORKERS[1], json.dumps({"pages": 3, "ok": True})), write=True
        )
        running = _claim(cq, "reports", "reports.section", WORKERS[1], lease_ms=600_000)
        clock.set(now - 4_000)
        cq.backend.run(
            kernel.progress(running, WORKERS[1], 0.62, "rendering chart 5 of 8"), write=True
        )
        # Queued work waiting, some of it for a while; a delayed task; a failed one.
        for offset in (900_000, 420_000, 60_000, 30_000):
            clock.set(now - offset)
            cq.submit("email.send", {"to": f"user{offset}@example.com"}, queue="emails")
        cq.submit("email.digest", {"week": 48}, queue="emails", delay_ms=3_600_000)
        clock.set(now - 200_000)
        cq.submit("images.resize", {"src": "s3://bucket/cat.png", "width": 640}, queue="media")
        media = _claim(cq, "media", "images.resize", WORKERS[1])
        clock.set(now - 150_000)
        err = _error(
            "DecodeError",
            "handler_error",
            "cannot identify image file 'cat.png'",
            traceback_tail="PIL.UnidentifiedImageError",
        )
        cq.backend.run(kernel.fail(media, WORKERS[1], err, retryable=False, delay_ms=0), write=True)
        cq.submit("default.ping", queue="default")
        clock.set(now - 1_000)
        for worker, queues in zip(
            WORKERS, (["emails", "media"], ["reports", "media"]), strict=True
        ):
            op = _presence.worker_start(worker, queues, "app-host-1", 4242, 8)
            cq.backend.run(op, write=True)
        running_id = str(running.id)
    return running_id, asyncio.run(run_logged(path))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shoot(
    path: Path, task_ids: tuple[str, str], out: Path, chromium: str, only: tuple[str, ...]
) -> list[Path]:
    """Serve the dashboard over ``path`` and save the ``only`` screenshots in ``out``."""
    import uvicorn
    from playwright.sync_api import sync_playwright

    port = _free_port()
    app = create_app(str(path), title="cairnq")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    written: list[Path] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(
                viewport={"width": 1360, "height": 860}, device_scale_factor=1, color_scheme="light"
            )
            running, logged = task_ids
            addresses = {
                "overview": "/",
                "task": f"/task?id={running}",
                "task-logs": f"/task?id={logged}",
                "trends": "/trends?by=name&since=7d",
            }
            for shot in only:
                page.goto(base + addresses[shot])
                file = out / f"dashboard-{shot}.png"
                page.screenshot(path=str(file), full_page=True)
                written.append(file)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs", help="folder for the PNG files (docs)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium executable")
    parser.add_argument(
        "--only", default=",".join(SHOTS), help=f"comma-separated, of {', '.join(SHOTS)}"
    )
    args = parser.parse_args(argv)
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    if not only or set(only) - set(SHOTS):
        print(f"--only takes some of {', '.join(SHOTS)}", file=sys.stderr)
        return 2
    if not os.path.exists(args.chromium):
        print(f"no Chromium at {args.chromium}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "demo.db"
        task_ids = seed(path)
        written = shoot(path, task_ids, out, args.chromium, only)
    for file in written:
        print(f"wrote {file} ({file.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
