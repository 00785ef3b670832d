"""One schedule, four real worker processes, the evaluating one killed with ``kill -9``:
every slot of the run is submitted exactly once, as the database records it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairnq import SyncCairnQ
from cairnq.extensions.schedules._ops import slot_key
from cairnq.extensions.schedules._scheduler import LEASE_NAME

from ._db import Database, admin_connect

ROOT = Path(__file__).resolve().parents[1]
SLOTS = 15

pytestmark = pytest.mark.slow


def _spawn(db: Database, worker_id: str, folder: Path) -> subprocess.Popen[bytes]:
    stop = folder / "stop"
    with open(folder / f"{worker_id}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests._child", "scheduler", db.spec(), worker_id, str(stop)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _lease_holder(db: Database) -> str | None:
    """Who holds (or last held) the named lease the schedule evaluators take turns under."""
    query = "select holder from cairnq_locks where name = ?"
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path, timeout=10)  # type: ignore[arg-type]
        try:
            row = conn.execute(query, (LEASE_NAME,)).fetchone()
        finally:
            conn.close()
    else:
        with admin_connect(db.url) as pg:
            pg.execute(f'set search_path to "{db.schema}"')
            row = pg.execute(query.replace("?", "%s"), (LEASE_NAME,)).fetchone()
    return None if row is None else str(row[0])


def _recorded(client: SyncCairnQ) -> int:
    return len(client.schedules.history("tick", limit=500))


def _until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_four_workers_with_the_evaluating_one_killed_twice_submit_every_slot_once(
    db: Database, tmp_path: Path
) -> None:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    killed: list[str] = []
    with db.sync_client() as client:
        created = client.schedules.add("tick", "job", every="1s")
        try:
            for n in range(4):
                procs[f"w{n}"] = _spawn(db, f"w{n}", tmp_path)
            for after in (SLOTS // 3, 2 * SLOTS // 3):
                # The process holding the evaluators' lease, once it has decided enough slots.
                holder = _until(
                    lambda: (
                        (h := _lease_holder(db)) not in (None, *killed)
                        and _recorded(client) >= after  # noqa: B023
                        and h
                    ),
                    f"a live lease holder after {after} slots",
                )
                procs[holder].kill()  # SIGKILL: no drain, the lease is left to expire
                procs[holder].wait()
                killed.append(holder)
                name = f"w{len(procs)}"
                procs[name] = _spawn(db, name, tmp_path)
            _until(lambda: _recorded(client) >= SLOTS + 2, f"{SLOTS + 2} slots recorded")
            client.schedules.pause("tick")
        finally:
            (tmp_path / "stop").touch()
            for proc in procs.values():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        history = list(reversed(client.schedules.history("tick", limit=500)))
        final = client.schedules.get("tick")
        tasks = client.list(name="job", limit=1000)
        keyed = {s.slot_ms: client.get_by_key(slot_key("tick", s.slot_ms)) for s in history}

    assert len(killed) == 2
    assert [p.returncode for name, p in procs.items() if name not in killed] == [0] * 4
    # Every slot from the schedule's creation to its cursor was decided, once, enqueued.
    first = (created.cursor_ms // 1000 + 1) * 1000
    slots = [s.slot_ms for s in history]
    assert len(slots) >= SLOTS
    assert slots == list(range(first, slots[-1] + 1, 1000))
    assert {(s.outcome, s.slots) for s in history} == {("enqueued", 1)}
    assert final is not None and final.next_ms == slots[-1] + 1000
    # The killed holders' leases had to expire (5 s) before another process took over, so
    # the slots that fell meanwhile were caught up late: the takeover path ran.
    assert max(s.recorded_at_ms - s.slot_ms for s in history) >= 2000
    # ... each with exactly one task, the one its record and its key name.
    task_slots = {t.id: t.metadata["cairnq.schedule"]["slot_ms"] for t in tasks}
    assert sorted(task_slots.values()) == slots
    assert all(task_slots[s.task_id] == s.slot_ms for s in history)  # type: ignore[index]
    assert all(keyed[s.slot_ms].id == s.task_id for s in history)  # type: ignore[union-attr]
