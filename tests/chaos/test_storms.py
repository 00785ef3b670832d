"""Concurrency storms: many processes at one row, one key, one lease (docs/guarantees.md)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairnq import kernel

from .._connections import postgres_connections
from .._db import Database
from .harness import Config, Run
from .history import Recorder, load
from .programs import open_gate

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


CLAIM_ROUNDS = 10
DEAD_LEASE_MS = 100


def storm(run: Run, role: str, count: int, **spec: Any) -> Run:
    """``count`` processes of ``role`` (``programs``) on ``run``'s database, let go at one
    instant once every one of them stands at the gate; returns when all have exited."""
    with postgres_connections(run.db.kind, many=True):
        return _storm(run, role, count, **spec)


def _storm(run: Run, role: str, count: int, **spec: Any) -> Run:
    gate = run.folder / "gate"
    gate.mkdir()
    procs = [
        run._spawn(
            role,
            {
                "db": json.loads(run.db.spec()),
                "history": str(run.folder / f"{role}-{p}.jsonl"),
                "gate": str(gate),
                "mutant": run.config.mutant,
                **spec,
            },
        )
        for p in range(count)
    ]
    try:
        open_gate(gate, procs)
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return run


def claim_storm(
    db: Database, folder: Path, mutant: str | None = None, *, expired: bool = False
) -> Run:
    """Fifty claimers (5 processes x 10) fire at one queued task, round after round (each
    round's task in a queue of its own). With ``expired``, every task is first claimed by
    a worker whose lease runs out before the storm, so the claimers must recover it."""
    run = Run(db, folder, Config(workers=0, clients=0, mutant=mutant))
    with db.sync_client() as client:
        for r in range(CLAIM_ROUNDS):
            client.submit("job", {"r": r}, queue=f"storm{r}")
            if expired:
                # No recovery by these claims (recover_limit 0): every expired lease is
                # left to the storm, however long this loop takes.
                draws = [kernel.Draw(None, 1)]
                dead = kernel.claim([f"storm{r}"], "dead", DEAD_LEASE_MS, draws, 0)
                assert len(client.backend.run(dead, write=True)) == 1
    if expired:
        time.sleep(2 * DEAD_LEASE_MS / 1000)  # the last dead lease runs out
    return storm(
        run,
        "claimers",
        5,
        rounds=CLAIM_ROUNDS,
        interval_s=0.25,
        per_process=10,
        lease_ms=30_000,
    )


def keyed_storm(
    db: Database,
    folder: Path,
    conflict: str,
    mutant: str | None = None,
    unique_for_ms: int | None = None,
    per_key: int = 10,
) -> Run:
    """Five processes submit the same 5 keys, ``per_key`` (ten) times each, all at one
    instant: 250 keyed submits. No busy error may reach a caller (E2): each waits its
    turn. With
    ``unique_for_ms``, the processes still start at one instant, but each submits each
    key's ten times in turn, giving that ``unique_for`` and canceling the task it got
    before the next submit of the key (the keys side by side)."""
    run = Run(db, folder, Config(workers=0, clients=0, mutant=mutant, allow_busy_errors=False))
    return storm(
        run, "keyed", 5, keys=5, per_key=per_key, conflict=conflict, unique_for_ms=unique_for_ms
    )


def _claims(folder: Path) -> list[dict[str, Any]]:
    return [e for e in load(sorted(folder.glob("*.jsonl"))) if e["event"] == "claim_ok"]


def test_fifty_claimers_on_one_task_make_exactly_one_claim(db: Database, tmp_path: Path) -> None:
    run = claim_storm(db, tmp_path)
    claims = _claims(tmp_path)
    assert Counter(e["task"] for e in claims) == Counter(
        dict.fromkeys({e["task"] for e in claims}, 1)
    )
    assert len(claims) == CLAIM_ROUNDS
    assert not [e for e in load(sorted(tmp_path.glob("*.jsonl"))) if e["event"] == "claim_error"]
    report = run.check()
    assert report.valid, report.summary()


def test_fifty_claimers_on_one_expired_lease_recover_and_claim_it_once(
    db: Database, tmp_path: Path
) -> None:
    run = claim_storm(db, tmp_path, expired=True)
    claims = _claims(tmp_path)
    assert len(claims) == CLAIM_ROUNDS
    assert {e["attempt"] for e in claims} == {2}
    report = run.check()
    assert report.valid, report.summary()
    assert report.counters["recoveries"] == CLAIM_ROUNDS


@pytest.mark.parametrize("conflict", ["reuse", "reuse-succeeded", "reject", "replace"])
def test_fifty_concurrent_keyed_submits_keep_one_live_task_per_key(
    db: Database, tmp_path: Path, conflict: str
) -> None:
    run = keyed_storm(db, tmp_path, conflict)
    events = load(sorted(tmp_path.glob("*.jsonl")))
    oks = [e for e in events if e["event"] == "submit_ok"]
    report = run.check()
    assert report.valid, report.summary()
    assert not [e for e in events if e["event"] == "submit_info"]
    per_key = {key: {e["task"] for e in oks if e["key"] == key} for key in {e["key"] for e in oks}}
    if conflict in ("reuse", "reuse-succeeded"):
        assert all(len(tasks) == 1 for tasks in per_key.values()), per_key
        assert len(oks) == 250
    if conflict == "reject":
        assert all(len(tasks) == 1 for tasks in per_key.values())
        assert len(oks) == 5
        assert sum(e["event"] == "submit_fail" for e in events) == 245
    if conflict == "replace":
        assert len(oks) == 250
        with db.sync_client() as client:
            live = [t for t in client.list(limit=500) if t.status == "queued"]
        assert len(live) == 5


def test_fifty_concurrent_unique_submits_that_cancel_keep_one_task_per_key(
    db: Database, tmp_path: Path
) -> None:
    run = keyed_storm(db, tmp_path, "reuse", unique_for_ms=600_000)
    events = load(sorted(tmp_path.glob("*.jsonl")))
    oks = [e for e in events if e["event"] == "submit_ok"]
    report = run.check()
    assert report.valid, report.summary()
    assert len(oks) == 250
    per_key = {key: {e["task"] for e in oks if e["key"] == key} for key in {e["key"] for e in oks}}
    assert all(len(tasks) == 1 for tasks in per_key.values()), per_key
    with db.sync_client() as client:
        counts = client.stats()["default"]
    assert (counts["canceled"], sum(counts.values())) == (5, 5)


def test_purge_racing_retry_and_recovery_deletes_only_settled_rows(
    db: Database, tmp_path: Path
) -> None:
    """A loop purging everything finished, while tasks fail, are retried and recovered."""
    import threading

    config = Config(
        workers=2,
        clients=2,
        tasks_per_client=60,
        mix=(2, 3, 3, 1),
        lease_ms=500,
        heartbeat_ms=100,
        seed=21,
    )
    run = Run(db, tmp_path, config)
    stop = threading.Event()

    record = Recorder(tmp_path / "churn.jsonl")

    def churn() -> None:
        with db.sync_client() as client:
            while not stop.is_set():
                record("purge_invoke", older_than_ms=0, status=None, queue=None)
                client.purge(older_than_ms=0, limit=5)
                for task in client.list(status="failed", limit=5):
                    client.retry(task.id)
                time.sleep(0.01)

    churner = threading.Thread(target=churn)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients()
        churner.start()
        run.kill_randomly(4.0, every_s=(0.8, 1.2))
        run.wait_clients()
        time.sleep(1.0)
        stop.set()
        churner.join()
        run.quiesce()
    finally:
        stop.set()
        run.stop()
        record.close()
    report = run.check()
    assert report.valid, report.summary()
    deletes = [
        r
        for r in __import__("tests.chaos.dbtools", fromlist=["x"]).transitions(db)
        if r["tbl"] == "task" and r["op"] == "delete"
    ]
    assert deletes
