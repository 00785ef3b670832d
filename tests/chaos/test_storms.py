"""Concurrency storms: many processes at one row, one key, one lease (docs/guarantees.md)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairnq.protocol import ops as _ops

from .._db import Database
from .harness import Config, Run
from .history import Recorder, load
from .programs import open_gate

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def _storm(db: Database, folder: Path, role: str, count: int, **spec: Any) -> Run:
    run = Run(db, folder, Config(workers=0, clients=0))
    gate = folder / "gate"
    gate.mkdir()
    procs = [
        run._spawn(
            role,
            {
                "db": json.loads(db.spec()),
                "history": str(folder / f"{role}-{p}.jsonl"),
                "gate": str(gate),
                **spec,
            },
        )
        for p in range(count)
    ]
    open_gate(gate, len(procs))
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    return run


def test_fifty_claimers_on_one_task_make_exactly_one_claim(db: Database, tmp_path: Path) -> None:
    rounds = 10
    with db.sync_client() as client:
        for r in range(rounds):
            client.submit("job", {}, queue=f"storm{r}")
    run = _storm(
        db,
        tmp_path,
        "claimers",
        5,
        rounds=rounds,
        interval_s=0.25,
        per_process=10,
        lease_ms=30_000,
    )
    claims = [e for e in load(sorted(tmp_path.glob("*.jsonl"))) if e["event"] == "claim_ok"]
    assert Counter(e["task"] for e in claims) == Counter(
        dict.fromkeys({e["task"] for e in claims}, 1)
    )
    assert len(claims) == rounds
    assert not [e for e in load(sorted(tmp_path.glob("*.jsonl"))) if e["event"] == "claim_error"]
    report = run.check()
    assert report.valid, report.summary()


def test_fifty_claimers_on_one_expired_lease_recover_and_claim_it_once(
    db: Database, tmp_path: Path
) -> None:
    rounds = 10
    with db.sync_client() as client:
        for r in range(rounds):
            client.submit("job", {}, queue=f"storm{r}")
            client.backend.run(
                _ops.claim([f"storm{r}"], "dead", 100, [_ops.Draw(None, 1)], 100), write=True
            )
    time.sleep(0.2)
    run = _storm(
        db,
        tmp_path,
        "claimers",
        5,
        rounds=rounds,
        interval_s=0.25,
        per_process=10,
        lease_ms=30_000,
    )
    claims = [e for e in load(sorted(tmp_path.glob("*.jsonl"))) if e["event"] == "claim_ok"]
    assert len(claims) == rounds
    assert {e["attempt"] for e in claims} == {2}
    report = run.check()
    assert report.valid, report.summary()
    assert report.counters["recoveries"] == rounds


@pytest.mark.parametrize("conflict", ["reuse", "reuse-succeeded", "reject", "replace"])
def test_fifty_concurrent_keyed_submits_keep_one_live_task_per_key(
    db: Database, tmp_path: Path, conflict: str
) -> None:
    run = _storm(db, tmp_path, "keyed", 5, keys=5, per_key=10, conflict=conflict)
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
