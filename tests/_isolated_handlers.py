"""Handlers a worker runs in child processes (``isolate=True``): module-level, so a
spawned child imports them by name."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def sleeper(ctx: Any, payload: dict[str, Any]) -> str:
    """Write the child's pid to ``payload["pidfile"]``, then sleep far past any test.

    The pid goes to a temporary name first and is renamed into place, so a test that
    sees the file sees the whole pid (a test polls for the file's existence)."""
    pidfile = Path(payload["pidfile"])
    partial = pidfile.with_name(pidfile.name + ".partial")
    partial.write_text(str(os.getpid()))
    partial.replace(pidfile)
    time.sleep(600)
    return "woke up"


def adder(ctx: Any, payload: dict[str, int]) -> dict[str, Any]:
    """The sum, with what the child saw of its task."""
    return {"sum": payload["a"] + payload["b"], "task_id": ctx.task_id, "pid": os.getpid()}


def breaker(ctx: Any, payload: Any) -> None:
    raise ValueError("broken in the child")
