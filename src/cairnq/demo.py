"""``cairnq demo``: a worker and a client on one SQLite file, with live progress."""

from __future__ import annotations

import asyncio
import random
import shlex
import time
from typing import Any, TextIO

from ._ids import ulid
from .client import CairnQ
from .models import Task
from .worker import TaskContext, Worker

DEMO_DB = "cairnq-demo.db"

SAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("demo.resize_image", {"image": "cat.png", "width": 640}),
    ("demo.resize_image", {"image": "dog.png", "width": 1280}),
    ("demo.resize_image", {"image": "owl.png", "width": 320}),
    ("demo.transcribe", {"audio": "standup.wav", "seconds": 42}),
    ("demo.transcribe", {"audio": "interview.wav", "seconds": 95}),
    ("demo.send_email", {"to": "ada@example.com", "template": "welcome"}),
    ("demo.send_email", {"to": "grace@example.com", "template": "receipt"}),
    ("demo.flaky_upload", {"file": "report.pdf"}),
]


def build_worker(cq: CairnQ) -> Worker:
    """The demo's worker: four handlers, one of which fails once before it succeeds."""
    worker = Worker(cq, concurrency=4, retry_backoff_ms=200, heartbeat_interval="500ms")

    async def steps(ctx: TaskContext, label: str, count: int) -> None:
        for step in range(1, count + 1):
            await asyncio.sleep(random.uniform(0.05, 0.15))
            await ctx.progress(step / count, f"{label} {step}/{count}")

    @worker.task("demo.resize_image")
    async def resize_image(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await steps(ctx, "resizing", 5)
        return {
            "image": payload["image"],
            "width": payload["width"],
            "bytes": 1000 * payload["width"],
        }

    @worker.task("demo.transcribe")
    async def transcribe(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await steps(ctx, "transcribing", 8)
        return {"audio": payload["audio"], "words": payload["seconds"] * 2}

    @worker.task("demo.send_email")
    def send_email(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.1)
        ctx.progress(1.0, "sent")
        return {"to": payload["to"], "accepted": True}

    @worker.task("demo.flaky_upload")
    async def flaky_upload(ctx: TaskContext, payload: dict[str, Any]) -> dict[str, Any]:
        await steps(ctx, "uploading", 3)
        if ctx.attempt == 1:
            raise ConnectionError("storage timed out (the demo fails this once on purpose)")
        return {"file": payload["file"], "attempts": ctx.attempt}

    return worker


def _bar(fraction: float | None, width: int = 20) -> str:
    filled = round((fraction or 0.0) * width)
    return "#" * filled + "." * (width - filled)


def _render(tasks: list[Task], out: TextIO, live: bool, final: bool = False) -> None:
    """One frame of the task table.

    A live frame (a terminal) is drawn over the previous one and leaves the cursor
    at its first line, so the next frame replaces it; the final frame in a terminal
    replaces the last live one and leaves the cursor below it. Elsewhere (a pipe,
    a file) each frame is printed after the previous one.
    """
    lines = []
    for task in tasks:
        note = task.message or ""
        if task.status == "queued" and task.attempt:
            note = f"retrying after attempt {task.attempt}"
        lines.append(
            f"  {task.name:<18} {task.status:<9} [{_bar(task.progress)}] "
            f"{int((task.progress or 0) * 100):>3}%  {note}"
        )
    if live:
        out.write("\x1b[2K" + "\n\x1b[2K".join(lines) + "\n")
        out.write("\n" if final else f"\x1b[{len(lines)}A")
    else:
        out.write("\n".join(lines) + "\n\n")
    out.flush()


async def run_demo(path: str = DEMO_DB, out: TextIO | None = None) -> int:
    """Submit the sample tasks, run a worker on them, print progress and a summary.

    Returns:
        0 when every task succeeded, 1 otherwise.
    """
    import sys

    out = out or sys.stdout
    live = out.isatty() if hasattr(out, "isatty") else False
    run_id = "demo_" + ulid()
    out.write(f"cairnq demo: database {path}\n")
    started = time.monotonic()
    async with CairnQ.sqlite(path) as cq:
        worker = build_worker(cq)
        submitted = [await cq.submit(n, p, correlation_id=run_id) for n, p in SAMPLES]
        out.write(f"submitted {len(submitted)} tasks; worker running with concurrency 4\n\n")
        async with worker.background():
            last = 0.0
            while True:
                tasks = [t for t in [await cq.get(s.id) for s in submitted] if t is not None]
                if all(t.is_terminal for t in tasks):
                    break
                if live or time.monotonic() - last > 1.0:
                    _render(tasks, out, live)
                    last = time.monotonic()
                await asyncio.sleep(0.1)
        final = [t for t in [await cq.get(s.id) for s in submitted] if t is not None]
    _render(final, out, live, final=True)
    succeeded = sum(t.is_succeeded for t in final)
    retried = sum(t.attempt > 1 for t in final)
    elapsed = time.monotonic() - started
    out.write(
        f"summary: {succeeded}/{len(submitted)} succeeded, {retried} after a retry, "
        f"in {elapsed:.1f} s\n"
    )
    for task in final:
        out.write(f"  {task.name:<18} {task.status:<9} result={task.result}\n")
    out.write(next_step(path))
    return 0 if succeeded == len(submitted) else 1


def next_step(path: str) -> str:
    """What the demo suggests doing next: look at its tasks, then write your own."""
    db = "" if path == "cairnq.db" else f" --db {shlex.quote(path)}"
    return (
        f"\nnext: `cairnq{db} ls` lists these tasks (`cairnq{db} dashboard` shows them, with the\n"
        "      dashboard extra); the Quick start in README.md writes your own worker and client\n"
    )
