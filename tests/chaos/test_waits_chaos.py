"""Durable waits under a ``kill -9``, checked by the waits' invariants (EV-1, EV-2, EV-3,
SL-1); and each waits mutant caught by the invariant of the guarantee it breaks.

The scenario: events sent before their waits begin, waits parked before their events
come, sends with an id each sent twice (a sender's retry), a fanout event, sleeps of
about a second, retries after a wait, and one of two worker processes killed with
SIGKILL while tasks wait; a third worker takes over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairnq import SyncCairnQ

from .._db import Database, admin_connect
from .checker import Violation
from .history import load
from .waits_checker import WaitsHistory, check_waits
from .waits_program import mutated_statements

pytestmark = [pytest.mark.chaos]

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("k0", "k1", "k2", "k3")
KEPT_FIRST = ("k0", "k1")  # two events each are sent before any wait begins


def _worker(db: Database, tmp: Path, name: str, mutant: str | None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.chaos.waits_program",
            db.spec(),
            str(tmp / f"{name}.jsonl"),
            str(tmp / "stop"),
            mutant or "",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _rows(db: Database, query: str) -> list[dict[str, Any]]:
    if db.kind == "sqlite":
        assert db.path is not None
        with contextlib.closing(sqlite3.connect(db.path)) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(query).fetchall()]
    from psycopg import sql
    from psycopg.rows import dict_row

    with admin_connect(db.url) as conn:
        conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(db.schema or "")))
        with conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(query).fetchall())


def waits_run(db: Database, tmp: Path, mutant: str | None) -> tuple[list[Violation], bool]:
    """Run the scenario (under ``mutant``); returns the violations and whether every task ended."""
    sends: list[dict[str, Any]] = []
    with mutated_statements(mutant, db.kind), SyncCairnQ(db.backend()) as cq:

        def send(key: str, n: int, to: str = "one", send_id: str | None = None) -> None:
            payload = f"{key}-{n}"
            sent = cq.events.send(key, payload, to=to, id=send_id)
            sends.append({"event": "send", "seq": sent.seq, "key": key, "to": to,
                          "payload": payload, "id": send_id})  # fmt: skip

        for key in KEPT_FIRST:
            send(key, 1)
            send(key, 2)
        tasks = [
            cq.submit("approve", {"key": key, "fail_once": i == 1}, max_attempts=3)
            for key in KEYS
            for i in range(3)
        ]
        tasks += [cq.submit("approve", {"key": "bcast"}) for _ in range(3)]
        tasks += [cq.submit("nap", {"ms": 1_000 + 100 * i}) for i in range(6)]
        first, second = _worker(db, tmp, "a", mutant), _worker(db, tmp, "b", mutant)
        third = None
        try:
            parked = "select 1 from cairnq_waits where state = 'waiting'"
            assert _until(lambda: len(_rows(db, parked)) >= 8, 30), "the waits never parked"
            os.kill(first.pid, signal.SIGKILL)
            third = _worker(db, tmp, "c", mutant)
            send("k0", 3)
            send("k1", 3)
            for key in ("k2", "k3"):
                for n in (1, 2, 3):
                    # A sender retrying with its send's id: delivered once.
                    send(key, n, send_id=f"{key}-{n}")
                    send(key, n, send_id=f"{key}-{n}")
            send("bcast", 1, to="all")
            ended = _until(
                lambda: all((t := cq.get(task.id)) is not None and t.is_terminal for task in tasks),
                8 if mutant else 60,
            )
        finally:
            (tmp / "stop").touch()
            if first.poll() is None:
                first.kill()
            first.communicate(timeout=30)
            for proc in (second, third):
                if proc is not None:
                    proc.communicate(timeout=60)
        finals = [
            {"id": t.id, "status": t.status}
            for t in (cq.get(task.id) for task in tasks)
            if t is not None
        ]
    events = load([tmp / f"{name}.jsonl" for name in ("a", "b", "c")])
    history = WaitsHistory(
        events=[*sends, *events],
        waits=_rows(db, "select * from cairnq_waits"),
        mailbox=_rows(db, "select * from cairnq_waits_mailbox"),
        tasks=finals,
        now_ms=int(time.time() * 1000),
    )
    return check_waits(history), ended


def test_waits_keep_their_guarantees_through_a_kill_9(db: Database, tmp_path: Path) -> None:
    violations, ended = waits_run(db, tmp_path, None)
    assert [str(v) for v in violations] == []
    assert ended


@pytest.mark.mutants
@pytest.mark.parametrize(
    ("mutant", "invariant"),
    [
        ("event_taken_twice", "EV-1"),
        ("send_misses_waiters", "EV-2"),
        ("sleep_wakes_early", "SL-1"),
        ("send_id_forgotten", "EV-3"),
    ],
)
def test_each_waits_mutant_is_caught_by_its_invariant(
    db: Database, tmp_path: Path, mutant: str, invariant: str
) -> None:
    violations, _ = waits_run(db, tmp_path, mutant)
    assert invariant in {v.invariant for v in violations}
