"""Seed a demo database, serve the dashboard and save screenshots of it.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs] [--chromium /usr/bin/chromium]

Writes ``dashboard-overview.png`` and ``dashboard-task.png``. The demo holds
several queues, tasks in every status finished over the last hour, a running
task reporting progress (a child of a parent with more children) and a failed
task with an error envelope. Needs uvicorn and the playwright package.
"""

from __future__ import annotations

import argparse
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

from cairnq import SyncCairnQ, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.presence import _ops as _presence
from cairnq.models import Lease
from cairnq.testing import FakeClock

WORKERS = ("worker_01JDEMO0MAILER00000000000", "worker_01JDEMO0RENDER00000000000")
HOUR_MS = 3_600_000


def _claim(cq: SyncCairnQ, queue: str, name: str, worker: str, lease_ms: int = 60_000) -> Any:
    op = kernel.claim([queue], worker, lease_ms, [kernel.Draw([name], 1)], 100)
    (row,) = cq.backend.run(op, write=True)
    return Lease.of(row)


def _error(kind: str, code: str, message: str, **details: Any) -> str:
    return json.dumps(
        {"type": kind, "code": code, "message": message, "retryable": False, "details": details}
    )


def seed(path: Path) -> str:
    """Fill ``path`` with the demo; returns the id of the running child task."""
    rng = random.Random(7)
    now = int(time.time() * 1000)
    clock = FakeClock(now - HOUR_MS)
    with SyncCairnQ.sqlite(path, clock=clock) as cq:
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
        return str(running.id)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shoot(path: Path, task_id: str, out: Path, chromium: str) -> None:
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
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(
                viewport={"width": 1360, "height": 860}, device_scale_factor=1, color_scheme="light"
            )
            page.goto(base + "/")
            page.screenshot(path=str(out / "dashboard-overview.png"), full_page=True)
            page.goto(f"{base}/task?id={task_id}")
            page.screenshot(path=str(out / "dashboard-task.png"), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs", help="folder for the PNG files (docs)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium executable")
    args = parser.parse_args(argv)
    if not os.path.exists(args.chromium):
        print(f"no Chromium at {args.chromium}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "demo.db"
        task_id = seed(path)
        shoot(path, task_id, out, args.chromium)
    print(f"wrote {out / 'dashboard-overview.png'} and {out / 'dashboard-task.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
